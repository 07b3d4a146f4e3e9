"""``spectr-gbv bench`` library: grid and presets, the runner's counts on tiny random models, extras, output files.

Nothing is downloaded: the pair is two tiny random Llama models (tests/gpu/tiny_models.py), the
peer / prediction / law-test functions are fakes that record their calls (their signatures are
checked against the library functions when those modules are importable).
"""

from __future__ import annotations

import inspect
import json
import math
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.realpair import output as bench_output  # noqa: E402
from spectr_gbv.realpair.extras import ExtraHooks, predict_points  # noqa: E402
from spectr_gbv.realpair.runner import (  # noqa: E402
    DATASETS,
    DEFAULT_METHODS,
    K_AXIS,
    L_AXIS,
    LOSSLESS_PROMPTS,
    METHODS,
    PRESETS,
    T_AXIS,
    BenchConfig,
    BenchModels,
    build_grid,
    encode_prompt,
    estimate_seconds,
    parse_draft_spec,
    run_benchmark,
)
from tests.gpu.tiny_models import perturbed_copy, tiny_llama  # noqa: E402

V = 16
CENTRE = (3, 4, 1.0)


def toy_encode(text: str, chat: bool, max_tokens: int) -> torch.Tensor:
    ids = [ord(c) % V for c in text][-max_tokens:] or [1]
    return torch.tensor(([2] if chat else []) + ids, dtype=torch.int64)


@pytest.fixture(scope="module")
def models():
    target = tiny_llama(V, 0, num_layers=2)
    draft = perturbed_copy(target, 1, 0.3)
    return BenchModels(target, draft, toy_encode, lambda ids: " ".join(map(str, ids.tolist())), "tiny", "tiny-draft")


class Recorder:
    """Fake extras that return fixed values and remember their keyword arguments."""

    def __init__(self, passed: bool = True) -> None:
        self.calls: dict[str, list[dict]] = {"peer": [], "predict": [], "lossless": []}
        self.passed = passed

    def peer(self, target, draft, **kw):
        self.calls["peer"].append(kw)
        return SimpleNamespace(
            tokens_generated=20,
            time_s=2.0,
            target_calls=10,
            tokens_per_second=10.0,
            target_calls_per_token=0.5,
            block_efficiency=2.0,
            summary=lambda: {"block_efficiency": 2.0},
        )

    def predict(self, target, draft, **kw):
        self.calls["predict"].append(kw)
        return [
            SimpleNamespace(
                num_drafts=k,
                draft_length=kw["draft_length"],
                temperature=kw["temperature"],
                cic_bound=0.5 + 0.25 * k,
                cic_bound_se=0.01,
                bv_bound=0.4 + 0.25 * k,
                bv_bound_se=0.01,
                alpha=0.3,
                sd_value=0.3,
                summary=lambda: {},
            )
            for k in kw["num_drafts"]
        ]

    def lossless(self, target, draft, **kw):
        self.calls["lossless"].append(kw)
        return SimpleNamespace(
            g_statistic=3.0,
            p_value=0.5 if self.passed else 1e-9,
            dof=4,
            runs=kw["runs"],
            power=0.9,
            power_tv=0.05,
            observed_tv=0.01,
            passed=self.passed,
            summary=lambda: {},
        )

    def hooks(self) -> ExtraHooks:
        return ExtraHooks(peer=self.peer, predict=self.predict, lossless=self.lossless)


def small_config(**changes) -> BenchConfig:
    base = dict(
        datasets=("cpython",),
        ks=(1, 3),
        ls=(2, 4),
        ts=(0.5, 1.0),
        centre=CENTRE,
        num_prompts=2,
        max_new_tokens=10,
        lossless_runs=50,
        lossless_prompts=("code", "chat"),
        predict_contexts=2,
        lossless_tokens=2,
    )
    return BenchConfig(**{**base, **changes})


@pytest.fixture(scope="module")
def run(models):
    rec = Recorder()
    prompts = {"cpython": [toy_encode("def f(x): return x", False, 32), toy_encode("class A: pass", False, 32)]}
    result = run_benchmark(small_config(), models, prompts, device="cpu", hooks=rec.hooks(), progress=False)
    return result, rec


# ----------------------------------------------------------------------------- grid and presets


def expected_grid(ks, ls, ts, centre):
    kc, lc, tc = centre
    pts = {("ar", 1, 0, float(t)) for t in (*ts, tc)}
    for m in ("spectr", "rrs", "mdbv", "gbv_multipath"):
        pts |= {(m, k, lc, tc) for k in ks} | {(m, kc, n, tc) for n in ls} | {(m, kc, lc, float(t)) for t in ts}
    for m in ("sd", "bv"):
        pts |= {(m, 1, lc, tc)} | {(m, 1, n, tc) for n in ls} | {(m, 1, lc, float(t)) for t in ts}
    return pts


@pytest.mark.parametrize("preset", ["quick", "full"])
def test_presets_grids_contain_exactly_the_configured_points(preset):
    cfg = PRESETS[preset]
    assert (cfg.ks, cfg.ls, cfg.ts, cfg.centre) == (K_AXIS, L_AXIS, T_AXIS, (3, 8, 0.7))
    assert (K_AXIS, L_AXIS, T_AXIS) == ((1, 3, 5, 7), (4, 8, 12, 16), (0.1, 0.4, 0.7))
    grid = cfg.grid()
    keys = [p.key for p in grid]
    assert len(keys) == len(set(keys)) == 51
    assert set(keys) == expected_grid(K_AXIS, L_AXIS, T_AXIS, (3, 8, 0.7))
    centre = {p.method: p.sweeps for p in grid if p.key[2:] == (8, 0.7) and p.num_drafts in (1, 3)}
    assert all(sw == ("K", "L", "T") for m, sw in centre.items() if m != "ar")
    assert [p.method for p in grid][:3] == ["ar"] * 3
    assert {p.num_drafts for p in grid if p.method in ("sd", "bv", "ar")} == {1}
    assert {p.draft_length for p in grid if p.method == "ar"} == {0}


def test_preset_datasets_and_sizes():
    assert PRESETS["quick"].datasets == ("humaneval", "gsm") and PRESETS["full"].datasets == DATASETS
    assert PRESETS["quick"].methods == PRESETS["full"].methods == DEFAULT_METHODS
    assert set(DEFAULT_METHODS) < set(METHODS) and {"traversal", "optimal_multidraft"} <= set(METHODS)
    assert PRESETS["full"].num_prompts > PRESETS["quick"].num_prompts
    assert predict_points(PRESETS["quick"]) == [(8, 0.7)]
    assert PRESETS["quick"].lossless_prompts == ("code",) and PRESETS["full"].lossless_prompts == ("code", "chat")
    with pytest.raises(ValueError, match="lossless_prompts"):
        BenchConfig(lossless_prompts=("poem",))
    assert len(predict_points(PRESETS["full"])) == len(L_AXIS) + len(T_AXIS) - 1


def test_grid_errors_and_ar_always_added():
    with pytest.raises(ValueError, match="unknown method"):
        build_grid(["sd", "nope"], [1], [2], [1.0])
    with pytest.raises(ValueError, match="at least one value"):
        build_grid(["sd"], [], [2], [1.0])
    with pytest.raises(ValueError, match="K >= 1"):
        build_grid(["sd"], [0], [2], [1.0])
    grid = build_grid(["mdbv"], [2], [3], [0.5], centre=(2, 3, 0.5))
    assert [p.key for p in grid] == [("ar", 1, 0, 0.5), ("mdbv", 2, 3, 0.5)]
    with pytest.raises(ValueError, match="datasets"):
        BenchConfig(datasets=("mgsm",))


def test_with_axes_moves_a_missing_centre_to_the_first_value():
    cfg = PRESETS["quick"].with_axes(ks=(1, 2), ls=None, ts=(1.0,))
    assert cfg.centre == (1, 8, 1.0) and cfg.ls == L_AXIS
    assert PRESETS["quick"].with_axes(ks=(5, 3)).centre == (3, 8, 0.7)


def test_parse_draft_spec():
    assert parse_draft_spec("truncated:12") == ("truncated", 12)
    for bad in ("truncated:0", "truncated:x", "truncated", "ngram", ""):
        with pytest.raises(ValueError, match="truncated:N"):
            parse_draft_spec(bad)


class FakeTokenizer:
    eos_token_id = 2

    def __call__(self, text, add_special_tokens=False):
        return SimpleNamespace(input_ids=[ord(c) for c in text])

    def decode(self, ids):
        return "".join(chr(i) for i in ids)

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        assert not tokenize and add_generation_prompt
        return "<u>" + messages[0]["content"] + "</u><a>"


def test_encode_prompt_cuts_code_at_the_front_and_questions_at_the_back():
    tok = FakeTokenizer()
    assert encode_prompt(tok, "abcdef", False, 4).tolist() == [ord(c) for c in "cdef"]
    assert encode_prompt(tok, "abcdef", True, 4).tolist() == [ord(c) for c in "<u>abcd</u><a>"]
    assert encode_prompt(tok, "", False, 4).tolist() == [2]


# ----------------------------------------------------------------------------- runner


def test_rows_cover_the_grid_with_exact_counts(run):
    result, _ = run
    cfg = result.config
    assert [(r.method, r.num_drafts, r.draft_length, r.temperature) for r in result.rows] == [p.key for p in cfg.grid()]
    for r in result.rows:
        assert r.prompts == 2 and r.tokens_generated == 2 * cfg.max_new_tokens
        assert sum(r.accepted_hist) == r.row_iterations == r.target_calls
        assert len(r.accepted_hist) == r.draft_length + 1
        assert r.tokens_emitted == sum((t + 1) * c for t, c in enumerate(r.accepted_hist))
        assert r.block_efficiency == r.tokens_emitted / r.row_iterations
        assert r.tokens_emitted >= r.tokens_generated
        assert r.target_calls_per_token == r.target_calls / r.tokens_generated


def test_ar_block_efficiency_and_speedup_are_exactly_one(run):
    result, _ = run
    ar = [r for r in result.rows if r.method == "ar"]
    assert len(ar) == 2
    for r in ar:
        assert r.block_efficiency == 1.0 and r.speedup == 1.0 and r.accepted_hist == [r.row_iterations]
        assert r.target_calls == 2 * result.config.max_new_tokens
        assert r.block_efficiency_se == 0.0


def test_speedup_is_tokens_per_second_over_ar_at_the_same_temperature(run):
    result, _ = run
    ar = {r.temperature: r.tokens_per_second for r in result.rows if r.method == "ar"}
    for r in result.rows:
        assert r.ar_tokens_per_second == ar[r.temperature]
        assert r.speedup == pytest.approx(r.tokens_per_second / ar[r.temperature], rel=1e-12)
    spec = [r for r in result.rows if r.method != "ar"]
    assert any(r.block_efficiency > 1 for r in spec)
    assert all(1 <= r.block_efficiency <= r.draft_length + 1 for r in spec)


def test_same_seed_gives_the_same_counts(models):
    cfg = small_config(methods=("mdbv",), ls=(2,), ts=(1.0,), centre=(3, 2, 1.0), num_prompts=1)
    prompts = {"cpython": [toy_encode("x = 1", False, 16)]}
    off = dict(peer=False, predict=False, lossless=False)
    a = run_benchmark(BenchConfig(**{**cfg.summary(), **off}), models, prompts, device="cpu", progress=False)
    b = run_benchmark(BenchConfig(**{**cfg.summary(), **off}), models, prompts, device="cpu", progress=False)
    assert [r.accepted_hist for r in a.rows] == [r.accepted_hist for r in b.rows]
    assert a.peer == a.predictions == a.lossless == a.errors == []


def test_step_costs_and_estimate(run):
    result, _ = run
    costs = result.step_costs
    assert costs["decode_s"] > 0 and "3x5" in costs["score_s"] and set(costs["draft_step_s"]) == {1, 3}
    cfg = result.config
    short, long_ = (
        estimate_seconds(cfg, costs),
        estimate_seconds(BenchConfig(**{**cfg.summary(), "max_new_tokens": 40}), costs),
    )
    assert 0 < short["grid_s"] < long_["grid_s"] and short["runs"] == len(cfg.grid()) * 2
    off = estimate_seconds(BenchConfig(**{**cfg.summary(), "peer": False, "predict": False, "lossless": False}), costs)
    assert off["extras_s"] == 0 and off["total_s"] == off["grid_s"]
    assert result.estimate_s > 0 and result.elapsed_s > 0


def test_estimate_never_goes_negative_on_noisy_step_costs():
    # Regression: on a loaded machine a wider scoring call was once timed faster than a narrower
    # one, the extrapolation to the 100-token prefill sloped down, and grid_s came out -0.81 s.
    cfg = small_config()
    noisy = {"decode_s": 0.01, "score_s": {"3x5": 0.002, "3x9": 0.001}, "draft_step_s": {1: 0.004, 3: 0.003}}
    flat = {"decode_s": 0.01, "score_s": {"3x5": 0.01, "3x9": 0.01}, "draft_step_s": {1: 0.004, 3: 0.003}}
    est = estimate_seconds(cfg, noisy)
    assert est == estimate_seconds(cfg, flat)  # the running maximum of the noisy curve
    assert est["grid_s"] > 0 and est["extras_s"] > 0


# ----------------------------------------------------------------------------- extras


def test_peer_is_called_at_the_centre_and_reported_as_ratios(run):
    result, rec = run
    (call,) = rec.calls["peer"]
    assert (call["num_assistant_tokens"], call["temperature"], call["max_new_tokens"], call["seed"]) == (4, 1.0, 10, 0)
    assert len(call["prompts"]) == 2
    (peer,) = result.peer
    sd, mdbv = result.row("cpython", "sd", 1, 4, 1.0), result.row("cpython", "mdbv", 3, 4, 1.0)
    assert peer["ratios"]["vs_sd"]["target_calls_per_token"] == 0.5 / sd.target_calls_per_token
    assert peer["ratios"]["vs_mdbv"]["tokens_per_second"] == 10.0 / mdbv.tokens_per_second
    assert peer["ratios"]["vs_mdbv"]["block_efficiency"] == 2.0 / mdbv.block_efficiency


def test_predictions_use_the_contexts_met_and_compare_one_plus_b(run):
    result, rec = run
    (call,) = rec.calls["predict"]
    assert call["num_drafts"] == [1, 3] and (call["draft_length"], call["temperature"]) == (4, 1.0)
    assert len(call["contexts"]) == 4  # per prompt: itself, then followed by half its ar continuation
    assert call["contexts"][1].numel() == call["contexts"][0].numel() + 5
    assert torch.equal(call["contexts"][1][: call["contexts"][0].numel()], call["contexts"][0])
    by = {(c["method"], c["num_drafts"]): c for c in result.comparisons}
    assert by[("sd", 1)]["reference"] == "SD" and by[("sd", 1)]["predicted_be"] == 1 + 0.3
    assert by[("bv", 1)]["reference"] == "B_BV" and by[("bv", 1)]["predicted_be"] == pytest.approx(1.65)
    assert by[("mdbv", 3)]["reference"] == "B" and by[("mdbv", 3)]["predicted_be"] == 1 + 0.5 + 0.75
    assert by[("mdbv", 3)]["measured_be"] == result.row("cpython", "mdbv", 3, 4, 1.0).block_efficiency
    assert {(c["method"], c["num_drafts"]) for c in result.comparisons} == {
        ("sd", 1),
        ("bv", 1),
        *((m, k) for m in ("spectr", "rrs", "mdbv", "gbv_multipath") for k in (1, 3)),
    }


def test_law_tests_run_for_sd_and_mdbv_on_the_fixed_prompts(run):
    result, rec = run
    calls = rec.calls["lossless"]
    assert [(c["method"], c["num_drafts"]) for c in calls] == [("sd", 1), ("mdbv", 2)] * len(LOSSLESS_PROMPTS)
    assert all((c["runs"], c["num_tokens"], c["draft_length"], c["temperature"]) == (50, 2, 2, 1.0) for c in calls)
    assert [t["prompt"] for t in result.lossless] == ["code", "code", "chat", "chat"]
    assert all(t["passed"] and t["dof"] == 4 for t in result.lossless)


def test_a_failing_extra_is_recorded_and_the_grid_kept(models):
    def boom(*args, **kwargs):
        raise RuntimeError("no GPU\nhere")

    cfg = small_config(methods=("sd",), ls=(2,), ts=(1.0,), centre=(1, 2, 1.0), num_prompts=1, lossless=False)
    prompts = {"cpython": [toy_encode("y = 2", False, 16)]}
    res = run_benchmark(cfg, models, prompts, device="cpu", hooks=ExtraHooks(boom, boom, boom), progress=False)
    assert len(res.rows) == 2 and res.peer == [] and res.predictions == []
    assert res.errors == [
        "peer (cpython): RuntimeError: no GPU here",
        "predictions (cpython, L=2, T=1.0): RuntimeError: no GPU here",
    ]


@pytest.mark.parametrize(
    "module, function, hook",
    [
        ("spectr_gbv.realpair.peer", "assisted_generation_run", "peer"),
        ("spectr_gbv.realpair.predict", "predict_block_efficiency", "predict"),
        ("spectr_gbv.realpair.real_lossless", "first_tokens_law_test", "lossless"),
    ],
)
def test_calls_bind_to_the_library_signatures(run, module, function, hook):
    fn = getattr(pytest.importorskip(module), function)
    _, rec = run
    for kwargs in rec.calls[hook]:
        inspect.signature(fn).bind(object(), object(), **kwargs)


# ----------------------------------------------------------------------------- output files


def test_output_files_round_trip(run, tmp_path):
    result, _ = run
    res = result.to_dict()
    res["machine"] = bench_output.machine_info("cpu", ["spectr-gbv", "bench", "--prompts", "2"])
    files = bench_output.write_outputs(res, tmp_path / "out")
    rows = bench_output.read_runs_csv(files["csv"])
    assert len(rows) == len(result.rows)
    for got, row in zip(rows, result.rows, strict=True):
        want = row.summary()
        for col in bench_output.CSV_COLUMNS:
            same = got[col] == want[col] or (
                isinstance(want[col], float) and math.isnan(want[col]) and math.isnan(got[col])
            )
            assert same, (col, got[col], want[col])
    data = json.loads(files["json"].read_text())
    assert data["machine"]["command"] == "spectr-gbv bench --prompts 2"
    for key in ("platform", "cpu_count", "torch", "transformers", "device", "git_commit", "datetime"):
        assert key in data["machine"]
    assert data["rows"][0]["accepted_hist"] == result.rows[0].accepted_hist
    assert len(data["peer"]) == 1 and len(data["lossless"]) == 4 and data["config"]["centre"] == [3, 4, 1.0]
    assert sorted(p.name for p in files["plots"]) == sorted(
        f"{kind}_cpython.png" for kind in ("be_vs_K", "be_vs_L", "sr_vs_L", "be_vs_T", "hist")
    )
    for path in files["plots"]:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000
    md = files["summary"].read_text()
    for text in (
        "### K sweep (L = 4, T = 1)",
        "### L sweep",
        "### T sweep",
        "Predicted vs measured",
        "Peer:",
        "Losslessness",
    ):
        assert text in md
    assert "standing in for Alpaca" in md and "decode steps" in md
    assert "| mdbv |" in md and "Sample (cpython, ar" in md


def test_read_runs_csv_rejects_other_files(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="runs.csv columns"):
        bench_output.read_runs_csv(path)


def test_field_verifiers_run_in_the_bench(models):
    """traversal and optimal_multidraft are opt-in bench methods; their rows have sane BE."""
    cfg = small_config(methods=("traversal", "optimal_multidraft"), ls=(2,), ts=(1.0,), centre=(3, 2, 1.0))
    prompts = {"cpython": [toy_encode("x = 1", False, 16)]}
    off = dict(peer=False, predict=False, lossless=False)
    result = run_benchmark(BenchConfig(**{**cfg.summary(), **off}), models, prompts, device="cpu", progress=False)
    spec = {r.method: r for r in result.rows if r.method != "ar"}
    assert set(spec) == {"traversal", "optimal_multidraft"}
    assert all(1 <= r.block_efficiency <= r.draft_length + 1 for r in spec.values())
