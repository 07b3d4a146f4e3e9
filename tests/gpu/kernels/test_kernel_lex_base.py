r"""The batched lexicographically optimal base :func:`spectr_gbv.gpu.kernels.lex_base.lexicographic_base`.

* Count laws: 80 random rows in ONE padded batch (n in 2..9, zeros in t and q, targets off the
  support, tie-heavy rows t = w q and repeated values, a point mass c in 1..4 or a random law of
  the number of drafts on 1..4, g vectorised as :math:`\sum_m \pi(m)[1 - (1 - x)^m]`) equal the
  exact :func:`spectr_gbv.reference.coverage.lexicographic_base` (Fractions) within 1e-9.
* Score laws: 40 rows with g a :class:`~spectr_gbv.reference.score_laws.ScoreCoverage` of a
  nonuniform piecewise-uniform law (k in 1..3), against a float evaluator of the same function.
* Larger rows (n = 64, float inputs made exact): the exact reference within 1e-9 (many hull
  vertices, every merge level of the hull up to width 128; a tie-only row, zeros in t and q,
  and a steep tail of targets 1e-20 that needs the suffix-sum abscissae).
* Base properties: every row sums to 1 over its support within 1e-12, is 0 outside it and
  nonnegative, and :math:`d(X) \le g(q(X))` within 1e-12 on random subsets.
* The hedged base (:func:`~spectr_gbv.gpu.kernels.lex_base.hedged_base`) on both batches: the
  exact :func:`spectr_gbv.reference.coverage.hedged_base` within 1e-9, the base properties, and
  the lexicographic base's :math:`\sum \min\{t, d\}`.
* One softmax row of n = 49,152: the same properties, and the blocks of a sequential
  monotone-chain hull (an independent float implementation) within 1e-12; the time is printed.
"""

from __future__ import annotations

import random
import time
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch")

from spectr_gbv.gpu.kernels.lex_base import hedged_base, lexicographic_base  # noqa: E402
from spectr_gbv.reference.coverage import hedged_base as reference_hedged  # noqa: E402
from spectr_gbv.reference.coverage import lexicographic_base as reference_lex  # noqa: E402
from spectr_gbv.reference.score_laws import ScoreCoverage  # noqa: E402

ROWS, WIDTH, MMAX, ATOL = 80, 9, 4, 1e-9
F64 = torch.float64


def _law(rng: random.Random, n: int, zero_prob: float, den: int) -> list[Fraction]:
    while True:
        w = [0 if rng.random() < zero_prob else rng.randint(1, den) for _ in range(n)]
        if sum(w):
            return [Fraction(x, sum(w)) for x in w]


def _target(rng: random.Random, q: list[Fraction], kind: str) -> list[Fraction]:
    n = len(q)
    scale = Fraction(rng.randint(1, 4), 4)
    if kind == "tied":  # t = w q: every ratio equal
        return [scale * x for x in q]
    if kind == "repeated":  # few distinct values, ties in t/q when q repeats too
        return [scale * x for x in _law(rng, n, 0.2, 2)]
    if kind == "sparse":
        return [scale * x for x in _law(rng, n, 0.6, 6)]
    return [scale * x for x in _law(rng, n, 0.25, 9)]


def _counts(rng: random.Random) -> tuple[tuple[int, Fraction], ...]:
    if rng.random() < 0.5:
        return ((rng.randint(1, MMAX), Fraction(1)),)
    ms = sorted(rng.sample(range(1, MMAX + 1), rng.randint(2, MMAX)))
    w = [rng.randint(1, 5) for _ in ms]
    return tuple((m, Fraction(x, sum(w))) for m, x in zip(ms, w, strict=True))


def _tensors(ts: list[list[Fraction]], qs: list[list[Fraction]], width: int) -> tuple:
    t = torch.zeros(len(ts), width, dtype=F64)
    q = torch.zeros(len(ts), width, dtype=F64)
    for i, (tr, qr) in enumerate(zip(ts, qs, strict=True)):
        t[i, : len(tr)] = torch.tensor([float(x) for x in tr], dtype=F64)
        q[i, : len(qr)] = torch.tensor([float(x) for x in qr], dtype=F64)
    return t, q, q > 0


def _count_g(pi: torch.Tensor):
    """Row-wise :math:`g(x) = \\sum_m \\pi(m)[1 - (1 - x)^m]`, ``pi`` float64 [N, MMAX] over m = 1..MMAX."""

    def g(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for m in range(1, pi.shape[1] + 1):
            out = out - pi[:, m - 1 : m] * torch.expm1(m * torch.log1p(-x))
        return out

    return g


def _count_batch(seed: int = 11) -> tuple:
    rng = random.Random(seed)
    ts, qs, counts = [], [], []
    kinds = ["random", "tied", "repeated", "sparse"]
    for r in range(ROWS):
        n = rng.randint(2, WIDTH)
        q = _law(rng, n, 0.25, 3 if r % 5 == 0 else 9)
        t = _target(rng, q, kinds[r % 4])
        ts.append(t)
        qs.append(q)
        counts.append(_counts(rng))
    pi = torch.zeros(ROWS, MMAX, dtype=F64)
    for i, c in enumerate(counts):
        for m, w in c:
            pi[i, m - 1] = float(w)
    return ts, qs, counts, (*_tensors(ts, qs, WIDTH), _count_g(pi))


def _score_g(laws: list[tuple], ks: list[int]):
    """A float64 row-wise evaluator of :class:`ScoreCoverage` (pieces padded with empty ones)."""
    P = max(len(law) for law in laws)
    lo = torch.zeros(len(laws), P, dtype=F64)
    hi = torch.ones(len(laws), P, dtype=F64)
    mass = torch.zeros(len(laws), P, dtype=F64)
    for i, law in enumerate(laws):
        for j, (a, b, w) in enumerate(law):
            lo[i, j], hi[i, j], mass[i, j] = float(a), float(b), float(w)
    k = torch.tensor(ks, dtype=F64)[:, None, None]
    above = mass.flip(1).cumsum(1).flip(1) - mass  # mass of the pieces above piece j
    dens = torch.where(mass > 0, mass / (hi - lo), 1.0)

    def mean_power(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        width = b - a
        safe = torch.where(width > 0, width, 1.0)
        return torch.where(width > 0, (b ** (k + 1) - a ** (k + 1)) / ((k + 1) * safe), b**k)

    total = (mass[:, None, :] * mean_power(lo[:, None, :], hi[:, None, :])).sum(-1)

    def g(x: torch.Tensor) -> torch.Tensor:
        over = torch.minimum((x[:, :, None] - above[:, None, :]).clamp(min=0.0), mass[:, None, :])
        a = hi[:, None, :] - over / dens[:, None, :]
        return (over * mean_power(a, hi[:, None, :].expand_as(a))).sum(-1) / total

    return g


def _score_batch(seed: int = 5, rows: int = 40) -> tuple:
    rng = random.Random(seed)
    ts, qs, laws, ks = [], [], [], []
    grid = [Fraction(i, 12) for i in range(13)]
    for r in range(rows):
        n = rng.randint(2, WIDTH)
        q = _law(rng, n, 0.2, 9)
        ts.append(_target(rng, q, ["random", "tied", "sparse"][r % 3]))
        qs.append(q)
        pieces = rng.randint(1, 3)
        pts = sorted(rng.sample(grid, 2 * pieces))
        w = [rng.randint(1, 6) for _ in range(pieces)]
        laws.append(tuple((pts[2 * j], pts[2 * j + 1], Fraction(w[j], sum(w))) for j in range(pieces)))
        ks.append(rng.randint(1, 3))
    return (
        ts,
        qs,
        [ScoreCoverage(law, k) for law, k in zip(laws, ks, strict=True)],
        (
            *_tensors(ts, qs, WIDTH),
            _score_g(laws, ks),
        ),
    )


def _check_reference(ts: list, qs: list, covs: list, d: torch.Tensor, reference=reference_lex) -> None:
    for i, (t, q, c) in enumerate(zip(ts, qs, covs, strict=True)):
        ref = [float(x) for x in reference(t, q, c)]
        got = d[i, : len(ref)].tolist()
        assert got == pytest.approx(ref, abs=ATOL), (i, t, q, c)
        assert d[i, len(ref) :].abs().max().item() == 0 if len(ref) < d.shape[1] else True


def _check_base(t: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, g, d: torch.Tensor, subsets: int = 64) -> None:
    assert (d.sum(1) - 1).abs().max().item() < 1e-12
    assert (d[~valid] == 0).all()
    assert d.min().item() >= -1e-15
    gen = torch.Generator().manual_seed(3)
    X = (torch.rand(t.shape[0], subsets, t.shape[1], generator=gen, dtype=F64) < 0.5) & valid[:, None, :]
    dX = (X * d[:, None, :]).sum(-1)
    qX = (X * q[:, None, :]).sum(-1).clamp(0.0, 1.0)
    assert (dX - g(qX)).max().item() < 1e-12


def test_count_laws_match_reference() -> None:
    ts, qs, counts, (t, q, valid, g) = _count_batch()
    d = lexicographic_base(t, q, valid, g)
    _check_reference(ts, qs, counts, d)
    _check_base(t, q, valid, g, d)


def test_score_laws_match_reference() -> None:
    ts, qs, covs, (t, q, valid, g) = _score_batch()
    x = torch.rand(len(covs), 7, dtype=F64, generator=torch.Generator().manual_seed(1))
    ref_g = [[float(c(Fraction(v))) for v in row] for c, row in zip(covs, x.tolist(), strict=True)]
    assert g(x).tolist() == [pytest.approx(r, abs=1e-12) for r in ref_g]  # the evaluator is g_H
    d = lexicographic_base(t, q, valid, g)
    _check_reference(ts, qs, covs, d)
    _check_base(t, q, valid, g, d)


@pytest.mark.parametrize("batch", ["counts", "scores"])
def test_hedged_base_matches_reference(batch: str) -> None:
    ts, qs, covs, (t, q, valid, g) = _count_batch() if batch == "counts" else _score_batch()
    d = hedged_base(t, q, valid, g)
    _check_reference(ts, qs, covs, d, reference_hedged)
    _check_base(t, q, valid, g, d)
    lex = lexicographic_base(t, q, valid, g)
    # the same optimal face: sum min(t, d) unchanged; the hedge moved mass on some rows
    assert (torch.minimum(t, d).sum(1) - torch.minimum(t, lex).sum(1)).abs().max().item() < 1e-12
    assert int(((d - lex).abs().amax(1) > 1e-9).sum()) >= 1


def test_larger_rows_match_reference() -> None:
    gen = torch.Generator().manual_seed(7)
    N, n = 6, 64
    q = torch.softmax(2 * torch.randn(N, n, generator=gen, dtype=F64), 1)
    t = 0.9 * torch.softmax(2 * torch.randn(N, n, generator=gen, dtype=F64), 1)
    t[0] = 0.5 * q[0]  # one tie-only row
    t[1, ::3] = 0.0
    q[2, ::5] = 0.0
    q[2] /= q[2].sum()
    t[5, 40:] = 1e-20 * torch.rand(n - 40, generator=gen, dtype=F64)  # steep tail: needs exact abscissae
    valid = q > 0
    laws = [(0, 0, 1, 0), (5, 0, 0, 5), (0, 0, 0, 1), (0, 1, 0, 0), (2, 3, 1, 4), (0, 0, 1, 0)]
    counts = [tuple((m + 1, Fraction(w, sum(row))) for m, w in enumerate(row) if w > 0) for row in laws]
    pi = torch.tensor([[w / sum(row) for w in row] for row in laws], dtype=F64)
    d = lexicographic_base(t, q, valid, _count_g(pi))
    tf = [[Fraction(v) for v in row] for row in t.tolist()]
    qf = [[Fraction(v) for v in row] for row in q.tolist()]
    # the exact reference on the float inputs (q sums to 1 within rounding: compare loosely)
    for i in range(N):
        ref = [float(x) for x in reference_lex(tf[i], qf[i], counts[i])]
        assert d[i].tolist() == pytest.approx(ref, abs=ATOL), i


def _chain_blocks(x: list[float], y: list[float]) -> list[int]:
    """Strict vertices of the lower hull of (x_i, y_i) by a sequential monotone chain."""
    hull: list[int] = []
    for i in range(len(x)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (y[b] - y[a]) * (x[i] - x[a]) >= (y[i] - y[a]) * (x[b] - x[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    return hull


def test_softmax_row_timing_and_chain() -> None:
    n = 49_152
    gen = torch.Generator().manual_seed(0)
    t = 0.95 * torch.softmax(3 * torch.randn(1, n, generator=gen, dtype=F64), 1)
    q = torch.softmax(3 * torch.randn(1, n, generator=gen, dtype=F64) + 0.5 * t.log(), 1)
    valid = q > 0
    K = torch.tensor([4.0], dtype=F64)

    def g(x: torch.Tensor) -> torch.Tensor:
        return -torch.expm1(K[:, None] * torch.log1p(-x))

    lexicographic_base(t, q, valid, g)  # warm-up
    start = time.perf_counter()
    d = lexicographic_base(t, q, valid, g)
    print(f"\nlexicographic_base N=1 n={n}: {time.perf_counter() - start:.4f} s")
    _check_base(t, q, valid, g, d, subsets=8)
    # independent blocks: the sequential monotone chain on the same float points
    order = torch.sort(-(t[0] / q[0]), stable=True).indices
    ts = t[0, order]
    qs = q[0, order]
    x = torch.cat([-ts.flip(0).cumsum(0).flip(0), torch.zeros(1, dtype=F64)]).cummax(0).values
    y = torch.cat([torch.zeros(1, dtype=F64), g(qs.cumsum(0).clamp(max=1.0)[None])[0]])
    hull = _chain_blocks(x.tolist(), y.tolist())
    ref = torch.zeros(n, dtype=F64)
    for a, b in zip(hull, hull[1:], strict=False):
        ref[a:b] = (y[b] - y[a]) * ts[a:b] / ts[a:b].sum()
    assert (d[0, order] - ref).abs().max().item() < 1e-12


def test_shape_and_dtype_errors() -> None:
    t = torch.zeros(2, 3, dtype=F64)
    with pytest.raises(ValueError, match="shape"):
        lexicographic_base(t, torch.zeros(2, 4, dtype=F64), torch.zeros(2, 4, dtype=torch.bool), lambda x: x)
    with pytest.raises(ValueError, match="dtypes"):
        lexicographic_base(t.float(), t.float(), t > 0, lambda x: x)
