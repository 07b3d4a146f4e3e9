"""The real-pair application: the real-model benchmark of ``spectr-gbv bench``, its models and sweep task.

* :mod:`~spectr_gbv.realpair.models` - the real pair (SmolLM2-135M-Instruct and its distilled
  draft), fetching, the cache, conversion, prompt sets;
* :mod:`~spectr_gbv.realpair.config` - the grid (one factor at a time around (K, L, T) = (3, 8, 0.7)),
  presets, :class:`~spectr_gbv.realpair.config.BenchConfig` and the injected model pair
  :class:`~spectr_gbv.realpair.config.BenchModels`;
* :mod:`~spectr_gbv.realpair.runner` - loading the models and prompts,
  :func:`~spectr_gbv.realpair.runner.run_benchmark`;
* :mod:`~spectr_gbv.realpair.results` - rows, speed-ups, step costs and the time estimate;
* :mod:`~spectr_gbv.realpair.extras` - the peer, predictions and law-test rows of a run;
* :mod:`~spectr_gbv.realpair.output` - ``runs.csv``, ``results.json``, machine information;
* :mod:`~spectr_gbv.realpair.report` - ``summary.md`` and the PNG plots;
* :mod:`~spectr_gbv.realpair.peer` - transformers' assisted generation, side by side;
* :mod:`~spectr_gbv.realpair.predict` - Monte Carlo B(K) and B_BV(K) on the real model;
* :mod:`~spectr_gbv.realpair.real_lossless` - the law test of the first tokens on the real model;
* :mod:`~spectr_gbv.realpair.sweep_task` - the bench grid as Ray tasks into Parquet
  (``spectr-gbv sweep bench``), through the generic :mod:`spectr_gbv.sweep` machinery.

Import rule: an application above :mod:`spectr_gbv.gpu` and :mod:`spectr_gbv.sweep`: may import
them and every lower layer (``core``, ``theory``, ``reference``, ``simulate``, ``ledger``,
``validate``, ``testing``); nothing below it imports it (only ``examples`` and ``cli`` may).
Within the package a run's data flows one way: the configuration (:mod:`~spectr_gbv.realpair.config`)
is built once and handed to the runner, which measures the grid, has the extras measured and
builds one :class:`~spectr_gbv.realpair.results.BenchResult`, which output and report render;
no module calls back into the one that called it. This ``__init__`` imports nothing
(:mod:`~spectr_gbv.realpair.config` loads without torch, for ``spectr-gbv bench --help``).
"""
