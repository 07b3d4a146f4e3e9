"""Paired per-iteration E[tau] of verification kernels on identical real-model draft sets.

The bench's block efficiency compares methods on different generations (each method's text
diverges), so its differences carry the between-generation noise. This script records the
kernel inputs (drafts [1, K, L], q, p) of real decoding iterations (SmolLM2-135M-Instruct with
the shipped distilled draft, ``mdbv`` driving the generation), then runs every method's kernel
on exactly those inputs, ``--reps`` times each with fresh uniforms. Given the drafts, the mean
accepted length estimates E[tau | drafts]; averaged over the recorded iterations (drafts drawn
from q) it estimates E[tau] per iteration for every method on the same contexts and drafts, and
the per-iteration differences give a paired standard error.

With ``--exact`` the methods of :data:`spectr_gbv.gpu.kernels.expected.EXPECTED_METHODS` are not
sampled: their E[tau | drafts] is computed in closed form
(:func:`spectr_gbv.gpu.kernels.expected.expected_accepted`), so their paired differences carry
only the drafts' variation (the other methods are still sampled ``--reps`` times).

Usage::

    python bench/paired_kernels.py                       # K = 3, L = 8, T = 0.7, 4 prompts x 40 tokens
    python bench/paired_kernels.py --methods mdbv,near_opt_bv --reps 32
    python bench/paired_kernels.py --top-k 32 --reps 4     # p and q restricted to their top 32
    python bench/paired_kernels.py --threads 1             # seconds per kernel call, one thread
    python bench/paired_kernels.py --methods sd,mdbv,gbv_multipath,near_opt_bv --exact --tokens 80

``--methods`` also takes a user's rule, ``module:attribute`` (the current directory importable):
a torch rule with the kernel signature ``rule(inputs, uniforms) -> VerifyOutput`` or a reference
rule run row by row on the CPU (:mod:`spectr_gbv.gpu.kernels.rules`); it is always sampled::

    python bench/paired_kernels.py --methods mdbv,mymod:my_kernel --record rec.pt

The last column is the share of kernel runs that fell back to the walk (``near_opt_bv``'s
``precision_fallbacks``: a drafted entry that is not a positive float64; 0 for the other kernels).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import torch
from tqdm import tqdm

from spectr_gbv.gpu.decoding.decoder import SpeculativeDecoder
from spectr_gbv.gpu.kernels import verify
from spectr_gbv.gpu.kernels.expected import EXPECTED_METHODS, accepted_law
from spectr_gbv.gpu.kernels.rules import KernelRule, resolve_kernel_rule
from spectr_gbv.realpair.models.draft import load_draft
from spectr_gbv.realpair.models.target import load_target

PROMPTS = (
    "def fibonacci(n):",
    'def is_prime(n):\n    """Return True if n is prime."""',
    "import numpy as np\n\ndef normalize(x):",
    "class Stack:\n    def __init__(self):",
)


def main(argv: list[str] | None = None) -> None:
    """Record real iterations, replay every kernel on them, print the paired table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="sd,mdbv,gbv_multipath,traversal,near_opt_bv")
    ap.add_argument("--baseline", default="mdbv")
    ap.add_argument("--K", type=int, default=3)
    ap.add_argument("--L", type=int, default=8)
    ap.add_argument("--T", type=float, default=0.7)
    ap.add_argument("--tokens", type=int, default=40, help="new tokens per prompt")
    ap.add_argument("--reps", type=int, default=16, help="kernel runs per recorded iteration")
    ap.add_argument("--top-k", type=int, default=None, help="top-k applied to p and q (default: none)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--exact", action="store_true", help="E[tau | drafts] in closed form where there is one")
    ap.add_argument("--record", default=None, help="file of recorded iterations: replayed if it exists, else written")
    ap.add_argument(
        "--out", default=None, help="Parquet file of the per-iteration values (iteration, method, tau, exact)"
    )
    args = ap.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    rules = resolve_methods(methods)
    if args.record is not None and os.path.exists(args.record):
        record = torch.load(args.record)
    else:
        record = record_iterations(args)
        if args.record is not None:
            torch.save(record, args.record)
    replay(args, methods, record, rules)


def resolve_methods(methods: list[str]) -> dict[str, KernelRule]:
    """Each ``--methods`` entry's rule, resolved before anything is decoded; a bad one exits 2 with one line."""
    if not methods:
        print("error: --methods: no method given", file=sys.stderr)
        raise SystemExit(2)
    rules = {}
    for m in methods:
        try:
            rules[m] = resolve_kernel_rule(m)
        except ValueError as exc:
            print(f"error: --methods: {exc}", file=sys.stderr)
            raise SystemExit(2) from exc
        if rules[m].lossless_claimed is False:
            why = f"method {m!r} is lossy (it declares lossless = False)"
            print(f"error: --methods: {why}; the replay runs lossless rules only", file=sys.stderr)
            raise SystemExit(2)
    return rules


def record_iterations(args: argparse.Namespace) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Decode the prompts with ``--baseline`` and return each iteration's kernel inputs (drafts, q, p)."""
    target, tok = load_target()
    draft = load_draft(target)
    dec = SpeculativeDecoder(
        target,
        draft,
        method=args.baseline,
        num_drafts=args.K,
        draft_length=args.L,
        temperature=args.T,
        top_k=args.top_k,
        seed=0,
    )
    record: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def spy(method: str, drafts: torch.Tensor, q: torch.Tensor, p: torch.Tensor, **kw: object) -> object:
        record.append((drafts.clone(), q.clone(), p.clone()))
        return verify(method, drafts, q, p, **kw)  # type: ignore[arg-type]

    dec._verify_fn = spy  # the decoder's kernel entry point (private; this script only reads its inputs)
    for prompt in tqdm(PROMPTS, desc="recording", file=sys.stderr):
        dec.generate(tok(prompt, return_tensors="pt").input_ids[0], max_new_tokens=args.tokens)
    return record


def replay(
    args: argparse.Namespace, methods: list[str], record: list, rules: dict[str, KernelRule] | None = None
) -> None:
    """Run every method (its rule in ``rules``, else by name) on the recorded iterations; print the paired table."""
    rules = rules or {}
    per: dict[str, list[float]] = {m: [] for m in methods}
    spent: dict[str, float] = {m: 0.0 for m in methods}
    fallbacks: dict[str, int] = {m: 0 for m in methods}
    laws: dict[str, list[torch.Tensor]] = {}  # the closed-form laws of tau, per iteration
    for i, (d, q, p) in enumerate(tqdm(record, desc="replaying", file=sys.stderr)):
        rows = (d.expand(args.reps, *d.shape[1:]), q.expand(args.reps, *q.shape[1:]), p.expand(args.reps, *p.shape[1:]))
        for m in methods:
            t0 = time.perf_counter()
            if args.exact and m in EXPECTED_METHODS:
                law = accepted_law(m, d, q, p)[0]
                spent[m] += time.perf_counter() - t0
                laws.setdefault(m, []).append(law)
                per[m].append(float(law @ torch.arange(law.numel(), dtype=torch.float64)))
                continue
            rows_c = (x.contiguous() for x in rows)
            out = verify(rules.get(m, m), *rows_c, generator=torch.Generator().manual_seed(i))
            spent[m] += time.perf_counter() - t0
            fallbacks[m] += int(out.diagnostics.get("precision_fallbacks", 0))
            per[m].append(float(out.num_accepted.double().mean()))
    n = len(record)
    print(
        f"{n} recorded iterations (K = {args.K}, L = {args.L}, T = {args.T}, top-k {args.top_k}), "
        f"{args.reps} kernel runs each"
        + (
            f" (closed-form E[tau | drafts] for {', '.join(m for m in methods if m in EXPECTED_METHODS)})"
            if args.exact
            else ""
        )
        + "\n"
    )
    head = f"| method | E[tau] per iteration | minus {args.baseline} | paired s.e. | s per call (B = {args.reps}) |"
    print(head + " precision fallbacks |")
    print("|---|---|---|---|---|---|")
    base = per.get(args.baseline)
    for m in methods:
        mean, secs = statistics.mean(per[m]), spent[m] / n
        share = f"{fallbacks[m] / (n * args.reps):.3f}"
        if base is None or m == args.baseline:
            print(f"| {m} | {mean:.4f} | - | - | {secs:.3f} | {share} |")
            continue
        diff = [a - b for a, b in zip(per[m], base, strict=True)]
        se = statistics.stdev(diff) / math.sqrt(n)
        print(f"| {m} | {mean:.4f} | {statistics.mean(diff):+.4f} | {se:.4f} | {secs:.3f} | {share} |")
    if laws:
        print_reach(laws, args.L)
    if args.out is not None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [
            {"iteration": i, "method": m, "tau": v, "exact": args.exact and m in EXPECTED_METHODS}
            for m in methods
            for i, v in enumerate(per[m])
        ]
        pq.write_table(pa.Table.from_pylist(rows), args.out)


def print_reach(laws: dict[str, list[torch.Tensor]], L: int) -> None:
    """Mean P(tau >= i) over the iterations, i = 1..L, for the closed-form methods (where E[tau] comes from)."""
    shown = range(1, min(L, 6) + 1)
    print("\nmean P(tau >= i) per iteration (closed form):\n")
    print("| method | " + " | ".join(f"i = {i}" for i in shown) + " |")
    print("|---|" + "---|" * len(shown))
    for m, rows in laws.items():
        reach = torch.stack(rows).flip(-1).cumsum(-1).flip(-1).mean(0)  # [L + 1]: P(tau >= i)
        print(f"| {m} | " + " | ".join(f"{float(reach[i]):.4f}" for i in shown) + " |")


if __name__ == "__main__":
    main()
