r"""OPT(K) by column generation over assignment orders, for :mod:`spectr_gbv.theory.lp` (float64, HiGHS).

The OPT(K) LP of :mod:`spectr_gbv.theory.lp_build` has one column per (multiset M, output o)
and one row per multiset; this module solves an exactly equivalent LP whose size does not
depend on the number of multisets. Two facts make it possible (THEORY.md sections 2 and 5).

1. *Only the node totals matter.* Every multiset holding a prefix z may emit any output zv,
   so the validity rows read w only through b(z) = sum_M sum_v w(M, zv) and the split a(zv)
   of b(z) among the children. Given b and a, the kernel
   w(M, zv) = w(M, z) a(zv) / b(z) realises them from any transport w(M, z) of the multiset
   masses m(M) onto their held nodes H(M) (the union of the prefix chains of the drafts in M)
   with node totals b.
2. *The node totals that some transport realises form a base polytope.* The set of such b is
   the Minkowski sum of the simplices m(M) conv{e_z : z in H(M)}; its vertices are the
   *priority assignments*: for an order sigma of the nodes, each multiset goes to the first
   node of H(M) in sigma, and node z_i (i-th in sigma) receives

   .. math:: b_\sigma(z_i) = R_i^K - R_{i+1}^K,\qquad R_i = q\{x : \text{chain}(x)\cap\{z_1..z_{i-1}\} = \emptyset\},

   because a multiset avoids a node set iff each of its K i.i.d. drafts does.

So OPT(K) = max over convex combinations b = sum_sigma lambda_sigma b_sigma and splits a of
sum_z ``|z|`` b(z) subject to the validity rows. The *master* LP has columns lambda_sigma (added
as needed), a(zv) and the auxiliaries A(z) of ``lp_build``, rows: one balance row per node
(sum_v a(zv) - sum_sigma lambda_sigma b_sigma(z) = 0) and the validity rows (none redundant:
sum_z b_sigma(z) = 1 != 0). Pricing is exact: with node duals y, the column of least reduced
cost sum_z b_sigma(z) (y(z) - ``|z|``) is the greedy order of decreasing ``|z| - y(z)`` (the greedy
algorithm on a base polytope, Edmonds 1970), so the loop stops at the LP optimum. The master
starts from the order that puts the root first (every multiset rejects all drafts; feasible).

The kernel of a multiset is then sum_sigma lambda_sigma [first_sigma(H(M)) = z] a(zv) / b(z):
one key per multiset, as in the plain LP.

References
----------
Dantzig & Wolfe 1960 (decomposition); Edmonds 1970, "Submodular functions, matroids, and
certain polyhedra" (greedy vertices of a base polytope); THEORY.md sections 2 and 5.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from spectr_gbv.theory import lp_build as build
from spectr_gbv.theory.lp_build import SOLVER_ATTEMPTS, PrefixTree

#: Reduced cost below which a priced column is added (the LP values are E[tau] <= L).
PRICE_TOLERANCE = 1e-11

#: Upper bound on column-generation rounds (each adds up to two columns); reaching it is
#: reported as status 1 (iteration limit).
MAX_ROUNDS = 5000

#: The master keeps at most this many order columns per node (unused ones of largest reduced
#: cost are dropped first).
POOL_FACTOR = 3

#: Stop when the Lagrangian upper bound is within this of the master's value (absolute; the
#: master itself is solved to HiGHS tolerances 1e-10).
GAP_TOLERANCE = 1e-10

#: Weights of the best-bound duals in the smoothed duals priced each round (Wentges 1997).
SMOOTHING = (0.5, 0.8)


@dataclass(frozen=True)
class ColgenSolution:
    """Master optimum: order columns with weights, node totals and output splits (float64)."""

    status: int
    message: str
    value: float
    ranks: np.ndarray  # (S, N) int64 rank of each node in each order with lambda > 0
    weights: np.ndarray  # (S,) float64 lambda, normalised to sum 1
    split: np.ndarray  # (R,) float64 a(zv) / b(z), rows of each node summing to 1
    rounds: int
    master_size: tuple[int, int, int]  # (variables, constraints, nonzeros) of the last master


def _validity_block(tree: PrefixTree) -> tuple[sp.csr_array, np.ndarray, sp.csr_array]:
    """Balance + validity rows of the master in the columns [a', A (N-1)], rhs, and the map a = E a'.

    Outputs zv whose zv is no node (no draft passes through it) have A(zv) = p(zv), so their
    validity rows force a(zv) = p(v|z) (p(z) - A(z)): they are proportional, and the outputs of
    one node of that kind are merged into one column e(z) with a(zv) = e(z) p(v|z) / P(z)
    (P(z) their total p(v|z)) and one summed row. ``expand`` (R, R') gives a from a'.
    """
    n_nodes, n_rows = len(tree.node_len), len(tree.row_output)
    row_node = np.repeat(np.arange(n_nodes), tree.row_count)
    a_node = np.arange(1, n_nodes)
    own_row = np.full(n_nodes, -1, dtype=np.int64)
    own_row[tree.row_child[tree.row_child >= 0]] = np.flatnonzero(tree.row_child >= 0)
    a_rows = np.flatnonzero(row_node >= 1)  # rows of non-root nodes: - p(v|z) A(z)
    rows = np.concatenate([row_node, n_nodes + np.arange(n_rows), n_nodes + own_row[a_node], n_nodes + a_rows])
    cols = np.concatenate([np.arange(n_rows), np.arange(n_rows), n_rows + a_node - 1, n_rows + row_node[a_rows] - 1])
    vals = np.concatenate([np.ones(n_rows), -np.ones(n_rows), np.ones(len(a_node)), -tree.row_cond[a_rows]])
    block = sp.csr_array(sp.coo_array((vals, (rows, cols)), shape=(n_nodes + n_rows, n_rows + n_nodes - 1)))
    rhs = np.concatenate([np.zeros(n_nodes), tree.row_rhs])
    leaf = tree.row_child < 0
    group = np.where(leaf, -1 - row_node, np.arange(n_rows))  # merged rows share a negative id
    _, new_row = np.unique(group, return_inverse=True)
    n_new = int(new_row.max()) + 1
    total = np.bincount(new_row, weights=tree.row_cond, minlength=n_new)
    share = np.where(leaf, tree.row_cond / total[new_row], 1.0)
    expand = sp.csr_array(sp.coo_array((share, (np.arange(n_rows), new_row)), shape=(n_rows, n_new)))
    rows_sum = sp.block_diag([sp.identity(n_nodes), sp.coo_array((np.ones(n_rows), (new_row, np.arange(n_rows))),
                                                                  shape=(n_new, n_rows))])  # fmt: skip
    cols_map = sp.block_diag([expand, sp.identity(n_nodes - 1)])
    merged = sp.csr_array(rows_sum @ block @ cols_map)
    merged.eliminate_zeros()
    return merged, rows_sum @ rhs, expand


def order_column(tree: PrefixTree, rank: np.ndarray, k: int) -> np.ndarray:
    """Node totals b_sigma (N,) of the priority order given by ``rank`` (N,) int64 (0 first)."""
    n_nodes = len(rank)
    ranks = np.where(tree.chains >= 0, rank[np.maximum(tree.chains, 0)], n_nodes)
    first = ranks.min(axis=1)  # rank of the first node of each draft's chain
    q_first = np.bincount(first, weights=tree.q_drafts, minlength=n_nodes + 1)[:n_nodes]
    avoid = np.concatenate([np.cumsum(q_first[::-1])[::-1], [0.0]])  # R_i, i = 0..N
    by_rank = avoid[:-1] ** k - avoid[1:] ** k
    return np.maximum(by_rank[rank], 0.0)


def _greedy_rank(price: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Rank of each node in decreasing ``price`` (ties: deeper first, then node id)."""
    order = np.lexsort((np.arange(len(price)), -depth, -price))
    rank = np.empty(len(price), dtype=np.int64)
    rank[order] = np.arange(len(price))
    return rank


def _failed(status: int, message: str, n_nodes: int, n_rows: int, rounds: int, size: tuple) -> ColgenSolution:
    empty = np.zeros((0, n_nodes), np.int64)
    return ColgenSolution(status, message, math.nan, empty, np.zeros(0), np.zeros(n_rows), rounds, size)


def _price(tree: PrefixTree, y: np.ndarray, depth: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Greedy order for node duals ``y``: (rank, column, reduced cost sum_z b(z) (y(z) - |z|))."""
    rank = _greedy_rank(depth - y, depth)
    col = order_column(tree, rank, k)
    return rank, col, float(col @ (y - depth))


def solve_colgen(tree: PrefixTree, k: int, time_limit: float | None = None) -> ColgenSolution:
    """Column generation for OPT(K) (module docstring); status as ``linprog``'s."""
    start = time.perf_counter()
    n_nodes, n_rows = len(tree.node_len), len(tree.row_output)
    depth = tree.node_len.astype(np.float64)
    block, rhs, expand = _validity_block(tree)
    is_root = (np.arange(n_nodes) == 0).astype(np.float64)
    ranks = [_greedy_rank(is_root, depth), _greedy_rank(depth, depth)]  # reject all (feasible); deepest first
    cols = [order_column(tree, r, k) for r in ranks]
    failures: list[str] = []
    res = None
    best_ub, center = math.inf, None
    for rounds in range(1, MAX_ROUNDS + 1):
        lam = np.array(cols).T  # (N, S)
        a_eq = sp.hstack(
            [sp.vstack([sp.csr_array(-lam), sp.csr_array((block.shape[0] - n_nodes, lam.shape[1]))]), block]
        ).tocsr()
        c = np.concatenate([-(depth @ lam), np.zeros(block.shape[1])])
        options: dict[str, float | bool] = {}
        for attempt in SOLVER_ATTEMPTS:
            options = dict(attempt)
            if time_limit is not None:
                options["time_limit"] = max(float(time_limit) - (time.perf_counter() - start), 1e-3)
            res = build.linprog(c, A_eq=a_eq, b_eq=rhs, bounds=(0, None), method="highs", options=options)
            if res.status not in (2, 4):
                break
            failures.append(f"{options}: {res.message}")
        size = (a_eq.shape[1], a_eq.shape[0], a_eq.nnz)
        message = " ".join([str(res.message), *(f"[earlier: {f}]" for f in failures)])
        if res.status != 0:
            return _failed(int(res.status), message, n_nodes, n_rows, rounds, size)
        value = -float(res.fun)
        y_all = -np.asarray(res.eqlin.marginals, dtype=np.float64)  # duals of the maximisation
        rank, col, red = _price(tree, -y_all[:n_nodes], depth, k)
        ub = float(y_all @ rhs) + max(0.0, -red)
        if center is None or ub < best_ub:
            best_ub, center = ub, y_all
        if best_ub - value <= GAP_TOLERANCE:
            break
        new = [(rank, col)] if red < -PRICE_TOLERANCE else []
        for alpha in SMOOTHING:
            y_s = alpha * center + (1 - alpha) * y_all
            r_s, c_s, red_s = _price(tree, -y_s[:n_nodes], depth, k)
            ub_s = float(y_s @ rhs) + max(0.0, -red_s)
            if ub_s < best_ub:
                best_ub, center = ub_s, y_s
            if c_s @ (-y_all[:n_nodes] - depth) < -PRICE_TOLERANCE and not any(np.array_equal(r_s, r) for r, _ in new):
                new.append((r_s, c_s))
        if best_ub - value <= GAP_TOLERANCE or not new:
            break
        if time_limit is not None and time.perf_counter() - start > time_limit:
            message = f"column generation: time limit {time_limit} s reached after {rounds} rounds"
            return _failed(1, message, n_nodes, n_rows, rounds, size)
        if len(cols) > POOL_FACTOR * n_nodes:  # drop the unused columns of largest reduced cost
            lam_x = res.x[: len(cols)]
            reduced = lam.T @ (-y_all[:n_nodes] - depth)
            keep = np.argsort(np.where(lam_x > 0, -np.inf, reduced), kind="stable")[:n_nodes]
            keep = np.sort(np.union1d(keep, np.flatnonzero(lam_x > 0)))
            ranks, cols = [ranks[i] for i in keep], [cols[i] for i in keep]
        for r_new, c_new in new:
            ranks.append(r_new)
            cols.append(c_new)
    else:
        return _failed(1, f"column generation: no optimum after {MAX_ROUNDS} rounds", n_nodes, n_rows, MAX_ROUNDS, size)
    x = np.maximum(res.x, 0.0)
    n_cols = len(cols)
    lam_w = x[:n_cols]
    a = expand @ x[n_cols : n_cols + expand.shape[1]]
    keep = np.flatnonzero(lam_w > 0)
    row_node = np.repeat(np.arange(n_nodes), tree.row_count)
    b = np.bincount(row_node, weights=a, minlength=n_nodes)
    split = np.where(b[row_node] > 0, a / np.where(b[row_node] > 0, b[row_node], 1.0), tree.row_cond)
    split = split / np.bincount(row_node, weights=split, minlength=n_nodes)[row_node]
    return ColgenSolution(
        0,
        message + f" [column generation: {rounds} rounds, {n_cols} order columns]",
        -float(res.fun),
        np.array([ranks[i] for i in keep], dtype=np.int64).reshape(len(keep), n_nodes),
        lam_w[keep] / lam_w[keep].sum(),
        split,
        rounds,
        size,
    )


def kernel_rows(tree: PrefixTree, ms: np.ndarray, keys: list, sol: ColgenSolution) -> dict:
    """The kernel dict (multiset key -> {output: probability}) of every multiset in ``ms``."""
    entry_m, entry_row, entry_p = kernel_entries(tree, ms, sol)
    bounds = np.searchsorted(entry_m, np.arange(len(ms) + 1)).tolist()
    outputs, rows, probs = tree.row_output, entry_row.tolist(), entry_p.tolist()
    return {
        key: {outputs[r]: pr for r, pr in zip(rows[lo:hi], probs[lo:hi], strict=True) if pr > 0}
        for key, lo, hi in zip(keys, bounds[:-1], bounds[1:], strict=True)
    }


def kernel_entries(
    tree: PrefixTree, ms: np.ndarray, sol: ColgenSolution, chunk: int = 1 << 16
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kernel of every multiset as sparse entries (multiset index, output row, probability).

    Parameters
    ----------
    tree : PrefixTree
    ms : np.ndarray
        (M, K) int64 sorted draft indices of the multisets.
    sol : ColgenSolution
        A status-0 master optimum.
    chunk : int
        Multisets handled per numpy pass (bounds the temporary arrays).

    Returns
    -------
    (entry_m, entry_row, entry_prob) : tuple of np.ndarray
        int64, int64, float64, sorted by multiset then output row; each multiset's entries
        sum to 1 up to float rounding.
    """
    n_nodes = len(tree.node_len)
    row_node = np.repeat(np.arange(n_nodes), tree.row_count)
    node_rows = [np.flatnonzero((row_node == z) & (sol.split > 0)) for z in range(n_nodes)]
    out_m, out_row, out_p = [], [], []
    for lo in range(0, len(ms), chunk):
        held = tree.chains[ms[lo : lo + chunk]].reshape(min(chunk, len(ms) - lo), -1)
        safe = np.maximum(held, 0)
        pairs = np.zeros(0, dtype=np.int64)
        weights = np.zeros(0)
        for rank, lam in zip(sol.ranks, sol.weights, strict=True):
            r = np.where(held >= 0, rank[safe], n_nodes)
            first = safe[np.arange(len(held)), r.argmin(axis=1)]
            pairs = np.concatenate([pairs, np.arange(len(held)) * n_nodes + first])
            weights = np.concatenate([weights, np.full(len(held), lam)])
            pairs, inv = np.unique(pairs, return_inverse=True)
            weights = np.bincount(inv, weights=weights)
        weights = weights / np.bincount(pairs // n_nodes, weights=weights, minlength=len(held))[pairs // n_nodes]
        counts = np.array([len(node_rows[z]) for z in range(n_nodes)])[pairs % n_nodes]
        rows = np.concatenate([node_rows[z] for z in (pairs % n_nodes).tolist()]) if len(pairs) else pairs
        rep_m = np.repeat(pairs // n_nodes, counts)
        out_m.append(lo + rep_m)
        out_row.append(rows)
        out_p.append(np.repeat(weights, counts) * sol.split[rows])
    if not out_m:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    entry_m, entry_row, entry_p = np.concatenate(out_m), np.concatenate(out_row), np.concatenate(out_p)
    order = np.lexsort((entry_row, entry_m))
    return entry_m[order], entry_row[order], entry_p[order]
