"""Sweep throughput: Ray with 1 vs 2 local workers, and Ray's overhead against a plain loop, in one run.

Run: ``python bench/sweep_throughput.py [--random 3,2,0-39] [--methods sd,mdbv,optimal_multidraft]
[--K 1-3] [--measures tau,bounds,opt]``

On the same grid, in one process and one after the other:

* plain: a loop over :func:`spectr_gbv.sweep.tasks.run_task`, each task's rows written through
  :class:`~spectr_gbv.sweep.store.SweepStore` (the same work as the sweep, without Ray);
* Ray(1) and Ray(2): :func:`spectr_gbv.sweep.runner.run_sweep` on a local Ray started with
  ``num_cpus=1``, then ``num_cpus=2`` (a separate ``ray.init`` / ``ray.shutdown`` each; the
  start-up time is reported apart and left out of the throughput).

Every run writes into a fresh folder. The claims are the ratios: Ray(2) / Ray(1) (parallel
speed-up; at most 2, less when the machine's cores are shared) and Ray(1) / plain (below 1 by
Ray's per-task overhead: scheduling, pickling the task and the rows, the worker start-up).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import ray

from spectr_gbv.sweep.grid import grid_from_args
from spectr_gbv.sweep.runner import run_sweep
from spectr_gbv.sweep.store import SweepStore, read_table
from spectr_gbv.sweep.tasks import run_task


def plain(grid: object, out: Path) -> float:
    """Seconds of the plain loop over the grid's tasks."""
    store = SweepStore(out)
    start = time.perf_counter()
    for task in grid.tasks():
        store.write(run_task(task))
    return time.perf_counter() - start


def with_ray(grid: object, out: Path, num_cpus: int) -> tuple[float, float]:
    """(start-up seconds, sweep seconds) on a fresh local Ray with ``num_cpus`` CPUs."""
    start = time.perf_counter()
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    started = time.perf_counter() - start
    try:
        result = run_sweep(grid, out, show_progress=False)
    finally:
        ray.shutdown()
    assert result.tasks_failed == 0 and result.tasks_done == len(grid.tasks())
    return started, result.seconds


def main() -> None:
    """Run the three measurements and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", default="3,2,0-39")
    parser.add_argument("--methods", default="sd,mdbv,optimal_multidraft")
    parser.add_argument("--K", default="1-3")
    parser.add_argument("--measures", default="tau,bounds,opt")
    args = parser.parse_args()
    grid = grid_from_args(random=[args.random], methods=args.methods, ks=args.K, measures=args.measures)
    tasks = len(grid.tasks())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        plain_s = plain(grid, root / "plain")
        init1, ray1 = with_ray(grid, root / "ray1", 1)
        init2, ray2 = with_ray(grid, root / "ray2", 2)
        rows = {name: read_table(root / name).num_rows for name in ("plain", "ray1", "ray2")}
    assert len(set(rows.values())) == 1, rows
    print(
        f"Grid: --random {args.random} --methods {args.methods} --K {args.K} --measures {args.measures}: "
        f"{tasks} instances, {rows['plain']} rows\n"
    )
    print("| run | Ray start-up (s) | sweep (s) | instances/s |")
    print("|---|---:|---:|---:|")
    print(f"| plain loop | - | {plain_s:.2f} | {tasks / plain_s:.1f} |")
    print(f"| Ray, 1 worker | {init1:.2f} | {ray1:.2f} | {tasks / ray1:.1f} |")
    print(f"| Ray, 2 workers | {init2:.2f} | {ray2:.2f} | {tasks / ray2:.1f} |")
    print()
    print(f"Ray(2) / Ray(1) throughput: {ray1 / ray2:.2f}x")
    print(f"Ray(1) / plain throughput: {plain_s / ray1:.2f}x (overhead {100 * (ray1 / plain_s - 1):+.0f}% wall time)")


if __name__ == "__main__":
    main()
