"""Sweeps: a declared grid of instances x methods x K run on Ray into a Parquet dataset.

The layer sits above ``simulate`` and ``validate`` and below ``realpair`` and ``cli``. Modules:

* :mod:`spectr_gbv.sweep.schema`: the Parquet table's columns, key and measures (a public contract);
* :mod:`spectr_gbv.sweep.grid`: :class:`~spectr_gbv.sweep.grid.SweepGrid` (TOML file or CLI
  flags) and its split into :class:`~spectr_gbv.sweep.grid.Task` objects, one per instance;
* :mod:`spectr_gbv.sweep.tasks`: :func:`~spectr_gbv.sweep.tasks.run_task`, the rows of one task
  (pure, no Ray);
* :mod:`spectr_gbv.sweep.store`: :class:`~spectr_gbv.sweep.store.SweepStore`, atomic part files
  deduplicated by key, one writer at a time (a lock), and the folder's provenance;
* :mod:`spectr_gbv.sweep.parts`: the parts read back and checked (schema, SHA-256 of the rows,
  damaged files), :func:`~spectr_gbv.sweep.parts.read_table` and
  :func:`~spectr_gbv.sweep.store.verify_folder` (``spectr-gbv sweep verify``);
* :mod:`spectr_gbv.sweep.publish`: atomic writes (temporary name, fsync, rename) and their
  one-line :class:`~spectr_gbv.sweep.publish.SweepWriteError`;
* :mod:`spectr_gbv.sweep.runner`: :func:`~spectr_gbv.sweep.runner.run_sweep` (Ray, resumable,
  retried);
* :mod:`spectr_gbv.sweep.summary`: :func:`~spectr_gbv.sweep.summary.summarize`, the tables and
  plots of a finished sweep.

An application runs its own tasks through the same machinery (:func:`~spectr_gbv.sweep.runner.drive`,
:class:`~spectr_gbv.sweep.store.SweepStore` with its own schema and key, described by a
:class:`~spectr_gbv.sweep.schema.TableKind`); nothing here imports an application (the real-model
bench sweep, :mod:`spectr_gbv.realpair.sweep_task`, is wired in by the CLI).

Nothing is imported here: ray and pyarrow (the ``sweep`` extra) are imported only when a
sweep runs or a dataset is read, so ``import spectr_gbv.sweep`` costs nothing.
"""
