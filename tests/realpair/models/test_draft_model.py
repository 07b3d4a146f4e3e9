"""The distilled-draft format: restricted head, LoRA merge, file round trip, alpha, and losslessness."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from spectr_gbv.gpu import SpeculativeDecoder  # noqa: E402
from spectr_gbv.realpair.models.draft import (  # noqa: E402
    RestrictedHead,
    acceptance_rate,
    build_draft,
    read_draft_weights,
    save_draft_weights,
    shipped_weights_path,
    truncated_draft,
)
from tests.gpu.tiny_models import law_test, tiny_llama  # noqa: E402

V = 6


def tied_target(seed: int = 0, layers: int = 2):
    model = tiny_llama(V, seed=seed, num_layers=layers, initializer_range=0.3)
    model.lm_head.weight = model.model.embed_tokens.weight  # tied, like SmolLM2
    return model


def diff_tensors(target, rank: int = 2, ids=(0, 2, 3, 5), seed: int = 1, layers: int = 1) -> tuple[dict, dict]:
    gen = torch.Generator().manual_seed(seed)
    tensors = {
        "vocab_ids": torch.tensor(ids),
        "norm.weight": torch.rand(target.config.hidden_size, generator=gen) + 0.5,
    }
    for i in range(layers):
        for name, mod in target.model.layers[i].named_modules():
            short = name.rsplit(".", 1)[-1]
            if isinstance(mod, torch.nn.Linear):
                out_f, in_f = mod.weight.shape
                tensors[f"layers.{i}.{short}.lora_A"] = torch.randn(rank, in_f, generator=gen)
                tensors[f"layers.{i}.{short}.lora_B"] = torch.randn(out_f, rank, generator=gen) * 0.1
    meta = dict(num_layers=layers, lora_scale=0.5, hidden_size=target.config.hidden_size, vocab_size=V)
    return tensors, meta


def test_restricted_head_puts_minus_inf_outside_the_subset_and_matches_the_rows():
    w = torch.randn(3, 4)
    head = RestrictedHead(w, torch.tensor([4, 0, 2]), 6)
    h = torch.randn(2, 5, 4)
    out = head(h)
    assert out.shape == (2, 5, 6)
    assert torch.isinf(out[..., [1, 3, 5]]).all() and (out[..., [1, 3, 5]] < 0).all()
    torch.testing.assert_close(out[..., [4, 0, 2]], h @ w.T)
    assert torch.softmax(out, -1)[..., [1, 3, 5]].max() == 0.0


@pytest.mark.parametrize(
    "w, ids, vocab, match",
    [
        (torch.randn(3, 4), torch.tensor([0, 1]), 6, "weight"),
        (torch.randn(2, 4), torch.tensor([0, 6]), 6, "0..5"),
        (torch.randn(2, 4), torch.tensor([-1, 2]), 6, "0..5"),
        (torch.randn(2, 4), torch.tensor([2, 2]), 6, "repeat"),
    ],
)
def test_restricted_head_rejects_bad_shapes_and_ids(w, ids, vocab, match):
    with pytest.raises(ValueError, match=match):
        RestrictedHead(w, ids, vocab)


def test_build_draft_merges_factors_exactly_and_leaves_the_target_alone():
    target = tied_target()
    before = {k: v.clone() for k, v in target.state_dict().items()}
    tensors, meta = diff_tensors(target)
    draft = build_draft(target, tensors, meta)
    q_proj = draft.model.layers[0].self_attn.q_proj.weight
    expected = target.model.layers[0].self_attn.q_proj.weight + 0.5 * (
        tensors["layers.0.q_proj.lora_B"] @ tensors["layers.0.q_proj.lora_A"]
    )
    torch.testing.assert_close(q_proj, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(draft.model.norm.weight, tensors["norm.weight"], rtol=0, atol=0)
    assert len(draft.model.layers) == 1 and draft.model.embed_tokens is target.model.embed_tokens
    for k, v in target.state_dict().items():
        assert torch.equal(v, before[k]), k
    logits = draft(input_ids=torch.tensor([[1, 2, 3]])).logits
    assert torch.isinf(logits[..., [1, 4]]).all()
    assert torch.isfinite(logits[..., [0, 2, 3, 5]]).all()


def test_zero_factors_give_the_truncated_target_on_the_kept_ids():
    target = tied_target()
    tensors, meta = diff_tensors(target, ids=tuple(range(V)))
    for k in tensors:
        if k.endswith("lora_B"):
            tensors[k].zero_()
    tensors["norm.weight"] = target.model.norm.weight.detach().clone()
    ids = torch.tensor([[3, 1, 4, 1]])
    torch.testing.assert_close(
        build_draft(target, tensors, meta)(input_ids=ids).logits, truncated_draft(target, 1)(input_ids=ids).logits
    )


def test_file_round_trip_keeps_factors_to_fp16_and_the_metadata(tmp_path):
    target = tied_target()
    tensors, meta = diff_tensors(target)
    digest = save_draft_weights(tmp_path / "d.safetensors", tensors, meta)
    assert len(digest) == 64
    back, meta_back = read_draft_weights(tmp_path / "d.safetensors")
    assert meta_back == meta and set(back) == set(tensors)
    assert back["layers.0.q_proj.lora_A"].dtype == torch.float16
    assert torch.equal(back["vocab_ids"], tensors["vocab_ids"])
    torch.testing.assert_close(
        back["layers.0.q_proj.lora_A"].float(), tensors["layers.0.q_proj.lora_A"], rtol=1e-3, atol=1e-3
    )


def test_bad_files_and_mismatched_targets_raise(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        read_draft_weights(tmp_path / "missing.safetensors")
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(1)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(ValueError, match="not a spectr_gbv draft"):
        read_draft_weights(tmp_path / "plain.safetensors")
    target = tied_target()
    tensors, meta = diff_tensors(target)
    with pytest.raises(ValueError, match="trained for a target"):
        build_draft(target, tensors, {**meta, "vocab_size": V + 1})
    with pytest.raises(ValueError, match="trained for a target"):
        build_draft(target, tensors, {**meta, "num_layers": 3})
    bad = dict(tensors)
    bad["layers.0.q_proj.lora_A"] = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="do not fit"):
        build_draft(target, bad, meta)


def test_acceptance_rate_is_one_for_the_target_itself_and_sum_min_otherwise():
    target = tied_target()
    seqs = [torch.tensor([1, 2, 3, 4, 5]), torch.tensor([2, 2, 0])]
    est = acceptance_rate(target, target, seqs, [1, 2])
    assert (
        est.alpha == pytest.approx(1.0, abs=1e-6) and est.positions == 4 + 1 and est.draft_coverage == pytest.approx(1)
    )
    draft = tied_target(seed=3)
    with torch.no_grad():
        p = torch.softmax(target(input_ids=seqs[0][None, :-1]).logits[0] / 0.7, -1)
        q = torch.softmax(draft(input_ids=seqs[0][None, :-1]).logits[0] / 0.7, -1)
    expected = float(torch.minimum(p, q).sum(-1)[1:].mean())
    assert acceptance_rate(target, draft, seqs[:1], [2], 0.7).alpha == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="start"):
        acceptance_rate(target, draft, seqs, [0, 1])
    with pytest.raises(ValueError, match="temperature"):
        acceptance_rate(target, draft, seqs, [1, 1], 0.0)
    with pytest.raises(ValueError, match="equal in length"):
        acceptance_rate(target, draft, seqs, [1])


@pytest.mark.parametrize("method, K", [("mdbv", 3), ("sd", 1), ("spectr", 2)])
def test_a_restricted_vocabulary_draft_stays_lossless(method, K):
    """q = 0 on a third of the vocabulary: the target law must still come out (G-test, V = 6, 2 tokens)."""
    target = tied_target(layers=2)
    tensors, meta = diff_tensors(target, ids=(0, 2, 3, 5))
    draft = build_draft(target, tensors, meta)
    dec = SpeculativeDecoder(target, draft, method=method, num_drafts=K, draft_length=2, seed=11)
    res, stats = law_test(dec, [1, 2], 2, 20_000, alpha=1e-3, power_tv=0.03)
    assert res.p_value > res.alpha, res
    assert res.power >= 0.99
    assert 1 < stats.block_efficiency < 3


def test_shipped_weights_fit_the_size_budget():
    path = shipped_weights_path()
    if not path.exists():
        pytest.skip("weights not built")
    assert path.stat().st_size <= 20 * 1024 * 1024
    tensors, meta = read_draft_weights(path)
    assert meta["vocab_size"] == 49152 and meta["hidden_size"] == 576
    assert tensors["vocab_ids"].numel() == len(set(tensors["vocab_ids"].tolist()))


def test_a_shipped_file_that_is_not_the_released_one_is_refused(tmp_path, monkeypatch):
    from spectr_gbv.realpair.models import draft as draft_model

    target = tied_target()
    path = tmp_path / "d.safetensors"
    save_draft_weights(path, *diff_tensors(target))
    monkeypatch.setattr(draft_model, "shipped_weights_path", lambda: path)
    with pytest.raises(ValueError, match="sha256"):
        draft_model.load_draft(target)
    assert len(draft_model.load_draft(target, path).model.layers) == 1  # an explicit file is the user's choice
