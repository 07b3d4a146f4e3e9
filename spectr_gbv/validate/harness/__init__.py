"""The harness driver: ``validate(verify, ...)`` and the phases of a run.

* :mod:`~spectr_gbv.validate.harness.driver` - :func:`~spectr_gbv.validate.harness.driver.validate`
  and the report it assembles;
* :mod:`~spectr_gbv.validate.harness.options` - :class:`~spectr_gbv.validate.harness.options.ValidateOptions`,
  the options of a run (levels, budgets, conventions) and their checks;
* :mod:`~spectr_gbv.validate.harness.state` - :class:`~spectr_gbv.validate.harness.state.RunContext`,
  the state of one run that its phases share, and how it records a failing verifier;
* :mod:`~spectr_gbv.validate.harness.phases` - the :class:`~spectr_gbv.validate.harness.phases.Phase`
  protocol and the phases of a run, in order;
* :mod:`~spectr_gbv.validate.harness.phase_exact` - the exact level;
* :mod:`~spectr_gbv.validate.harness.support` - the call guard, progress, warnings and sizes of a run.

Import rule: the top layer of :mod:`spectr_gbv.validate`: may import every other subpackage;
nothing in the package imports it but its ``__init__``. This ``__init__`` imports nothing.
"""
