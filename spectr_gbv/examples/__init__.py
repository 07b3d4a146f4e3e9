"""Example verifiers to run through the harness (``spectr-gbv validate module:function``).

Each example is a plain function in one of the harness's interfaces
(:data:`spectr_gbv.validate.interfaces.names.INTERFACES`), written as a third party would write it: numpy
only, nothing imported from the rest of the package.

* :func:`spectr_gbv.examples.textbook_sd.verify` (``--interface generic``): the textbook
  token-level speculative sampling of Leviathan et al. 2023 / Chen et al. 2023 on the first
  of K i.i.d. drafts. It is lossless and passes the harness::

      spectr-gbv validate spectr_gbv.examples.textbook_sd:verify --interface generic --budget quick
"""
