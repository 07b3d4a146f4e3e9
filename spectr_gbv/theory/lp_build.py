"""Sparse LP assembly and HiGHS calls behind :mod:`spectr_gbv.theory.lp` (float64 only).

OPT(K) layout (THEORY.md sections 2 and 5). A *node* is a draft prefix z (a prefix of length
0..L of some draft x^L with q(x^L) > 0) with p(z) > 0; the root () is node 0. Each node z
owns one validity row per token v with p(v|z) > 0, for the output o = zv. Columns are
u(M, o) = w(M, o) / s(M) with s(M) = sqrt(m(M)) (M a draft multiset holding a draft through
z), then one auxiliary A(z) per non-root node, A(z) = P(completion has prefix z and
``|O| <= |z|``). Row (z, v) reads

    [A(zv) if zv is a node] - p(v|z) A(z) [if z is not the root] - sum_M s(M) u(M, zv)
        = -p(zv) [if zv is not a node], 0 otherwise.

Why s = sqrt(m): with w itself, a multiset whose mass is below HiGHS's (absolute) primal
feasibility tolerance may be left empty; with w / m its coefficients m(M) fall below HiGHS's
small_matrix_value (1e-9) and are dropped. sqrt(m) keeps the right-hand sides s(M) of the
draft rows sum_o u(M, o) = s(M) and the coefficients s(M) above both down to m ~ 1e-18.

For a prefix that is not a node no draft passes through it, so A = p there and its
descendants' rows are identities; they are left out. This system plus the draft rows has a
one-dimensional left null space (the all-equal multipliers, as p(.|z) sums to 1 and every
multiset owns the root's outputs), so exactly one row is redundant: we drop the validity row
of the root's output v* = argmax p(v). Every row carries the null vector, so the reduced
system has the same solutions in exact arithmetic.

OT(K): transportation between multisets (mass m(M)) and the y in V^L with p(y) > 0, cost
max_k LCP(x^(k), y), in the same variables u(M, y) = w(M, y) / sqrt(m(M)); the column row of
y* = argmax p(y) is dropped (it is implied).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from spectr_gbv.core.tabular import TabularAR

#: HiGHS primal/dual feasibility tolerance (its smallest allowed value; the default 1e-7 is
#: absolute and would ignore target probabilities below it).
LP_TOLERANCE = 1e-10


@dataclass(frozen=True)
class PrefixTree:
    """Drafts with q(x^L) > 0 and the node/row structure of the OPT LP (float64 data)."""

    drafts: np.ndarray  # (D, L) int64, lexicographic
    q_drafts: np.ndarray  # (D,) float64, q(x^L)
    chains: np.ndarray  # (D, L+1) int64 node id of x^j, -1 once p(x^j) = 0
    node_len: np.ndarray  # (N,) int64 prefix length |z|
    node_through: np.ndarray  # (N,) int64 number of drafts through z
    row_start: np.ndarray  # (N,) int64 first validity row of node z
    row_count: np.ndarray  # (N,) int64 rows (children v with p(v|z) > 0) of node z
    row_output: list[tuple[int, ...]]  # (R,) output o = zv of each row
    row_child: np.ndarray  # (R,) int64 node id of zv, or -1
    row_cond: np.ndarray  # (R,) float64 p(v|z)
    row_rhs: np.ndarray  # (R,) float64 -p(zv) if zv is not a node, else 0


def _float(arr: np.ndarray) -> np.ndarray:
    return np.asarray(arr, dtype=np.float64)


def draft_support(draft: TabularAR, draft_length: int) -> tuple[np.ndarray, np.ndarray]:
    """Drafts x^L with q(x^L) > 0, shape (D, L) int64 (lexicographic), and their q, (D,)."""
    q_joint = draft.joint(draft_length)
    drafts = np.argwhere(np.asarray(q_joint > 0, dtype=bool)).astype(np.int64)
    return drafts, _float(q_joint)[tuple(drafts.T)] if len(drafts) else np.zeros(0)


def prefix_tree(target: TabularAR, draft: TabularAR, draft_length: int) -> PrefixTree:
    """Nodes, validity rows and draft chains of the OPT LP (target depth >= L)."""
    L = draft_length
    drafts, q_drafts = draft_support(draft, L)
    node_of: dict[tuple[int, ...], int] = {(): 0}
    for j in range(1, L + 1):
        positive = np.asarray(target.joint(j) > 0, dtype=bool)
        for z in sorted({tuple(x[:j]) for x in drafts.tolist()}):
            if positive[z]:
                node_of[z] = len(node_of)
    chains = np.full((len(drafts), L + 1), -1, dtype=np.int64)
    for d, x in enumerate(drafts.tolist()):
        for j in range(L + 1):
            if tuple(x[:j]) not in node_of:
                break
            chains[d, j] = node_of[tuple(x[:j])]
    nodes = list(node_of)
    row_start, row_count, outputs, child, cond, rhs = [], [], [], [], [], []
    for z in nodes:
        cond_z = _float(target.cond(z))
        p_z = float(target.joint(len(z))[z])
        row_start.append(len(outputs))
        for v in np.flatnonzero(cond_z > 0).tolist():
            o = (*z, v)
            outputs.append(o)
            child.append(node_of.get(o, -1))
            cond.append(cond_z[v])
            rhs.append(0.0 if o in node_of else -p_z * cond_z[v])
        row_count.append(len(outputs) - row_start[-1])
    through = np.bincount(chains[chains >= 0], minlength=len(nodes)).astype(np.int64)
    return PrefixTree(
        drafts=drafts,
        q_drafts=q_drafts,
        chains=chains,
        node_len=np.array([len(z) for z in nodes], dtype=np.int64),
        node_through=through,
        row_start=np.array(row_start, dtype=np.int64),
        row_count=np.array(row_count, dtype=np.int64),
        row_output=outputs,
        row_child=np.array(child, dtype=np.int64),
        row_cond=np.array(cond, dtype=np.float64),
        row_rhs=np.array(rhs, dtype=np.float64),
    )


def num_multisets(num_items: int, k: int) -> int:
    """Multisets of size k from num_items items: C(D + K - 1, K)."""
    return math.comb(num_items + k - 1, k)


def opt_size(tree: PrefixTree, k: int) -> tuple[int, int, int]:
    """(variables, constraints, nonzeros) of the OPT LP after the dropped row, exactly."""
    D = len(tree.drafts)
    n_m = num_multisets(D, k)
    holding = n_m - np.array([num_multisets(D - t, k) for t in tree.node_through.tolist()])
    n_w = int((holding * tree.row_count).sum())
    n_a = len(tree.node_len) - 1
    a_nnz = n_a + int(tree.row_count[1:].sum())
    dropped_nnz = n_m + int(tree.row_child[_dropped_row(tree)] >= 0)
    rows = n_m + len(tree.row_output) - 1
    return n_w + n_a, rows, 2 * n_w + a_nnz - dropped_nnz


def ot_size(num_drafts_support: int, num_targets: int, k: int) -> tuple[int, int, int]:
    """(variables, constraints, nonzeros) of the OT transportation LP after the dropped row."""
    n_m = num_multisets(num_drafts_support, k)
    return n_m * num_targets, n_m + num_targets - 1, 2 * n_m * num_targets - n_m


def _dropped_row(tree: PrefixTree) -> int:
    """Root row (output (v,)) with the largest p(v); all root rows come first."""
    return int(np.argmax(tree.row_cond[: tree.row_count[0]]))


def multisets(num_items: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted index multisets, shape (M, K) int64, and multiplicities K!/prod(c!), (M,) float."""
    flat = itertools.chain.from_iterable(itertools.combinations_with_replacement(range(num_items), k))
    ms = np.fromiter(flat, dtype=np.int64).reshape(-1, k)
    mult = np.ones(len(ms))
    run = np.ones(len(ms))
    for j in range(1, k):
        run = np.where(ms[:, j] == ms[:, j - 1], run + 1, 1.0)
        mult = mult * (j + 1) / run  # multinomial of the first j+1 entries
    return ms, np.rint(mult)


@dataclass(frozen=True)
class SparseLP:
    """min c x s.t. A x = b, x >= 0; x starts with the kernel variables u = w / sqrt(m)."""

    c: np.ndarray
    a_eq: sp.csr_array
    b_eq: np.ndarray
    var_multiset: np.ndarray  # (num kernel vars,) multiset index of each kernel variable
    var_target: np.ndarray  # (num kernel vars,) output row (OPT) or y index (OT)
    var_factor: np.ndarray  # (num kernel vars,) 1/sqrt(m(M)): conditional prob = factor * u


def build_opt(tree: PrefixTree, ms: np.ndarray, mass: np.ndarray) -> SparseLP:
    """Assemble the OPT LP (layout in the module docstring)."""
    live = np.flatnonzero(mass > 0)  # float64 underflow: such rows are left to the fallback
    ms, mass = ms[live], mass[live]
    n_m, width = ms.shape[0], ms.shape[1] * tree.chains.shape[1]
    scale = np.sqrt(mass)
    nodes = np.sort(tree.chains[ms].reshape(n_m, width), axis=1)
    keep = nodes >= 0
    keep[:, 1:] &= nodes[:, 1:] != nodes[:, :-1]
    pair_m, pos = np.nonzero(keep)
    pair_node = nodes[pair_m, pos]
    reps = tree.row_count[pair_node]
    var_m = np.repeat(pair_m, reps)
    offsets = np.arange(len(var_m)) - np.repeat(np.cumsum(reps) - reps, reps)
    var_row = np.repeat(tree.row_start[pair_node], reps) + offsets
    n_w, n_rows = len(var_m), len(tree.row_output)
    a_node = np.arange(1, len(tree.node_len))
    own_row = np.full(len(tree.node_len), -1, dtype=np.int64)
    own_row[tree.row_child[tree.row_child >= 0]] = np.flatnonzero(tree.row_child >= 0)
    a_reps = tree.row_count[a_node]
    a_rows = np.repeat(tree.row_start[a_node], a_reps) + (
        np.arange(a_reps.sum()) - np.repeat(np.cumsum(a_reps) - a_reps, a_reps)
    )
    rows = np.concatenate([var_m, n_m + var_row, n_m + own_row[a_node], n_m + a_rows])
    cols = np.concatenate([np.arange(n_w), np.arange(n_w), n_w + a_node - 1, n_w + np.repeat(a_node, a_reps) - 1])
    vals = np.concatenate([np.ones(n_w), -scale[var_m], np.ones(len(a_node)), -tree.row_cond[a_rows]])
    drop = n_m + _dropped_row(tree)
    sel = rows != drop
    rows, cols, vals = rows[sel], cols[sel], vals[sel]
    rows = rows - (rows > drop)
    shape = (n_m + n_rows - 1, n_w + len(a_node))
    a_eq = sp.csr_array(sp.coo_array((vals, (rows, cols)), shape=shape))
    b_eq = np.delete(np.concatenate([scale, tree.row_rhs]), drop)
    reward = tree.node_len[np.repeat(pair_node, reps)] * scale[var_m]
    c = np.concatenate([-reward, np.zeros(len(a_node))])
    return SparseLP(c, a_eq, b_eq, live[var_m], var_row, 1.0 / scale[var_m])


def lcp_matrix(drafts: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """LCP(x, y) for drafts (D, L) and targets (T, L): shape (D, T) int64."""
    eq = drafts[:, None, :] == targets[None, :, :]
    return np.cumprod(eq, axis=2).sum(axis=2).astype(np.int64)


def build_ot(
    drafts: np.ndarray, ms: np.ndarray, mass: np.ndarray, targets: np.ndarray, p_targets: np.ndarray
) -> SparseLP:
    """Assemble the OT transportation LP: variable (i, j) at column i * T + j."""
    live = np.flatnonzero(mass > 0)
    ms, mass = ms[live], mass[live]
    n_m, n_t = len(ms), len(targets)
    lcp = lcp_matrix(drafts, targets)
    cost = lcp[ms[:, 0]]
    for j in range(1, ms.shape[1]):
        cost = np.maximum(cost, lcp[ms[:, j]])
    var = np.arange(n_m * n_t)
    var_m, var_y = var // n_t, var % n_t
    drop = int(np.argmax(p_targets))
    sel = var_y != drop
    rows = np.concatenate([var_m, n_m + var_y[sel] - (var_y[sel] > drop)])
    cols = np.concatenate([var, var[sel]])
    shape = (n_m + n_t - 1, n_m * n_t)
    scale = np.sqrt(mass)
    vals = np.concatenate([np.ones(len(var)), scale[var_m[sel]]])
    a_eq = sp.csr_array(sp.coo_array((vals, (rows, cols)), shape=shape))
    b_eq = np.concatenate([scale, np.delete(p_targets, drop)])
    c = -(cost * scale[:, None]).ravel()
    return SparseLP(c, a_eq, b_eq, live[var_m], var_y, 1.0 / scale[var_m])


#: Solver settings tried in turn while HiGHS reports a failure (both LPs are feasible and
#: bounded in exact arithmetic, so a failure is floating point, e.g. presolve rounding).
SOLVER_ATTEMPTS: tuple[dict[str, float | bool], ...] = (
    {"primal_feasibility_tolerance": LP_TOLERANCE, "dual_feasibility_tolerance": LP_TOLERANCE},
    {"primal_feasibility_tolerance": LP_TOLERANCE, "dual_feasibility_tolerance": LP_TOLERANCE,
     "presolve": False},
    {},
    {"presolve": False},
)  # fmt: skip


def solve(lp: SparseLP, time_limit: float | None) -> tuple[int, str, float, np.ndarray]:
    """Solve; retry with the next settings of ``SOLVER_ATTEMPTS`` on status 2 or 4 (THEORY.md 5).

    Returns the last attempt's status and message (listing earlier failures), the optimum
    (a maximum) and the kernel's conditional probabilities clipped to [0, 1].
    """
    failures: list[str] = []
    for attempt in SOLVER_ATTEMPTS:
        options = dict(attempt)
        if time_limit is not None:
            options["time_limit"] = float(time_limit)
        res = linprog(lp.c, A_eq=lp.a_eq, b_eq=lp.b_eq, bounds=(0, None), method="highs",
                      options=options)  # fmt: skip
        message = " ".join([str(res.message), *(f"[earlier: {f}]" for f in failures)])
        if res.status not in (2, 4):
            break
        failures.append(f"{options}: {res.message}")
    if res.status != 0:
        return int(res.status), message, math.nan, np.zeros(0)
    x = np.clip(res.x[: len(lp.var_multiset)] * lp.var_factor, 0.0, 1.0)
    return 0, message, -float(res.fun), x


def read_kernel(
    lp: SparseLP,
    x: np.ndarray,
    keys: list[tuple[tuple[int, ...], ...]],
    outputs: list[tuple[int, ...]],
    fallback: dict[tuple[int, ...], float],
) -> dict:
    """Read the kernel back; rows are renormalised, and rows HiGHS left empty get ``fallback``.

    HiGHS's tolerances are absolute, so rows of multisets of tiny mass carry relative slack
    (or are left empty when m(M) is below ~1e-20); the exact rechecks see the result.
    """
    row_sum = np.bincount(lp.var_multiset, weights=x, minlength=len(keys))
    x = x / np.where(row_sum > 0, row_sum, 1.0)[lp.var_multiset]
    kernel = {key: ({} if row_sum[m] > 0 else dict(fallback)) for m, key in enumerate(keys)}
    for i in np.flatnonzero(x > 0).tolist():
        kernel[keys[lp.var_multiset[i]]][outputs[lp.var_target[i]]] = float(x[i])
    return kernel
