"""Input checks, output layout, determinism, devices, and regressions of public bug classes.

Bug classes (ECOSYSTEM.md part B) turned into tests here: B1 (HF's trigger: accept 1/9, the
residual excludes the drafted token), B5 (NaN target rows), B6 (all-zero
residual, zero-mass vocabulary tail: never an id >= V, never a default id), B7/B8 (-1 and
out-of-range draft ids), B10 (coin 0 must not accept a draft of target probability 0; half-open
CDF bins), B2/B11 (one-hot q of a greedy draft: accept with probability p(x), residual excludes
x), B12 (a constant uniform must not accept everything). B9 (reused uniform) and a residual
without its block weight are planted bugs in tests/gpu/kernels/test_kernels_parity.py.
Statistical checks here use the convention of tests/gpu/kernels/test_kernels_helpers.py (G-test,
alpha = 1e-5; N and power stated per test).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from spectr_gbv.core.instance import default_instance, random_instance  # noqa: E402
from spectr_gbv.gpu.kernels import (  # noqa: E402
    KERNEL_METHODS,
    KERNELS,
    ROW_SUM_ATOL,
    default_device,
    sd_acceptance_probs,
    validate_inputs,
    verify,
)
from tests.gpu.kernels.test_kernels_helpers import (  # noqa: E402
    ConstantUniforms,
    batch_tensors,
    emitted_counts,
    float_rows,
    g_test,
    heterogeneous_batch,
    run_kernel,
)

LOSSY_OK = {"allow_lossy": True}


def small_batch(dtype: torch.dtype = torch.float64, rows: int = 4) -> tuple:
    """Public test vector, K = 3, drafts sharing prefixes, replicated."""
    groups = [float_rows(default_instance(), ((0, 1), (0, 0), (1, 1)))]
    drafts, q, p, _ = batch_tensors(groups, rows, dtype=dtype)
    return drafts, q, p


# ---------------------------------------------------------------------------- argument checks
def test_kernel_methods_are_the_stable_names():
    assert KERNEL_METHODS == (
        "ar",
        "sd",
        "bv",
        "spectr",
        "rrs",
        "gbv_multipath",
        "mdbv",
        "traversal",
        "optimal_multidraft",
        "near_opt_bv",
        "spectr_gbv_released",
    )
    assert set(KERNELS) == set(KERNEL_METHODS)


def test_unknown_and_lossy_methods():
    d, q, p = small_batch()
    with pytest.raises(ValueError, match="unknown kernel method 'greedy_bv'"):
        verify("greedy_bv", d, q, p)
    with pytest.raises(ValueError, match="lossy"):
        verify("spectr_gbv_released", d, q, p)
    assert verify("spectr_gbv_released", d, q, p, allow_lossy=True).tokens.shape == (4, 3)


@pytest.mark.parametrize("bad_id", [-1, -7, 2, 99])
def test_draft_ids_outside_the_vocabulary_raise(bad_id):
    """B7/B8: placeholder -1 (or any id outside [0, V)) is never gathered, always refused."""
    d, q, p = small_batch()
    d = d.clone()
    d[2, 1, 1] = bad_id
    for method in KERNEL_METHODS:
        with pytest.raises(ValueError, match=r"drafts\[2, 1, 1\] = -?\d+ is outside the vocabulary \[0, 2\)"):
            verify(method, d, q, p, allow_lossy=True)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.25])
@pytest.mark.parametrize("name", ["draft_probs", "target_probs"])
def test_non_finite_or_negative_probabilities_raise(name, value):
    """B5: a NaN (or inf, or negative) row is refused, naming the argument and the entry."""
    d, q, p = small_batch()
    q, p = q.clone(), p.clone()
    (q if name == "draft_probs" else p)[1, 2, 0, 1] = value
    what = "is negative" if value < 0 else "is not finite"
    with pytest.raises(ValueError, match=rf"{name}\[1, 2, 0, 1\] = .* {what}"):
        verify("mdbv", d, q, p)


def test_whole_nan_target_row_raises_for_every_method():
    d, q, p = small_batch()
    p = p.clone()
    p[0, 0, 2] = float("nan")
    for method in KERNEL_METHODS:
        with pytest.raises(ValueError, match=r"target_probs\[0, 0, 2, 0\] = nan is not finite"):
            verify(method, d, q, p, allow_lossy=True)


@pytest.mark.parametrize(("dtype", "ok", "bad"), [(torch.float64, 5e-10, 5e-9), (torch.float32, 5e-5, 5e-4)])
def test_rows_must_sum_to_one_within_the_stated_tolerance(dtype, ok, bad):
    assert ROW_SUM_ATOL == {torch.float32: 1e-4, torch.float64: 1e-9}
    d, q, p = small_batch(dtype)
    for off, raises in ((ok, False), (bad, True)):
        p2 = p.clone()
        p2[3, 1, 1, 0] += off
        if raises:
            with pytest.raises(ValueError, match=r"target_probs\[3, 1, 1\] sums to .* not 1 within"):
                verify("bv", d, q, p2)
        else:
            verify("bv", d, q, p2)


def test_a_drafted_token_of_draft_probability_zero_raises():
    d, q, p = small_batch()
    q = q.clone()
    q[1, 2, 1] = torch.tensor([1.0, 0.0], dtype=q.dtype)  # draft 2 drafted token 1 at t = 1
    with pytest.raises(ValueError, match=r"draft_probs\[1, 2, 1, 1\] = 0 but drafts\[1, 2, 1\] = 1"):
        verify("spectr", d, q, p)


def test_shape_dtype_and_device_errors_name_the_argument():
    d, q, p = small_batch()
    cases = [
        ((d.to(torch.int32), q, p), "drafts: expected dtype torch.int64"),
        ((d[0], q, p), r"drafts: expected shape \[B, K, L\]"),
        ((d, q.half(), p.half()), "draft_probs: expected dtype"),
        ((d, q.float(), p), "dtypes differ"),
        ((d, q, p[:, :, :2]), r"target_probs: expected shape \[B, K, L\+1, V\]"),
        ((d, q[:, :2], p), r"draft_probs: expected shape \[B, K, L, V\]"),
        ((d, q.to("meta"), p), "draft_probs: on device meta, but target_probs is on cpu"),
        ((d.tolist(), q, p), "drafts: expected a torch.Tensor"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            verify("bv", *args)
    with pytest.raises(ValueError, match="generator: expected a torch.Generator"):
        verify("bv", d, q, p, generator=np.random.default_rng(0))


def test_ar_accepts_empty_drafts_and_reads_only_the_root_row():
    p_root = torch.tensor([[0.0, 0.5, 0.5]], dtype=torch.float64)
    p = p_root.expand(6, 1, 1, 3).contiguous()
    out = verify("ar", torch.zeros(6, 1, 0, dtype=torch.int64), torch.zeros(6, 1, 0, 3, dtype=torch.float64), p)
    assert out.tokens.shape == (6, 1) and set(out.tokens[:, 0].tolist()) <= {1, 2}
    with pytest.raises(ValueError, match="L >= 1"):
        verify("sd", torch.zeros(6, 1, 0, dtype=torch.int64), torch.zeros(6, 1, 0, 3, dtype=torch.float64), p)


# ---------------------------------------------------------------------------- output layout
@pytest.mark.parametrize("method", KERNEL_METHODS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_output_layout_on_a_heterogeneous_batch(method, dtype):
    """Prefix = the first tau tokens of drafts[b, draft_index]; Z in range; -1 after Z."""
    instance = random_instance(3, 3, 5, exact=False, zero_prob=0.2)
    drafts, q, p = heterogeneous_batch(instance, 3, 500, 1, dtype=dtype)
    out = verify(method, drafts, q, p, generator=torch.Generator().manual_seed(0), allow_lossy=True)
    B, K, L = drafts.shape
    assert out.tokens.dtype == out.num_accepted.dtype == out.draft_index.dtype == torch.int64
    assert out.tokens.shape == (B, L + 1) and out.num_accepted.shape == out.draft_index.shape == (B,)
    tau = out.num_accepted
    assert bool(((tau >= 0) & (tau <= L)).all()) and bool(((out.draft_index >= 0) & (out.draft_index < K)).all())
    chosen = drafts[torch.arange(B), out.draft_index]
    pos = torch.arange(L + 1)
    prefix = pos[:L] < tau.unsqueeze(-1)
    assert torch.equal(out.tokens[:, :L][prefix], chosen[prefix])
    z = out.tokens[torch.arange(B), tau]
    assert bool(((z >= 0) & (z < instance.n)).all())
    assert bool((out.tokens[pos.unsqueeze(0) > tau.unsqueeze(-1)] == -1).all())
    # Z never has target probability 0 at its position (the row of the emitting draft there)
    p_rows = p[torch.arange(B), out.draft_index, tau]
    if method != "spectr_gbv_released":
        assert bool((p_rows[torch.arange(B), z] > 0).all())
    for value in out.diagnostics.values():
        assert isinstance(value, torch.Tensor) and value.ndim == 0 and value.dtype == torch.int64


@pytest.mark.parametrize("method", KERNEL_METHODS)
def test_same_seed_same_output_and_fresh_seed_differs(method):
    instance = random_instance(3, 2, 8, exact=False)
    drafts, q, p = heterogeneous_batch(instance, 2, 300, 4)

    def run(seed: int) -> tuple:
        out = verify(method, drafts, q, p, generator=torch.Generator().manual_seed(seed), allow_lossy=True)
        return out.tokens, out.num_accepted, out.draft_index

    first, again, other = run(123), run(123), run(124)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


def test_default_device_selection_and_device_agnostic_code_path():
    device = default_device()
    assert device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    d, q, p = small_batch()
    gen = torch.Generator(device=device).manual_seed(0)
    out = verify("mdbv", d.to(device), q.to(device), p.to(device), generator=gen)
    assert out.tokens.device.type == device.type
    for value in out.diagnostics.values():
        assert value.device.type == device.type


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cpu_generator_with_cuda_tensors_is_refused():
    d, q, p = small_batch()
    with pytest.raises(ValueError, match="generator: on device cpu"):
        verify("bv", d.cuda(), q.cuda(), p.cuda(), generator=torch.Generator())


# ---------------------------------------------------------------------------- bug-class regressions
def one_step_rows(p_root: list, q_root: list, x: int, K: int = 1, rows: int = 1) -> tuple:
    """L = 1 rows: drafts all equal to x, root laws p_root/q_root, bonus row uniform."""
    V = len(p_root)
    p = torch.tensor([p_root, [1.0 / V] * V], dtype=torch.float64)
    q = torch.tensor([q_root], dtype=torch.float64)
    drafts = torch.full((rows, K, 1), x, dtype=torch.int64)
    return drafts, q.expand(rows, K, 1, V).contiguous(), p.expand(rows, K, 2, V).contiguous()


@pytest.mark.parametrize("method", KERNEL_METHODS[1:])
def test_coin_zero_never_accepts_a_draft_of_target_probability_zero(method):
    """B10: with every uniform = 0, a drafted token with p(x) = 0 is rejected and Z has p(Z) > 0."""
    p_root, q_root = [0.0, 0.25, 0.0, 0.75], [0.5, 0.0, 0.5, 0.0]
    drafts, q, p = one_step_rows(p_root, q_root, 2, K=2, rows=3)
    drafts[:, 0, 0] = 0  # drafts 0 and 2: both of target probability 0
    inputs = validate_inputs(drafts, q, p)
    out = KERNELS[method](inputs, ConstantUniforms(0.0))
    assert out.num_accepted.tolist() == [0, 0, 0]
    assert out.tokens[:, 0].tolist() == [1, 1, 1]  # the first token of positive residual mass


@pytest.mark.parametrize("method", ["sd", "bv", "spectr", "mdbv", "gbv_multipath", "spectr_gbv_released"])
def test_all_zero_residual_uses_the_target_row_and_never_an_out_of_vocabulary_id(method):
    """B6: V = 8193, target mass only on token 0 (zero tail), p(0) = 1 - 1e-10 < q(0) = 1.

    A rejection (forced by uniforms just below 1) meets the residual max(p - q, 0) = 0 exactly:
    the kernel must fall back to the target row (as the reference does), count it, and emit 0.
    """
    V = 8193
    p_root = [0.0] * V
    p_root[0] = 1.0 - 1e-10
    q_root = [0.0] * V
    q_root[0] = 1.0
    drafts, q, p = one_step_rows(p_root, q_root, 0, K=1, rows=5)
    inputs = validate_inputs(drafts, q, p)
    out = KERNELS[method](inputs, ConstantUniforms(1.0 - 2.0**-40))
    assert out.num_accepted.tolist() == [0] * 5
    assert out.tokens[:, 0].tolist() == [0] * 5
    assert int(out.diagnostics["residual_fallbacks"]) == 5


def test_rrs_meets_a_zero_residual_with_a_sure_acceptance():
    """RRS's documented rule (reference ``rrs_node``): R = q up to rounding accepts surely."""
    drafts, q, p = one_step_rows([1.0 - 1e-10, 1e-10 * 0.0], [1.0, 0.0], 0, K=2, rows=3)
    out = KERNELS["rrs"](validate_inputs(drafts, q, p), ConstantUniforms(1.0 - 2.0**-40))
    assert out.num_accepted.tolist() == [1, 1, 1]
    assert int(out.diagnostics["zero_residual_sure_accepts"]) == 3


def test_zero_residual_in_float32_from_a_softmax_rounding():
    """B6 in float32: p = q except p(x) 5e-5 lower (row sums off by 5e-5 < 1e-4): rejections are
    rare (5e-5 / 0.3) and meet an all-zero residual; 200,000 rows: fallbacks counted, ids valid."""
    q_root = [0.3, 0.2, 0.5]
    p_root = [0.3 - 5e-5, 0.2, 0.5]
    drafts, q, p = one_step_rows(p_root, q_root, 0, rows=200_000)
    out = verify("sd", drafts, q.float(), p.float(), generator=torch.Generator().manual_seed(1))
    fallbacks = int(out.diagnostics["residual_fallbacks"])
    assert 5 <= fallbacks <= 200  # expected ~33
    assert bool(((out.tokens[:, 0] >= 0) & (out.tokens[:, 0] < 3)).all())


@pytest.mark.parametrize(
    ("p_root", "q_root", "accept"),
    [
        ([0.5, 0.3, 0.2], [1.0, 0.0, 0.0], 0.5),  # B2/B11: greedy (one-hot) draft of x = 0
        ([0.1, 0.9], [0.9, 0.1], 1 / 9),  # B1: HF's trigger, residual [0, 0.8] -> always token 1
    ],
)
@pytest.mark.parametrize("method", ["sd", "bv", "mdbv", "spectr", "rrs", "gbv_multipath"])
def test_single_token_triggers_accept_with_p_over_q_and_never_re_emit_x(method, p_root, q_root, accept):
    """B2/B11 (q one-hot: accept with probability p(x)) and B1 (accept 1/9, residual excludes x).

    L = 1, K = 1 (every listed method is then SD): acceptance probability min(1, p(x)/q(x))
    exactly (``sd_acceptance_probs``), a rejected row never emits x, and the first token
    follows accept * delta_x + (1 - accept) * normalize(max(p - q, 0)) (= p when q is one-hot):
    G-test, N = 30,000, alpha = 1e-5, df <= 2, power >= 0.999 against a total-variation error
    of 0.03 (asserted).
    """
    drafts, q, p = one_step_rows(p_root, q_root, 0, K=1, rows=30_000)
    got = sd_acceptance_probs(validate_inputs(drafts[:1], q[:1], p[:1]))
    assert abs(float(got[0, 0]) - accept) <= 1e-15
    out = run_kernel(method, drafts, q, p, 2)
    rejected = out.num_accepted == 0
    assert bool((out.tokens[rejected, 0] != 0).all())
    counts = emitted_counts(out, np.zeros(len(drafts), dtype=int), 1)[0]
    first: dict = {}
    for o, c in counts.items():
        first[o[:1]] = first.get(o[:1], 0) + c
    resid = np.maximum(np.array(p_root) - np.array(q_root), 0)
    law = {(v,): (1 - accept) * r / resid.sum() for v, r in enumerate(resid)}
    law[(0,)] = law[(0,)] + accept  # = p exactly when q is one-hot (B2)
    result = g_test(law, first)
    assert result.passed and result.power(0.03) >= 0.999, result.describe()


@pytest.mark.parametrize("method", KERNEL_METHODS[1:])
def test_a_constant_uniform_near_one_does_not_accept_everything(method):
    """B12 (u hard-coded): uniforms matter. With u = 1 - 2^-40 a draft of ratio 0.5 is rejected."""
    drafts, q, p = one_step_rows([0.25, 0.75], [0.5, 0.5], 0, K=1, rows=2)
    out = KERNELS[method](validate_inputs(drafts, q, p), ConstantUniforms(1.0 - 2.0**-40))
    assert out.num_accepted.tolist() == [0, 0]


@pytest.mark.parametrize("method", ["sd", "bv", "mdbv", "spectr", "rrs"])
def test_draft_equal_to_target_is_accepted_whole_and_the_bonus_comes_from_row_L(method):
    instance = random_instance(3, 3, 2, exact=False)
    drafts, q, p = heterogeneous_batch(instance, 2, 400, 3)
    p[:, :, :3] = q  # p = q on every drafted position
    p[:, :, 3] = torch.tensor([0.0, 0.0, 1.0], dtype=p.dtype)  # bonus row: token 2 surely
    out = verify(method, drafts, q, p, generator=torch.Generator().manual_seed(0))
    assert bool((out.num_accepted == 3).all()) and bool((out.tokens[:, 3] == 2).all())


@pytest.mark.parametrize("method", KERNEL_METHODS)
def test_strided_views_give_the_same_output_as_contiguous_tensors(method):
    """Decoders pass expanded / sliced views: same seed, same output as a contiguous copy."""
    groups = [float_rows(default_instance(), ((0, 1), (1, 1), (0, 0)))]
    d, q, p, _ = batch_tensors(groups, 1)
    views = (d.expand(64, -1, -1), q.expand(64, -1, -1, -1), p.expand(64, -1, -1, -1))
    copies = tuple(v.contiguous() for v in views)
    a = verify(method, *views, generator=torch.Generator().manual_seed(5), allow_lossy=True)
    b = verify(method, *copies, generator=torch.Generator().manual_seed(5), allow_lossy=True)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.draft_index, b.draft_index)
