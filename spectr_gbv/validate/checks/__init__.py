"""The law checks of a validation run: structural, statistical, exact and against a reference.

* :mod:`~spectr_gbv.validate.checks.structural` - what every output must satisfy, and batched calls;
* :mod:`~spectr_gbv.validate.checks.sampling` - sampling the verifier on a battery instance;
* :mod:`~spectr_gbv.validate.checks.diagnosis` - what a failed law test says is wrong;
* :mod:`~spectr_gbv.validate.checks.statistical` - the G-tests of the output law and E[tau];
* :mod:`~spectr_gbv.validate.checks.exact_declared` - the exact level from a declared ``outcome_law``;
* :mod:`~spectr_gbv.validate.checks.exact_chain` - the exact level of a chain verifier by bisection;
* :mod:`~spectr_gbv.validate.checks.reference` - the conditional law on fixed drafts vs a named reference.

Import rule: may import :mod:`spectr_gbv.validate.battery`, :mod:`spectr_gbv.validate.interfaces`,
:mod:`spectr_gbv.validate.isolation`, :mod:`spectr_gbv.validate.report` and
:mod:`spectr_gbv.validate.reference_variants`; never the probes, the adversarial search or the
harness. This ``__init__`` imports nothing.
"""
