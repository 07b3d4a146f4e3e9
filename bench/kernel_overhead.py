"""Wall time of every verification kernel at realistic shapes, side by side in one run.

Run: ``python bench/kernel_overhead.py [--device cpu|cuda] [--V 49152] [--B 1] [--repeats 20]
[--step-ms MS] [--methods sd,bv,...] [--shapes 1x4,1x8,4x4,4x8]``. For each shape (B rows, K x L, by
default K in {1, 4} and L in {4, 8}; V = 49152, float32) it builds draft/target rows as softmaxes of
random logits (standard deviation 3, so rows are peaked like a language model's), drafts sampled
from q along a consistent draft tree (drafts sharing a prefix share its rows), then times
``verify(method, ...)`` (input validation included) and, separately, the validation alone. Reported:
the median over ``--repeats`` runs after 3 warm-up runs (fewer runs for kernels slower than a
second: :func:`timed`), in ms, and the ratio to ``sd`` (the cheapest verifier that reads
probabilities) at the same shape; with ``--step-ms`` also the ratio to a target decoding step of
that many ms. On CUDA every run is synchronised before the clock stops. ``--methods`` also takes
a user's rule, ``module:attribute`` (:mod:`spectr_gbv.gpu.kernels.rules`), resolved once.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from spectr_gbv.gpu.kernels import KERNEL_METHODS, default_device, resolve_kernel_rule, validate_inputs, verify

#: Kernels whose per-node cost is super-linear in V, timed only up to this V (they are skipped,
#: and say so, above it): optimal_multidraft peels up to |supp q| priority orders per node
#: (O(V^3 log V) worst case; 9 s per call at V = 1024 on CPU). near_opt_bv builds a rule of
#: that kind at every drafted prefix but is timed at every V (minutes per call at V = 49,152:
#: docs/near_opt_bv.md, "Complexity"); slow kernels get fewer runs (:func:`timed`).
MAX_V: dict[str, int] = {"optimal_multidraft": 1024}

#: A kernel whose first (warm-up) call takes longer than this many seconds is timed over as many
#: further calls as fit in :data:`SLOW_BUDGET_S` (at least one), without more warm-ups.
SLOW_CALL_S = 1.0
SLOW_BUDGET_S = 60.0


def tree_rows(B: int, K: int, L: int, V: int, device: torch.device, seed: int) -> tuple[torch.Tensor, ...]:
    """Drafts [B, K, L] sampled from q, with rows shared by drafts that share a prefix."""
    gen = torch.Generator().manual_seed(seed)
    drafts = torch.zeros(B, K, L, dtype=torch.int64)
    q = torch.zeros(B, K, L, V)
    p = torch.zeros(B, K, L + 1, V)
    for b in range(B):
        rows_q: dict[tuple[int, ...], torch.Tensor] = {}
        rows_p: dict[tuple[int, ...], torch.Tensor] = {}
        for k in range(K):
            prefix: tuple[int, ...] = ()
            for t in range(L + 1):
                if prefix not in rows_p:
                    rows_p[prefix] = torch.softmax(3.0 * torch.randn(V, generator=gen), -1)
                    rows_q[prefix] = torch.softmax(torch.log(rows_p[prefix]) + 1.5 * torch.randn(V, generator=gen), -1)
                p[b, k, t] = rows_p[prefix]
                if t < L:
                    q[b, k, t] = rows_q[prefix]
                    x = int(torch.multinomial(rows_q[prefix], 1, generator=gen))
                    drafts[b, k, t] = x
                    prefix = prefix + (x,)
    return drafts.to(device), q.to(device), p.to(device)


def timed(fn: object, device: torch.device, repeats: int) -> float:
    """Median wall time of ``fn()`` in ms (3 warm-up calls; CUDA synchronised).

    A call slower than :data:`SLOW_CALL_S` seconds ends the warm-up, and the median is then
    taken over as many calls as fit in :data:`SLOW_BUDGET_S` (at least one, at most ``repeats``).
    """
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        took = time.perf_counter() - t0
        if took > SLOW_CALL_S:
            repeats = max(1, min(repeats, int(SLOW_BUDGET_S / took)))
            break
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    """Time every kernel at every shape and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=str(default_device()))
    parser.add_argument("--V", type=int, default=49152)
    parser.add_argument("--B", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--step-ms", type=float, default=None, help="target decoding step to relate to")
    parser.add_argument("--methods", default=",".join(KERNEL_METHODS), help="kernels to time (sd is always timed)")
    parser.add_argument("--shapes", default="1x4,1x8,4x4,4x8", help="KxL shapes (default: K in {1, 4}, L in {4, 8})")
    args = parser.parse_args()
    shapes = [(int(k), int(l_)) for k, l_ in (shape.split("x") for shape in args.shapes.split(","))]
    asked = [m.strip() for m in args.methods.split(",") if m.strip()]
    methods = [m for m in KERNEL_METHODS if m in {"sd", *asked}] + [m for m in asked if ":" in m]
    rules = {m: resolve_kernel_rule(m) for m in methods if ":" in m}  # users' rules, resolved once
    device = torch.device(args.device)
    print(
        f"device={device} threads={torch.get_num_threads()} B={args.B} V={args.V} float32, "
        f"median of {args.repeats} runs (ms), ratio = kernel / sd at the same shape"
        + (f", step = kernel / {args.step_ms} ms" if args.step_ms else "")
    )
    header = f"{'method':>20} " + " ".join(f"{f'K={K} L={L}':>17}" for K, L in shapes)
    print(header)
    data = {shape: tree_rows(args.B, *shape, args.V, device, seed=sum(shape)) for shape in shapes}
    gens = {shape: torch.Generator(device=device).manual_seed(0) for shape in shapes}
    results: dict[tuple[str, int, int], float] = {}
    for shape in shapes:
        d, q, p = data[shape]
        results[("validate", *shape)] = timed(lambda d=d, q=q, p=p: validate_inputs(d, q, p), device, args.repeats)
        for method in methods:
            if args.V > MAX_V.get(method, args.V):
                continue
            rule = rules.get(method, method)
            results[(method, *shape)] = timed(
                lambda m=rule, d=d, q=q, p=p, g=gens[shape]: verify(m, d, q, p, generator=g, allow_lossy=True),
                device,
                args.repeats,
            )
    for method in ("validate", *methods):
        cells = []
        if (method, *shapes[0]) not in results:
            print(f"{method:>20} skipped: V = {args.V} > {MAX_V[method]} (cost super-linear in V)")
            continue
        for shape in shapes:
            ms = results[(method, *shape)]
            cell = f"{ms:7.2f} ({ms / results[('sd', *shape)]:4.1f}x)"
            if args.step_ms:
                cell += f" {ms / args.step_ms:.2f}"
            cells.append(f"{cell:>17}")
        print(f"{method:>20} " + " ".join(cells))


if __name__ == "__main__":
    main()
