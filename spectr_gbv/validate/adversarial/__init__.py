"""The adversarial search: the instance that maximises the verifier's observed deviation from p.

* :mod:`~spectr_gbv.validate.adversarial.sizes` - the sizes (n, L, K) searched per budget and
  the sizes a run covers;
* :mod:`~spectr_gbv.validate.adversarial.candidates` - random candidates and the local moves;
* :mod:`~spectr_gbv.validate.adversarial.search` - scoring, the search, and its held-out confirmation.

Import rule: may import :mod:`spectr_gbv.validate.battery`, :mod:`spectr_gbv.validate.checks`,
:mod:`spectr_gbv.validate.interfaces` and :mod:`spectr_gbv.validate.report`; never the harness.
This ``__init__`` imports nothing.
"""
