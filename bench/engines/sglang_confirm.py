"""Independent checks beside the referee's verdicts on SGLang's verify kernels, and SGLang's own test statistic.

``forced_coin_facts``
    Runs the **real** released chain kernel (sglang 0.5.23, Triton interpreter) on hand-built rows with forced coins:
    the two failure modes of the earlier port of the tree kernel (a coin of 0 accepting a drafted token of target
    probability 0; an emptied residual emitting ``V - 1``), looked for in the released chain code.
``tree_witness``
    A coin-replay witness on the tree port (``sglang_kernels.tree_target_only_port``, a port of the 0.5.23 CUDA
    kernel): the exact coins that make it emit a token of target probability 0, and that event's probability under
    SGLang's float32 coins, counted exactly.
``engine_test_statistic``
    SGLang's ``test_spec_verify_distribution.py`` statistic (sgl-project/sglang, commit ``1d173484f241``,
    ``TestSpecVerifyDistribution.test_chain_sampler_preserves_target_distribution``): V = 8, 6 slots (5 drafts),
    the same target row at every position and its flip as the draft row, 4 x 8192 rows, the emitted tokens of all
    positions pooled into one histogram, pass iff its total variation from the target row is below 0.02. Applied
    here to any chain-interface verifier (the harness's correct verifier, its planted-bug mutants, or the real
    kernel through the adapter), with the harness's layout.

Each ``*_markdown`` function takes the referee's report text (unused except to be quoted) and returns markdown for a
verdict page (``ENTRIES[...]["confirm"]`` in ``bench.engines.sglang_kernels``).

Run ``python -m bench.engines.sglang_confirm [--real] [--rows N]`` for the engine-test table (``--real`` adds the
real kernel: inside ``.engines/sglang-0.5.23``, about 25 ms per row in the interpreter; progress on stderr).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from bench.engines import sglang_kernels as sk

#: ``TARGET_ROW`` of SGLang's distribution test (V = 8).
SGLANG_TEST_TARGET = np.array([0.35, 0.25, 0.20, 0.10, 0.05, 0.03, 0.015, 0.005])
#: Slots per row in SGLang's test (``NUM_DRAFT = 6``: 5 drafts, then the bonus slot).
SGLANG_TEST_SLOTS = 6
#: SGLang's threshold on the pooled total variation.
SGLANG_TEST_TV = 0.02

ChainFn = Callable[[Any, Any, Any, Any], Any]


def _tv(a: np.ndarray, b: np.ndarray) -> float:
    return float(0.5 * np.abs(a - b).sum())


def engine_test_statistic(
    verify: ChainFn, *, repeats: int = 4, batch: int = 8192, seed: int = 0, chunk: int = 8192, progress: bool = False
) -> tuple[float, int]:
    """SGLang's pooled-histogram statistic for a chain verifier (harness layout): ``(TV, tokens pooled)``.

    Parameters
    ----------
    verify : callable
        Chain interface ``verify(draft_ids [B, L], draft_probs [B, L, V], target_probs [B, L+1, V], uniforms
        [B, L+1]) -> [B, L+1]`` (-1 padded).
    repeats, batch : int
        SGLang uses 4 x 8192 rows.
    seed : int
    chunk : int
        Rows per call.
    progress : bool
        Print progress on stderr.

    Returns
    -------
    (float, int)
        The total variation between the pooled histogram of emitted tokens and ``TARGET_ROW``, and the number of
        tokens pooled. SGLang's test passes iff TV < 0.02.
    """
    rng = np.random.default_rng(seed)
    V, L = SGLANG_TEST_TARGET.size, SGLANG_TEST_SLOTS - 1
    target = SGLANG_TEST_TARGET
    draft = target[::-1].copy()
    hist = np.zeros(V)
    rows = repeats * batch
    t0 = time.time()
    for start in range(0, rows, chunk):
        B = min(chunk, rows - start)
        d = rng.choice(V, size=(B, L), p=draft)
        q = np.broadcast_to(draft, (B, L, V)).copy()
        p = np.broadcast_to(target, (B, L + 1, V)).copy()
        u = rng.random((B, L + 1))
        out = np.asarray(torch.as_tensor(verify(d, q, p, u)))
        hist += np.bincount(out[out >= 0].astype(np.int64), minlength=V)
        if progress:
            print(f"  [{start + B}/{rows} rows, {time.time() - t0:.0f}s]", file=sys.stderr, flush=True)
    return _tv(hist / hist.sum(), target), int(hist.sum())


def forced_coin_facts() -> list[dict[str, Any]]:
    """Run the real chain kernel on the forced-coin rows of ``record_sglang`` and return one dict per row.

    Returns
    -------
    list of dict
        ``case``, ``row`` (harness arrays of the row), ``out`` (emitted tokens), ``p_of_emitted`` (target
        probability of each emitted token at its position).

    Raises
    ------
    ImportError
        Outside the engine environment.
    """
    from bench.engines.record_sglang import CASES

    facts = []
    for name in ("zero_coin", "empty_residual"):
        make, _ = CASES[name]
        h = make()
        out = sk.chain(**h).numpy()
        for b in range(out.shape[0]):
            toks = [int(t) for t in out[b] if t >= 0]
            p = h["target_probs"][b]
            facts.append({
                "case": name,
                "draft": h["draft_ids"][b].tolist(),
                "q_drafted": float(h["draft_probs"][b, 0, h["draft_ids"][b, 0]]),
                "p_row0": p[0].tolist(),
                "uniforms": h["uniforms"][b].tolist(),
                "out": toks,
                "p_of_emitted": [float(p[i, t]) for i, t in enumerate(toks)],
            })
    return facts


def forced_coin_markdown(report_text: str = "") -> str:
    """Markdown: the forced-coin facts of the real chain kernel (:func:`forced_coin_facts`)."""
    del report_text
    lines = [
        "Forced coins on the real kernel (`bench.engines.sglang_confirm.forced_coin_facts`, sglang 0.5.23, "
        "Triton interpreter):",
        "",
        "| case | drafted token, q | p (position 0) | harness uniforms | emitted | p of emitted |",
        "|---|---|---|---|---|---|",
    ]
    for f in forced_coin_facts():
        lines.append(
            f"| {f['case']} | {f['draft']}, {f['q_drafted']:.9g} | {[round(x, 9) for x in f['p_row0']]} | "
            f"{[float(x) for x in f['uniforms']]} | {f['out']} | {f['p_of_emitted']} |"
        )
    return "\n".join(lines)


def tree_witness() -> dict[str, Any]:
    """Coin-replay witness on the tree port: covering siblings, float32 sum below 1, coin in the gap.

    Returns
    -------
    dict
        ``p`` (float32 target row, V = 4, p[3] = 0), ``sum32`` (the kernel's float32 ``prob_acc`` after the three
        siblings), ``coin`` (the forced coin), ``out`` (emitted tokens), ``p_emitted``, ``gap_coins`` (how many
        float32 coins ``k 2**-24`` lie in ``[sum32, 1)``: each makes the kernel emit token 3), ``event_prob``
        (``gap_coins / 2**24``, the probability of the event per call under ``torch.rand`` float32 coins), and
        ``ordinary`` (token counts over 20,000 calls with ordinary coins: token 3 never appears).
    """
    p32 = np.float32([0.3104531, 0.524138, 0.16540891, 0.0])
    V = p32.size
    acc = np.float32(0.0)
    for x in p32[:3]:
        acc = np.float32(acc + x)
    d = torch.tensor([[0], [1], [2]])
    p = torch.from_numpy(np.tile(p32.astype(np.float64), (3, 2, 1)))
    coin = np.float32(1 - 2**-24)
    kw = sk.tree_call_inputs(d, p, torch.Generator().manual_seed(0))
    kw["uniform_samples"].fill_(float(coin))
    sk.tree_target_only_port(**kw)
    out = sk.emitted_tokens(kw["predicts"], kw["accept_index"], kw["accept_token_num"])[0]
    toks = [int(t) for t in out if t >= 0]
    gap = int(2**24 - np.ceil(float(acc) * 2**24))
    counts = np.zeros(V, dtype=np.int64)
    g = torch.Generator().manual_seed(1)
    for _ in range(20000):
        counts[sk.tree_port(d, None, p, g)[0]] += 1
    return {
        "p": p32.tolist(), "sum32": float(acc), "coin": float(coin), "out": toks,
        "p_emitted": float(p32[toks[0]]), "gap_coins": gap, "event_prob": gap / 2**24, "ordinary": counts.tolist(),
    }


def tree_witness_markdown(report_text: str = "") -> str:
    """Markdown for the tree page: :func:`tree_witness`."""
    del report_text
    w = tree_witness()
    return "\n".join([
        "Coin-replay witness on the port (`bench.engines.sglang_confirm.tree_witness`): K = 3 drafts of length 1 "
        f"whose tokens 0, 1, 2 cover the support of p = {w['p']} (float32). The kernel's float32 `prob_acc` after "
        f"the three siblings is {w['sum32']!r} < 1. With the level's coin forced to {w['coin']!r} (the largest "
        f"float32 coin) every sibling is rejected, the residual `relu(p - draft_probs)` is all zero, and the "
        f"kernel emits {w['out']}: token V - 1 = 3, of target probability {w['p_emitted']}.",
        "",
        f"Exact count: {w['gap_coins']} of the 2^24 float32 coins `k 2^-24` lies in [{w['sum32']!r}, 1), so the "
        f"event has probability {w['event_prob']:.3g} per call on this row under `torch.rand` float32 coins. "
        f"With ordinary coins (20,000 calls) the first emitted token's counts are {w['ordinary']} "
        "(token 3 never seen).",
    ])


def lagged_target_chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any) -> np.ndarray:
    """Planted bug (chain interface): SD that reads the target row of the previous position (row ``max(t-1, 0)``).

    Correct token-level rejection sampling (acceptance coin ``uniforms[b, t]``, correction and bonus by inverse CDF
    with ``uniforms[b, t+1]``) except that position t's acceptance ratio and residual use ``target_probs[b, t-1]``
    for t >= 1: an off-by-one in the target row index, the kind of layout bug an adapter or kernel can carry.
    Lossless only where every position has the same target row, as in SGLang's distribution test.

    Parameters
    ----------
    draft_ids : ndarray, shape [B, L], int
    draft_probs : ndarray, shape [B, L, V], float
    target_probs : ndarray, shape [B, L+1, V], float
    uniforms : ndarray, shape [B, L+1], float in [0, 1)

    Returns
    -------
    ndarray, shape [B, L+1], int64
        Emitted tokens, -1 padded.
    """
    d = np.asarray(draft_ids, dtype=np.int64)
    q = np.asarray(draft_probs, dtype=np.float64)
    p = np.asarray(target_probs, dtype=np.float64)
    u = np.asarray(uniforms, dtype=np.float64)
    B, L = d.shape
    out = np.full((B, L + 1), -1, dtype=np.int64)

    def draw(w: np.ndarray, x: float) -> int:
        c = np.cumsum(w)
        return int(min(np.searchsorted(c, x * c[-1], side="right"), w.size - 1))

    for b in range(B):
        for t in range(L + 1):
            row = p[b, max(t - 1, 0)]
            if t == L:
                out[b, t] = draw(p[b, max(L - 1, 0)], u[b, L])
                break
            x = d[b, t]
            if q[b, t, x] > 0 and u[b, t] < row[x] / q[b, t, x]:
                out[b, t] = x
                continue
            resid = np.maximum(row - q[b, t], 0.0)
            out[b, t] = draw(resid if resid.sum() > 0 else row, u[b, t + 1])
            break
    return out


def _generic_as_chain(fn: Callable[..., Any]) -> ChainFn:
    """A K = 1 generic-interface verifier run row by row as a chain verifier (numpy rng seeded per call)."""

    def chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any) -> np.ndarray:
        d, q, p = np.asarray(draft_ids), np.asarray(draft_probs), np.asarray(target_probs)
        rng = np.random.default_rng(int(np.asarray(uniforms)[0, 0] * 2**32))
        out = np.full((d.shape[0], d.shape[1] + 1), -1, dtype=np.int64)
        for b in range(d.shape[0]):
            toks = [int(x) for x in fn(d[b][None], q[b][None], p[b][None], rng)]
            out[b, : len(toks)] = toks
        return out

    return chain


def _engine_table(real: bool, rows: int) -> str:
    from spectr_gbv.testing.mutants import CHAIN_CORRECT, CHAIN_MUTANTS, DIAGNOSIS_MUTANTS, MUTANTS

    verifiers: dict[str, ChainFn] = {f"correct_{k}": v for k, v in CHAIN_CORRECT.items()}
    verifiers.update({k: v for k, v in CHAIN_MUTANTS.items() if k != "accepts_placeholder"})
    for name in ("softmax_residual", "target_sample_or_ratio", "temperature_draft_only"):
        verifiers[name] = _generic_as_chain(MUTANTS[name])
    verifiers["coarse_coin"] = _generic_as_chain(DIAGNOSIS_MUTANTS["coarse_coin"])
    verifiers["lagged_target_chain (planted here)"] = lagged_target_chain
    if real:
        verifiers["sglang 0.5.23 chain (real kernel)"] = sk.chain
        verifiers["sglang 0.5.23 chain, block (real kernel)"] = sk.chain_block
    lines = ["| verifier | rows | tokens pooled | pooled TV | SGLang test (TV < 0.02) |", "|---|---|---|---|---|"]
    for name, fn in verifiers.items():
        is_real = name.startswith("sglang")
        n = rows if is_real else 4 * 8192
        print(f"[engine statistic] {name}: {n} rows", file=sys.stderr, flush=True)
        tv, tokens = engine_test_statistic(fn, repeats=1, batch=n, chunk=min(n, 2048 if is_real else 8192),
                                           progress=is_real)
        lines.append(f"| {name} | {n} | {tokens} | {tv:.4f} | {'pass' if tv < SGLANG_TEST_TV else 'FAIL'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """CLI: print the engine-test table (markdown) on stdout."""
    ap = argparse.ArgumentParser(description="SGLang's distribution-test statistic on chain verifiers")
    ap.add_argument("--real", action="store_true", help="add the real kernel (engine env only)")
    ap.add_argument("--rows", type=int, default=4 * 8192, help="rows for the real kernel (SGLang: 4 x 8192)")
    args = ap.parse_args(argv)
    print(_engine_table(args.real, args.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
