"""The bench sweep: the real-model benchmark's grid as Ray tasks, one GPU per configuration, into Parquet.

``spectr-gbv sweep bench`` runs the decoding grid of ``spectr-gbv bench``
(:func:`~spectr_gbv.realpair.config.build_grid`) on a Ray cluster:

* **One task per configuration**: one :class:`~spectr_gbv.realpair.config.GridPoint`
  (method, K, L, T), run on every dataset and prompt of the
  :class:`~spectr_gbv.realpair.config.BenchConfig`; prompt i is decoded with seed
  ``seed + 7919 * i`` for every method (common random numbers, as ``spectr-gbv bench``), so
  the counts of a row equal those of :func:`~spectr_gbv.realpair.runner.run_benchmark`.
* **Placement** (:func:`task_placement`): ``num_gpus=1`` and device ``"cuda"`` when the cluster
  has GPUs (Ray sets ``CUDA_VISIBLE_DEVICES`` to the task's GPU), ``num_cpus=1`` and ``"cpu"``
  otherwise. Ray does not reuse the process of a GPU task (``max_calls=1``, its default: a
  reused process could not move to another GPU once CUDA is initialised), so a GPU task loads
  the model pair itself; CPU workers are reused and load it once per process.
* **Models** come from a picklable spec, ``"module:function"``: a function without arguments
  returning :class:`~spectr_gbv.realpair.config.BenchModels`, called once per worker process
  (module-level cache); the default :data:`SHIPPED_MODELS` is the pair of ``spectr-gbv bench``.
  Prompts likewise (``prompts``: a function ``(config, models) -> {dataset: [Tensor [T]]}``;
  default the benchmark's prompt sets). The module must be importable on the workers.
* **Methods**: the registered names of :data:`~spectr_gbv.realpair.config.METHODS` and users'
  rules, ``"module:attribute"`` (a torch rule with the kernel signature or a reference rule,
  :mod:`spectr_gbv.gpu.kernels.rules`), which each task's decoder imports: like the model spec,
  the module must be importable on the workers. A rule's rows carry its ``module:attribute``
  as ``method``.
* **Rows** (:data:`BENCH_COLUMNS`, one per dataset and configuration) are written by the driver
  through :class:`~spectr_gbv.sweep.store.SweepStore` with :data:`BENCH_KEY`; a rerun skips the
  configurations whose every row is stored. Speed-ups need the ``ar`` row of the same
  temperature, measured by another task, so they are not stored: :func:`read_bench_rows` adds
  them (comparable only when the tasks ran on the same kind of device).

torch and the gpu layer are imported inside the functions only.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectr_gbv.sweep.schema import TableKind

if TYPE_CHECKING:
    from spectr_gbv.realpair.config import BenchConfig, BenchModels, GridPoint
    from spectr_gbv.realpair.results import RunRow
    from spectr_gbv.sweep.runner import SweepResult

#: The default model spec: the shipped pair of ``spectr-gbv bench`` (:func:`shipped_models`).
SHIPPED_MODELS = "spectr_gbv.realpair.sweep_task:shipped_models"

#: Column name -> type of the bench sweep's table, in order: the key (:data:`BENCH_KEY`), the
#: :class:`~spectr_gbv.realpair.results.RunRow` fields (``num_drafts``, ``draft_length``,
#: ``temperature`` named ``K``, ``L``, ``T``; ``speedup`` and ``ar_tokens_per_second`` left to
#: :func:`read_bench_rows`), its derived rates, then provenance.
BENCH_COLUMNS: dict[str, str] = {
    "dataset": "string",
    "method": "string",
    "K": "int64",
    "L": "int64",  # 0 for ar
    "T": "float64",
    "seed": "int64",  # BenchConfig.seed: prompt selection and decoder seeds
    "prompts": "int64",  # prompts per dataset
    "max_new_tokens": "int64",
    "models": "string",  # the model spec "module:function"
    "sweeps": "string",  # ";"-joined sweeps of the point ("K", "L", "T")
    "tokens_generated": "int64",
    "tokens_emitted": "int64",
    "row_iterations": "int64",
    "target_calls": "int64",  # prefills excluded
    "draft_calls": "int64",
    "time_total": "float64",  # seconds, summed over the prompts
    "time_draft": "float64",
    "time_target": "float64",
    "time_verify": "float64",
    "accepted_hist": "list<int64>",  # length L + 1, sums to row_iterations
    "block_efficiency": "float64",
    "block_efficiency_se": "float64",
    "tokens_per_second": "float64",
    "target_calls_per_token": "float64",
    "target_name": "string",
    "draft_name": "string",
    "device": "string",  # "cuda" or "cpu"
    "package_version": "string",
}

#: The columns that identify a bench row.
BENCH_KEY: tuple[str, ...] = ("dataset", "method", "K", "L", "T", "seed", "prompts", "max_new_tokens", "models")


def bench_schema() -> Any:
    """:data:`BENCH_COLUMNS` as a ``pyarrow.Schema`` (every column nullable).

    Raises
    ------
    ImportError
        pyarrow is not installed (``pip install 'spectr_gbv[sweep]'``).
    """
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "list<int64>": pa.list_(pa.int64())}
    return pa.schema([pa.field(name, types[kind]) for name, kind in BENCH_COLUMNS.items()])


#: The bench sweep's table for the generic sweep readers (``spectr-gbv sweep verify`` passes it to
#: :func:`~spectr_gbv.sweep.store.verify_folder`).
BENCH_TABLE = TableKind("bench", BENCH_KEY, bench_schema)


@dataclass(frozen=True)
class Placement:
    """Ray options and decoder device of one bench task.

    Attributes
    ----------
    options : dict
        ``{"num_gpus": 1}`` or ``{"num_cpus": 1}`` (``ray.remote`` options).
    device : str
        ``"cuda"`` (the task's GPU) or ``"cpu"``.
    """

    options: dict[str, int]
    device: str


def task_placement(cluster_resources: Mapping[str, float]) -> Placement:
    """One GPU per task when the cluster has GPUs, else one CPU.

    Parameters
    ----------
    cluster_resources : mapping
        ``ray.cluster_resources()``.

    Returns
    -------
    Placement

    Examples
    --------
    >>> task_placement({"CPU": 16.0, "GPU": 2.0})
    Placement(options={'num_gpus': 1}, device='cuda')
    >>> task_placement({"CPU": 2.0})
    Placement(options={'num_cpus': 1}, device='cpu')
    """
    if cluster_resources.get("GPU", 0) > 0:
        return Placement({"num_gpus": 1}, "cuda")
    return Placement({"num_cpus": 1}, "cpu")


def resolve(spec: str) -> Callable[..., Any]:
    """The function named by ``"module:function"``.

    Raises
    ------
    ValueError
        ``spec`` is malformed, its module does not import or has no such callable.
    """
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"expects 'module:function', got {spec!r}")
    try:
        func = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{spec!r}: {type(exc).__name__}: {exc}") from exc
    if not callable(func):
        raise ValueError(f"{spec!r} is not callable")
    return func


def shipped_models() -> BenchModels:
    """The pair of ``spectr-gbv bench``: SmolLM2-135M-Instruct and the distilled draft (fetched when needed)."""
    from spectr_gbv.realpair.runner import load_models

    return load_models("distilled", progress=False)


@dataclass(frozen=True)
class BenchSweep:
    """A bench sweep: the benchmark configuration and where its models and prompts come from (picklable).

    Attributes
    ----------
    config : BenchConfig
        Its grid, datasets, prompt count, tokens and seed are used (peer, predictions and the law
        test are not run by the sweep).
    models : str
        ``"module:function"`` returning :class:`~spectr_gbv.realpair.config.BenchModels`
        (default :data:`SHIPPED_MODELS`).
    prompts : str, optional
        ``"module:function"`` ``(config, models) -> {dataset: [Tensor [T], int64]}`` with exactly
        ``config.num_prompts`` prompts for every dataset of ``config.datasets``; default
        :func:`~spectr_gbv.realpair.runner.load_bench_prompts`.
    cache_dir : str, optional
        Cache root of the default prompt loader.
    """

    config: BenchConfig
    models: str = SHIPPED_MODELS
    prompts: str | None = None
    cache_dir: str | None = None

    def points(self) -> list[GridPoint]:
        """The configurations, one task each (:meth:`~spectr_gbv.realpair.config.BenchConfig.grid`)."""
        return self.config.grid()

    def keys(self, point: GridPoint) -> set[tuple[Any, ...]]:
        """The :data:`BENCH_KEY` of the rows of ``point`` (one per dataset)."""
        c = self.config
        return {
            (ds, point.method, point.num_drafts, point.draft_length, point.temperature, c.seed, c.num_prompts)
            + (c.max_new_tokens, self.models)
            for ds in c.datasets
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict, lists for tuples (recorded once in the folder's provenance, ``_sweep.parquet``)."""
        data = {"kind": "bench", "config": self.config.summary(), "models": self.models, "prompts": self.prompts}
        return json.loads(json.dumps(data))


_CACHE: dict[tuple[Any, ...], tuple[Any, dict[str, list[Any]]]] = {}


def _models_and_prompts(sweep: BenchSweep, device: str) -> tuple[BenchModels, dict[str, list[Any]]]:
    """The process's model pair (on ``device``, warmed up) and encoded prompts, built once per spec."""
    import torch

    from spectr_gbv.realpair.runner import GridPoint, load_bench_prompts, make_decoder

    c = sweep.config
    key = (sweep.models, sweep.prompts, sweep.cache_dir, device, c.datasets, c.num_prompts, c.seed, c.max_prompt_tokens)
    if key not in _CACHE:
        models = resolve(sweep.models)()
        models.target.to(device)
        if isinstance(models.draft, torch.nn.Module):
            models.draft.to(device)
        if sweep.prompts is None:
            prompts, _ = load_bench_prompts(c, models, sweep.cache_dir, progress=False)
        else:
            prompts = resolve(sweep.prompts)(c, models)
        for ds in c.datasets:
            if len(prompts.get(ds, ())) != c.num_prompts:
                raise ValueError(f"prompts: {ds!r} has {len(prompts.get(ds, ()))} prompts, expected {c.num_prompts}")
        first = prompts[c.datasets[0]][0]
        for point in (GridPoint("ar", 1, 0, c.centre[2], ()), GridPoint("mdbv", 2, 2, c.centre[2], ())):  # warm-up
            make_decoder(models, point, c.seed, device).generate(first, max_new_tokens=4)
        _CACHE[key] = (models, prompts)
    return _CACHE[key]  # type: ignore[return-value]


def run_point(sweep: BenchSweep, point: GridPoint, device: str = "cpu") -> list[dict[str, Any]]:
    """The :data:`BENCH_COLUMNS` rows of one configuration, one per dataset (what a task runs; no Ray).

    Parameters
    ----------
    sweep : BenchSweep
    point : GridPoint
        One configuration of ``sweep.points()``.
    device : str
        Decoder device (``"cuda"``: the task's GPU).

    Returns
    -------
    list of dict
        In ``config.datasets`` order.

    Raises
    ------
    ValueError
        A malformed spec, or a prompt loader that does not give ``num_prompts`` prompts per dataset.
    """
    import spectr_gbv
    from spectr_gbv.realpair.runner import RunRow, make_decoder

    models, prompts = _models_and_prompts(sweep, device)
    c = sweep.config
    rows = []
    for ds in c.datasets:
        row = RunRow(ds, *point.key, ";".join(point.sweeps))
        for i, ids in enumerate(prompts[ds]):
            _, stats = make_decoder(models, point, c.seed + 7919 * i, device).generate(ids, c.max_new_tokens)
            row.add(stats)
        out = row.summary()
        for name in ("speedup", "ar_tokens_per_second"):
            del out[name]
        out["K"], out["L"], out["T"] = out.pop("num_drafts"), out.pop("draft_length"), out.pop("temperature")
        out.update(seed=c.seed, max_new_tokens=c.max_new_tokens, models=sweep.models, device=device)
        out.update(target_name=models.target_name, draft_name=models.draft_name)
        out["package_version"] = spectr_gbv.__version__
        rows.append(out)
    return rows


def run_bench_sweep(
    sweep: BenchSweep,
    out: str | Path,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    show_progress: bool = True,
    max_retries: int = 3,
) -> SweepResult:
    """Run every configuration of ``sweep`` not yet stored in ``out`` as a Ray task; rows go to Parquet.

    Parameters
    ----------
    sweep : BenchSweep
    out : str or Path
        The dataset folder (:class:`~spectr_gbv.sweep.store.SweepStore` with :func:`bench_schema`
        and :data:`BENCH_KEY`; created if missing). Configurations already stored are skipped.
    address : str, optional
        An existing Ray cluster. Default: a local Ray with ``num_cpus`` CPUs (and the machine's
        GPUs); a Ray already initialised is reused.
    num_cpus : int, optional
        CPUs of the local Ray (default ``os.cpu_count()``).
    show_progress : bool
        A progress bar on stderr (terminals only).
    max_retries : int
        Ray's retries of a task whose worker died.

    Returns
    -------
    SweepResult
        Counted in configurations (tasks).

    Raises
    ------
    ImportError
        ray or pyarrow is missing.
    ValueError
        ``out`` is not a folder, or holds a sweep with another key, or ``address`` is unreachable.
    FolderLockedError, PartError, SweepWriteError, SweepInterrupted
        As :func:`~spectr_gbv.sweep.runner.run_sweep`.
    """
    from spectr_gbv.sweep.runner import SweepResult, check_address, drive, import_backends, start_ray

    start = time.perf_counter()
    ray = import_backends()
    from spectr_gbv.sweep.store import SweepStore

    if address is not None and not ray.is_initialized():
        check_address(address)  # before the folder is touched
    store = SweepStore(out, schema=bench_schema(), key=BENCH_KEY)
    with store.locked():
        store.record_grid(sweep.to_dict())
        points = sweep.points()
        stored = store.existing_keys()
        pending = [p for p in points if not sweep.keys(p) <= stored]
        result = SweepResult(len(points), len(points) - len(pending), 0, 0, 0, 0.0, str(out))
        if not pending:
            return replace(result, seconds=time.perf_counter() - start)
        started_ray = start_ray(ray, address, num_cpus)
        try:
            placement = task_placement(ray.cluster_resources())
            remote = ray.remote(max_retries=max_retries, **placement.options)(run_point)
            slots = ray.cluster_resources().get("GPU" if "num_gpus" in placement.options else "CPU", 1)
            result = drive(
                ray,
                pending,
                lambda point: remote.remote(sweep, point, placement.device),
                lambda point: str(point.key),
                store,
                result,
                label="sweep bench",
                window=max(4, 2 * int(slots or 1)),
                show_progress=show_progress,
            )
        finally:
            if started_ray:
                ray.shutdown()
    return replace(result, seconds=time.perf_counter() - start)


def read_bench_rows(directory: str | Path) -> list[RunRow]:
    """The stored rows as :class:`~spectr_gbv.realpair.results.RunRow` objects, with speed-ups.

    Speed-ups (:func:`~spectr_gbv.realpair.results.add_speedups`) are taken within the rows of one
    (seed, prompts, max_new_tokens, models); a row without its ``ar`` row keeps NaN.

    Parameters
    ----------
    directory : str or Path
        A bench sweep folder.

    Returns
    -------
    list of RunRow
        Sorted by key.

    Raises
    ------
    ValueError
        ``directory`` is not a folder.
    PartError
        A damaged, foreign or corrupt part (named; :func:`~spectr_gbv.sweep.parts.read_part`).
    """
    from spectr_gbv.realpair.results import RunRow, add_speedups
    from spectr_gbv.sweep.store import read_table

    table = read_table(directory, schema=bench_schema(), key=BENCH_KEY).to_pylist()
    groups: dict[tuple[Any, ...], list[RunRow]] = {}
    fields = [f for f in RunRow.__dataclass_fields__ if f not in ("speedup", "ar_tokens_per_second")]
    for r in sorted(table, key=lambda r: tuple(r[c] for c in BENCH_KEY)):
        values = dict(r, num_drafts=r["K"], draft_length=r["L"], temperature=r["T"])
        row = RunRow(**{f: values[f] for f in fields})
        groups.setdefault((r["seed"], r["prompts"], r["max_new_tokens"], r["models"]), []).append(row)
    for rows in groups.values():
        add_speedups(rows)
    return [row for rows in groups.values() for row in rows]


__all__ = [
    "BENCH_COLUMNS",
    "BENCH_KEY",
    "BENCH_TABLE",
    "SHIPPED_MODELS",
    "BenchSweep",
    "Placement",
    "bench_schema",
    "read_bench_rows",
    "resolve",
    "run_bench_sweep",
    "run_point",
    "shipped_models",
    "task_placement",
]
