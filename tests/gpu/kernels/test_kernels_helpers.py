"""Helpers of the kernel tests (no tests here): batches from instances, counting, the G-test.

The statistical convention of every kernel parity test (tests/gpu/kernels/test_kernels_parity.py):

* one draft tuple X (or two, interleaved in one batch) is replicated over ROWS rows per group,
  float64 (unless a test says otherwise);
* the kernel's empirical law of the emitted tokens is compared with the reference verifier's
  exact conditional law (Fractions) by a G-test (``scipy.stats.power_divergence`` with
  ``lambda_="log-likelihood"``), cells of expected count < 5 pooled into one cell (merged into
  the smallest other cell if the pool itself expects < 5); any emitted output of exact
  probability 0 fails outright;
* significance ALPHA = 1e-5; power against a total-variation error d (worst direction:
  non-central chi-square with non-centrality 4 N d^2,
  :func:`spectr_gbv.simulate.monte_carlo.g_test_power`) is computed per test and asserted
  where stated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")


from spectr_gbv.core.instance import Instance  # noqa: E402
from spectr_gbv.gpu.kernels import KERNELS, VerifyOutput, validate_inputs  # noqa: E402
from spectr_gbv.gpu.kernels.common import KernelInputs, TorchUniforms  # noqa: E402
from spectr_gbv.reference.base import iteration_inputs  # noqa: E402
from spectr_gbv.simulate.monte_carlo import g_test_power, pooled_g_test  # noqa: E402

#: Significance level of every parity G-test.
ALPHA = 1e-5
#: Rows per draft tuple in the parity tests.
ROWS = 50_000

Kernel = Callable[[KernelInputs, object], VerifyOutput]


def sample_drafts(instance: Instance, K: int, rng: np.random.Generator) -> tuple[tuple[int, ...], ...]:
    """K i.i.d. drafts of length L sampled autoregressively from the instance's draft q."""
    out = []
    for _ in range(K):
        x: list[int] = []
        for _t in range(instance.L):
            row = np.asarray(instance.draft.cond(x), dtype=np.float64)
            x.append(int(rng.choice(len(row), p=row / row.sum())))
        out.append(tuple(x))
    return tuple(out)


def float_rows(instance: Instance, drafts: Sequence[Sequence[int]]) -> tuple[np.ndarray, ...]:
    """``iteration_inputs`` of one draft tuple: drafts [K, L] int64, exact q [K, L, n], p [K, L+1, n]."""
    return iteration_inputs(instance, np.asarray(drafts, dtype=np.int64))


def batch_tensors(
    groups: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    rows: int,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, np.ndarray]:
    """Interleave ``rows`` copies of each group's (drafts, q, p) into one batch.

    Returns drafts [G*rows, K, L], q, p (``dtype``) and the group of each row (row r belongs to
    group ``r % G``).
    """
    G = len(groups)
    d = np.stack([g[0] for g in groups])  # [G, K, L]
    q = np.stack([np.asarray(g[1], dtype=np.float64) for g in groups])
    p = np.stack([np.asarray(g[2], dtype=np.float64) for g in groups])

    def rep(a: np.ndarray, dt: torch.dtype) -> torch.Tensor:
        t = torch.as_tensor(a, dtype=dt, device=device)
        return t.unsqueeze(0).expand(rows, *t.shape).reshape(rows * G, *t.shape[1:]).contiguous()

    group = np.tile(np.arange(G), rows)
    return rep(d, torch.int64), rep(q, dtype), rep(p, dtype), group


def run_kernel(
    kernel: str | Kernel,
    drafts: torch.Tensor,
    q: torch.Tensor,
    p: torch.Tensor,
    seed: int,
) -> VerifyOutput:
    """Validate the inputs and run a kernel (a method name or a kernel function) with a seeded generator."""
    fn = KERNELS[kernel] if isinstance(kernel, str) else kernel
    inputs = validate_inputs(drafts, q, p, allow_empty_drafts=True)
    gen = torch.Generator(device=inputs.device).manual_seed(seed)
    return fn(inputs, TorchUniforms(inputs.device, gen))


def emitted_counts(out: VerifyOutput, group: np.ndarray, num_groups: int) -> list[dict[tuple[int, ...], int]]:
    """Counts of the emitted token tuples (prefix + Z) per group; checks the output layout."""
    tokens = out.tokens.cpu().numpy()
    tau = out.num_accepted.cpu().numpy()
    L1 = tokens.shape[1]
    pos = np.arange(L1)
    assert ((tokens >= 0) == (pos[None, :] <= tau[:, None])).all(), "padding must be -1 after Z"
    result = []
    for g in range(num_groups):
        rows, counts = np.unique(tokens[group == g], axis=0, return_counts=True)
        result.append({tuple(int(v) for v in r if v >= 0): int(c) for r, c in zip(rows, counts, strict=True)})
    return result


@dataclass(frozen=True)
class GTest:
    """Outcome of one G-test of observed counts against an exact law."""

    statistic: float
    df: int
    p_value: float
    outside: tuple[tuple[int, ...], ...]
    n: int

    def power(self, tv: float) -> float:
        """Worst-direction power against a total-variation error ``tv`` at :data:`ALPHA`."""
        return g_test_power(self.n, self.df, ALPHA, tv) if self.df >= 1 else 1.0

    @property
    def passed(self) -> bool:
        """No impossible output and ``p_value >= ALPHA``."""
        return not self.outside and self.p_value >= ALPHA

    def describe(self) -> str:
        """One line for assertion messages."""
        return (
            f"G={self.statistic:.2f} df={self.df} p={self.p_value:.3g} N={self.n} "
            f"outside-support={list(self.outside)[:5]} power(tv=0.02)={self.power(0.02):.3f} "
            f"power(tv=0.05)={self.power(0.05):.4f}"
        )


def g_test(law: dict[tuple[int, ...], Fraction | float], counts: dict[tuple[int, ...], int]) -> GTest:
    """G-test of ``counts`` against ``law`` (:func:`pooled_g_test`: expected counts < 5 pooled)."""
    outside = tuple(o for o in counts if law.get(o, 0) <= 0)
    support = [o for o, pr in law.items() if pr > 0]
    result = pooled_g_test(np.array([counts.get(o, 0) for o in support]), np.array([float(law[o]) for o in support]))
    return GTest(result.g, result.df, result.p_value, outside, sum(counts.values()))


class ConstantUniforms:
    """A :class:`~spectr_gbv.gpu.kernels.UniformSource` returning one fixed value (edge cases)."""

    def __init__(self, value: float, device: str | torch.device = "cpu") -> None:
        self.value = value
        self.device = device

    def __call__(self, *shape: int) -> torch.Tensor:
        """``value`` everywhere."""
        return torch.full(shape, self.value, dtype=torch.float64, device=self.device)


def heterogeneous_batch(
    instance: Instance, K: int, rows: int, seed: int, dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch whose every row has its own K i.i.d. drafts from q (rows read off the tables)."""
    rng = np.random.default_rng(seed)
    n, L = instance.n, instance.L
    drafts = np.zeros((rows, K, L), dtype=np.int64)
    for t in range(L):
        qt = np.asarray(instance.draft.level(t), dtype=np.float64)
        rows_q = qt[tuple(drafts[:, :, s] for s in range(t))] if t else np.broadcast_to(qt, (rows, K, n))
        cdf = np.cumsum(rows_q, axis=-1)
        u = rng.random((rows, K, 1)) * cdf[..., -1:]
        drafts[:, :, t] = np.minimum((cdf <= u).sum(-1), n - 1)
    q = np.zeros((rows, K, L, n))
    p = np.zeros((rows, K, L + 1, n))
    for t in range(L + 1):
        pt = np.asarray(instance.target.level(t), dtype=np.float64)
        p[:, :, t] = pt[tuple(drafts[:, :, s] for s in range(t))] if t else np.broadcast_to(pt, (rows, K, n))
        if t < L:
            qt = np.asarray(instance.draft.level(t), dtype=np.float64)
            q[:, :, t] = qt[tuple(drafts[:, :, s] for s in range(t))] if t else np.broadcast_to(qt, (rows, K, n))
    return (
        torch.as_tensor(drafts),
        torch.as_tensor(q, dtype=dtype),
        torch.as_tensor(p, dtype=dtype),
    )
