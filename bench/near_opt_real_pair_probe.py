"""Why ``near_opt_bv`` trails MDBV on the real pair: its selection, the heavy tail, the float peel.

Reads the files of an exact paired replay (``bench/paired_kernels.py --exact --record REC --out
PAIRED.parquet``, with at least ``mdbv``, ``gbv_multipath`` and ``near_opt_bv``) and prints:

1. how often ``near_opt_bv``'s E[tau | drafts] equals gbv_multipath's (within ``--tol``);
2. the per-iteration differences to MDBV: gains, losses, the worst and best iterations;
3. the float peel of the node rules on the recorded rows: per call of the coverage peel, the
   fallbacks and the total variation between the realised law (``sum_i w_i v_i``) and the
   constructed base it decomposes (a probe that wraps the kernels' ``decompose_orders``).

Usage::

    python bench/paired_kernels.py --methods sd,mdbv,gbv_multipath,near_opt_bv --exact \\
        --threads 1 --record /tmp/rec.pt --out /tmp/paired.parquet
    python bench/near_opt_real_pair_probe.py --record /tmp/rec.pt --parquet /tmp/paired.parquet
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys

import pyarrow.parquet as pq
import torch
from tqdm import tqdm

from spectr_gbv.gpu.kernels import accepted_law, coverage, node_split


def main(argv: list[str] | None = None) -> None:
    """Print the three diagnostics."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", required=True, help="recorded iterations (paired_kernels.py --record)")
    ap.add_argument("--parquet", required=True, help="per-iteration values (paired_kernels.py --exact --out)")
    ap.add_argument("--tol", type=float, default=0.005, help="agreement tolerance in tokens")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    tau: dict[int, dict[str, float]] = collections.defaultdict(dict)
    for row in pq.read_table(args.parquet).to_pylist():
        tau[row["iteration"]][row["method"]] = row["tau"]
    n = len(tau)
    same = sum(abs(t["near_opt_bv"] - t["gbv_multipath"]) < args.tol for t in tau.values())
    print(f"near_opt_bv equals gbv_multipath within {args.tol} on {same} of {n} iterations")
    diff = sorted(((t["near_opt_bv"] - t["mdbv"], i) for i, t in tau.items()))
    print(
        f"minus mdbv: total {sum(d for d, _ in diff):+.3f} tokens, {sum(d > 1e-9 for d, _ in diff)} gain, "
        f"{sum(d < -1e-9 for d, _ in diff)} lose"
    )
    for label, picked in (("worst", diff[:4]), ("best", diff[-4:])):
        for d, i in picked:
            values = ", ".join(f"{m} {v:.3f}" for m, v in sorted(tau[i].items()))
            print(f"  {label}: iteration {i}: {d:+.3f} ({values})")

    calls: list[tuple[int, float]] = []  # (fallbacks, max TV over the call's rows)
    original = coverage.decompose_orders

    def probe(d: torch.Tensor, *rest: object) -> object:
        out = original(d, *rest)
        calls.append((int(out.fallbacks), float((0.5 * (out.mixed - d).abs().sum(-1)).max())))
        return out

    coverage.decompose_orders = node_split.decompose_orders = probe  # both rules' peels
    try:
        for drafts, q, p in tqdm(torch.load(args.record), desc="peel probe", file=sys.stderr):
            accepted_law("near_opt_bv", drafts, q, p)
    finally:
        coverage.decompose_orders = node_split.decompose_orders = original
    tvs = [tv for _, tv in calls]
    print(
        f"peel: {len(calls)} calls, {sum(f for f, _ in calls)} fallbacks; total variation realised vs base: "
        f"median {statistics.median(tvs):.1e}, max {max(tvs):.1e}, above 1e-6 in "
        f"{sum(t > 1e-6 for t in tvs) / len(tvs):.1%} of the calls, above 1e-3 in {sum(t > 1e-3 for t in tvs)}"
    )


if __name__ == "__main__":
    main()
