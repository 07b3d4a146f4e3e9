"""Run a command as a child process and time it whole: wall seconds and the child's CPU seconds.

Shared by the bench scripts that time whole processes (``validate_quick.py``, ``validate_speed.py``,
``first_hour.py``); import it from a sibling script (``bench/`` is the script's own folder, so it
is on ``sys.path``).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TimedRun:
    """One finished child process.

    Attributes
    ----------
    proc : subprocess.CompletedProcess[str]
        Its exit status and captured stdout and stderr (text).
    wall_s : float
        Wall seconds from start to exit.
    cpu_s : float
        User plus system CPU seconds of the child and its own children (``os.times``).
    """

    proc: subprocess.CompletedProcess[str]
    wall_s: float
    cpu_s: float


def run_timed(cmd: Sequence[str], *, cwd: str | Path, env: Mapping[str, str] | None = None) -> TimedRun:
    """Run ``cmd`` in ``cwd`` with ``env`` (default: this process's), capturing its output as text."""
    before = os.times()
    t0 = time.perf_counter()
    proc = subprocess.run(list(cmd), cwd=cwd, env=dict(env) if env is not None else None, capture_output=True,
                          text=True, check=False)  # fmt: skip
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return TimedRun(proc, wall, cpu)
