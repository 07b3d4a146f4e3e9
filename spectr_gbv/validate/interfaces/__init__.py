"""The interfaces a verifier may be given in, and the adapters that call it.

* :mod:`~spectr_gbv.validate.interfaces.names` - the interface names, their call signatures,
  and :func:`~spectr_gbv.validate.interfaces.names.check_interface`;
* :mod:`~spectr_gbv.validate.interfaces.outputs` - reading what a verifier returned;
* :mod:`~spectr_gbv.validate.interfaces.loading` - loading a verifier from ``"module:function"``;
* :mod:`~spectr_gbv.validate.interfaces.adapter` - the :class:`~spectr_gbv.validate.interfaces.adapter.Adapter`
  base class: one internal callable whatever the interface;
* :mod:`~spectr_gbv.validate.interfaces.numpy_adapters` - ``generic``, ``chain`` and ``batched``;
* :mod:`~spectr_gbv.validate.interfaces.hf` - Hugging Face transformers' ``_speculative_sampling``;
* :mod:`~spectr_gbv.validate.interfaces.torch_adapters` - the torch-flavoured interfaces;
* :mod:`~spectr_gbv.validate.interfaces.registry` - :func:`~spectr_gbv.validate.interfaces.registry.make_adapter`.

Import rule: may import :mod:`spectr_gbv.validate.isolation` and :mod:`spectr_gbv.validate.report`;
the registry imports the adapters, the adapters import the base class, the loading imports the
names, never the reverse. This ``__init__`` imports nothing.
"""
