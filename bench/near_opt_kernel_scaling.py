"""Seconds per call of the ``near_opt_bv`` kernel against the vocabulary size, side by side in one run.

Run: ``python bench/near_opt_kernel_scaling.py [--Vs 64,1024,4096,16384,49152] [--Bs 1,8]
[--K 4] [--L 3] [--cap 120] [--threads 1] [--walk] [--lex]``. For each V and B it builds float64 rows
(seeded) as softmaxes of random logits, drafts sampled from q along a consistent draft tree
(drafts sharing a prefix share their rows; ``bench/kernel_overhead.py``'s ``tree_rows``), and
times one ``verify("near_opt_bv", ...)`` call on the CPU (the registered score selection;
``time.perf_counter``; input validation included). ``sd`` is timed at the same shape as the
cheap baseline, and the table reports the ratio; ``--walk`` also times the first version's walk
(``verify_near_opt_bv(..., selection="walk")``) side by side, and ``--lex`` the score selection
with the lexicographically optimal base (``priority="lex"``, the registered rule before the
hedged base) with its peel fallbacks. A V whose call exceeds ``--cap``
seconds is reported as "> cap" and larger V are skipped. ``--threads`` sets torch's intra-op
threads (1 by default: on a shared, oversubscribed machine the thread pool makes small
element-wise ops orders of magnitude slower).
"""

from __future__ import annotations

import argparse
import time

import torch

from spectr_gbv.gpu.kernels import verify
from spectr_gbv.gpu.kernels.common import TorchUniforms, validate_inputs
from spectr_gbv.gpu.kernels.near_opt_bv import verify_near_opt_bv


def softmax_tree(B: int, K: int, L: int, V: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Drafts [B, K, L] sampled from q, float64 rows [B, K, L(+1), V] shared along shared prefixes."""
    gen = torch.Generator().manual_seed(seed)
    drafts = torch.zeros(B, K, L, dtype=torch.int64)
    q = torch.zeros(B, K, L, V, dtype=torch.float64)
    p = torch.zeros(B, K, L + 1, V, dtype=torch.float64)
    for b in range(B):
        rows_q: dict[tuple[int, ...], torch.Tensor] = {}
        rows_p: dict[tuple[int, ...], torch.Tensor] = {}
        for k in range(K):
            prefix: tuple[int, ...] = ()
            for t in range(L + 1):
                if prefix not in rows_p:
                    rows_p[prefix] = torch.softmax(torch.randn(V, generator=gen, dtype=torch.float64), -1)
                    rows_q[prefix] = torch.softmax(torch.randn(V, generator=gen, dtype=torch.float64), -1)
                p[b, k, t] = rows_p[prefix]
                if t < L:
                    q[b, k, t] = rows_q[prefix]
                    x = int(torch.multinomial(rows_q[prefix], 1, generator=gen))
                    drafts[b, k, t] = x
                    prefix = prefix + (x,)
    return drafts, q, p


def seconds(method: str, rows: tuple[torch.Tensor, ...], seed: int) -> tuple[float, dict[str, int]]:
    """Wall time of one kernel call and its diagnostics.

    ``method`` is a registered method, ``"walk"`` (near_opt_bv's walk) or ``"lex"`` (its score
    selection with the lexicographically optimal base).
    """
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(seed)
    if method in ("walk", "lex"):
        uniforms = TorchUniforms(torch.device("cpu"), gen)
        if method == "walk":
            out = verify_near_opt_bv(validate_inputs(*rows, gen), uniforms, "walk")
        else:
            out = verify_near_opt_bv(validate_inputs(*rows, gen), uniforms, "score", priority="lex")
    else:
        out = verify(method, *rows, generator=gen)
    return time.perf_counter() - t0, {k: int(v) for k, v in out.diagnostics.items()}


def main() -> None:
    """Time the kernel at every (V, B) and print one markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--Vs", default="64,1024,4096,16384,49152")
    parser.add_argument("--Bs", default="1,8")
    parser.add_argument("--K", type=int, default=4)
    parser.add_argument("--L", type=int, default=3)
    parser.add_argument("--cap", type=float, default=120.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--walk", action="store_true", help="also time selection='walk'")
    parser.add_argument("--lex", action="store_true", help="also time the lexicographic base (priority='lex')")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    Vs = [int(v) for v in args.Vs.split(",")]
    Bs = [int(b) for b in args.Bs.split(",")]
    print(f"near_opt_bv, CPU float64, K = {args.K}, L = {args.L}, torch threads = {args.threads}\n")
    print("| V | B | near_opt_bv s/call | sd s/call | ratio | peel fallbacks | walk s/call | lex s/call (fallbacks) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    stopped = set()
    for V in Vs:
        for B in Bs:
            if B in stopped:
                print(f"| {V} | {B} | skipped (a smaller V exceeded {args.cap:g} s) | | | | | |")
                continue
            rows = softmax_tree(B, args.K, args.L, V, seed=V + B)
            sd, _ = seconds("sd", rows, 0)
            s, diag = seconds("near_opt_bv", rows, 0)
            walk = f"{seconds('walk', rows, 0)[0]:.3f}" if args.walk else ""
            lex = ""
            if args.lex:
                s_lex, d_lex = seconds("lex", rows, 0)
                lex = f"{s_lex:.3f} ({d_lex['peel_fallbacks']})"
            tail = f"{diag['peel_fallbacks']} | {walk} | {lex} |"
            if s > args.cap:
                stopped.add(B)
                print(f"| {V} | {B} | > {args.cap:g} s ({s:.1f}) | {sd:.4f} | | {tail}", flush=True)
            else:
                print(f"| {V} | {B} | {s:.3f} | {sd:.4f} | {s / sd:.0f} | {tail}", flush=True)


if __name__ == "__main__":
    main()
