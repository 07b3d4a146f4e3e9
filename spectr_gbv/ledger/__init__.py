"""ledger layer: the claims ledgers and the main report, computed from the layers below.

* :mod:`spectr_gbv.ledger.claims`: the SpecTr-GBV claims ledger (each claim of the paper with the
  verdict computation supports, witnesses found by a seeded search);
* :mod:`spectr_gbv.ledger.field_claims`: the field ledger (the field's claims and this project's
  own, each a verdict with its evidence);
* :mod:`spectr_gbv.ledger.deployable`: what a verifier that reads only the drafted rows can
  reach (the joint LP over families of instances, subtree twins, the mirrored pair and its
  exact bound);
* :mod:`spectr_gbv.ledger.report`: the main report (``spectr-gbv report``): exact E[tau] and
  validity defect of every method per K, the bounds beside them and both ledgers.

The ledger imports core, theory, reference and simulate; none of them imports the ledger.
"""
