"""Robustness probes: inputs that trigger public verification bugs, and the coins they force.

* :mod:`~spectr_gbv.validate.probes.runner` - forcing a probe's coin, running and judging its rows;
* :mod:`~spectr_gbv.validate.probes.search` - searching for the forced draw, confirming its dtype
  and orientation;
* :mod:`~spectr_gbv.validate.probes.input_probes` - determinism and -1 placeholder ids;
* :mod:`~spectr_gbv.validate.probes.coin_probes` - coins of exactly 0, all-zero residuals (forced),
  a NaN target row, and the reuse of the deciding uniform;
* :mod:`~spectr_gbv.validate.probes.free_probes` - all-zero residuals met by the verifier's own
  randomness, with the observed failure rate.

Import rule: may import :mod:`spectr_gbv.validate.coins`, :mod:`spectr_gbv.validate.battery`,
:mod:`spectr_gbv.validate.checks`, :mod:`spectr_gbv.validate.interfaces`,
:mod:`spectr_gbv.validate.isolation` and :mod:`spectr_gbv.validate.report`; the probes import the
runner and search, never the reverse. This ``__init__`` imports nothing.
"""
