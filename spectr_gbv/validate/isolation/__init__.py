"""Calling a third-party verifier isolated from the harness, under a per-call time limit.

* :mod:`~spectr_gbv.validate.isolation.failures` - the failures a call reports (raised, timed out, exited);
* :mod:`~spectr_gbv.validate.isolation.guard` - :class:`~spectr_gbv.validate.isolation.guard.CallGuard`,
  the API every verifier call goes through, and the thread isolation;
* :mod:`~spectr_gbv.validate.isolation.workers` - the process isolation: forked workers and their protocol;
* :mod:`~spectr_gbv.validate.isolation.processes` - worker processes, shared clocks, kills and exit messages.

Import rule: imports the standard library and numpy only, nothing else of ``spectr_gbv``; the
guard imports the workers and the failures, the workers import the processes, never the reverse. This
``__init__`` imports nothing.
"""
