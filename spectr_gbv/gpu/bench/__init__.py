"""The real-model benchmark of ``spectr-gbv bench`` and the real-model law test.

* :mod:`~spectr_gbv.gpu.bench.config` - the grid (one factor at a time around (K, L, T) = (3, 8, 0.7)),
  presets, :class:`~spectr_gbv.gpu.bench.config.BenchConfig` and the injected model pair
  :class:`~spectr_gbv.gpu.bench.config.BenchModels`;
* :mod:`~spectr_gbv.gpu.bench.runner` - loading the models and prompts, :func:`run_benchmark`;
* :mod:`~spectr_gbv.gpu.bench.results` - rows, speed-ups, step costs and the time estimate;
* :mod:`~spectr_gbv.gpu.bench.extras` - the peer, predictions and law-test rows of a run;
* :mod:`~spectr_gbv.gpu.bench.output` - ``runs.csv``, ``results.json``, machine information;
* :mod:`~spectr_gbv.gpu.bench.report` - ``summary.md`` and the PNG plots;
* :mod:`~spectr_gbv.gpu.bench.peer` - transformers' assisted generation, side by side;
* :mod:`~spectr_gbv.gpu.bench.predict` - Monte Carlo B(K) and B_BV(K) on the real model;
* :mod:`~spectr_gbv.gpu.bench.real_lossless` - the law test of the first tokens on the real model.

Import rule: the top layer of :mod:`spectr_gbv.gpu`: may import :mod:`spectr_gbv.gpu.kernels`,
:mod:`spectr_gbv.gpu.decoding`, :mod:`spectr_gbv.gpu.models`, ``core``, ``theory``, ``reference``
and ``simulate``; nothing in ``gpu`` imports it (only ``validate`` and ``cli`` may). Within the
package the runner imports the extras, never the reverse. This ``__init__`` imports nothing
(:mod:`~spectr_gbv.gpu.bench.config` loads without torch, for ``spectr-gbv bench --help``).
"""
