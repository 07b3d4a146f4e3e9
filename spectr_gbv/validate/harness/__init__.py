"""The harness driver: ``validate(verify, ...)`` and the phases of a run.

* :mod:`~spectr_gbv.validate.harness.driver` - :func:`~spectr_gbv.validate.harness.driver.validate`,
  its arguments (levels, budgets, conventions) and the report it assembles;
* :mod:`~spectr_gbv.validate.harness.state` - the state of one run and how it records a failing verifier;
* :mod:`~spectr_gbv.validate.harness.phases` - the phases of a run, in order;
* :mod:`~spectr_gbv.validate.harness.phase_exact` - the exact level;
* :mod:`~spectr_gbv.validate.harness.support` - the call guard, progress, warnings and sizes of a run.

Import rule: the top layer of :mod:`spectr_gbv.validate`: may import every other subpackage;
nothing in the package imports it but its ``__init__``. This ``__init__`` imports nothing.
"""
