"""Run a sweep grid on Ray: tasks in workers, rows written by the driver, resumable, retried.

:func:`run_sweep` splits the grid into tasks (one per instance), skips the tasks whose every
row is already stored (resume), runs the others as Ray tasks with ``max_retries`` (a worker
that dies mid-task is replaced and the task rerun), and writes each finished task's rows from
the driver through :class:`~spectr_gbv.sweep.store.SweepStore`, so a dying worker never leaves
a partial file and no key is ever stored twice. Ray runs locally by default (``ray.init``
with the machine's CPUs, no dashboard); ``address`` joins an existing cluster; a Ray already
initialised in the process is reused.

A user's rule named ``"module:attribute"`` is imported by each worker: the driver passes the
folders its rules were imported from, its current directory and its ``PYTHONPATH`` to the
workers as their ``PYTHONPATH`` (:func:`worker_pythonpath`, through the tasks'
``runtime_env``), so a rule module in the directory the sweep was started from works on a
local Ray; on a cluster the module must be importable on every node. A class added with
:func:`~spectr_gbv.reference.registry.register` travels with the tasks and is registered in
each worker.

Testing hook: when the environment variable :data:`KILL_ONCE_ENV` names a file that does not
exist yet, the first task to see it creates the file and kills its worker process
(``os._exit(1)``), mid-task; Ray must then retry the task. The variable is read in the driver
and passed to the workers through the task's ``runtime_env``, so it works on a Ray started
before it was set.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spectr_gbv.sweep.address import CONNECT_TIMEOUT, check_address
from spectr_gbv.sweep.grid import SweepGrid, Task

#: Environment variable of the worker-kill testing hook (see the module docstring).
KILL_ONCE_ENV = "SPECTR_GBV_SWEEP_KILL_ONCE"

#: The one-line hint given when ray or pyarrow is missing.
INSTALL_HINT = "spectr-gbv sweep needs ray and pyarrow: pip install 'spectr_gbv[sweep]'"
#: Logger of Ray's token-authentication set-up (Ray >= 2.59), whose one note
#: :func:`~spectr_gbv.sweep.runner.start_ray` drops for its own local cluster.
RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
#: The start of the one note that logger writes at WARNING level when ``ray.init()`` starts a local
#: cluster with token authentication on by default (``RAY_AUTH_MODE`` unset);
#: :func:`~spectr_gbv.sweep.runner.start_ray` drops it, and only it, while it starts its own local cluster.
RAY_AUTH_NOTE = "Token authentication is enabled for this Ray cluster."


class _LocalAuthNoteFilter(logging.Filter):
    """Drops Ray's "Token authentication is enabled" note for the local cluster a sweep starts.

    Ray 2.59 turned token authentication on by default for a local ``ray.init()`` cluster and
    logs a WARNING saying so on every start ("Set RAY_AUTH_MODE=disabled to opt out"). The
    behaviour is the safe one and the sweep keeps it (the cluster lives on this machine, for
    this one run, and is shut down after); the line only announces Ray's new default, yet reads
    as a fault in every passing sweep. Setting ``RAY_AUTH_MODE=token`` ourselves would silence it
    too, but Ray reads that variable once, when ``ray`` is imported: set later it leaves the
    driver and the cluster disagreeing, and ``ray.init`` fails ("InvalidAuthToken"). So the note
    is filtered, narrowly: one message text, on Ray's authentication logger, only around the
    ``ray.init`` of a local cluster; with ``--address`` (a user's cluster) nothing is filtered,
    and any other message (e.g. that authentication is *disabled*) passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` passes: False for Ray's note only.

        Parameters
        ----------
        record : logging.LogRecord

        Returns
        -------
        bool
            False when the message starts with :data:`~spectr_gbv.sweep.runner.RAY_AUTH_NOTE`.
        """
        return not record.getMessage().startswith(RAY_AUTH_NOTE)


@dataclass(frozen=True)
class SweepResult:
    """What one :func:`run_sweep` call did.

    Attributes
    ----------
    tasks_total : int
        Tasks (instances) of the grid.
    tasks_skipped : int
        Tasks whose every row was already stored (resume).
    tasks_done : int
        Tasks run and written in this call.
    tasks_failed : int
        Tasks that failed after Ray's retries (their rows are not stored; a rerun retries them).
    rows_written : int
        Rows stored by this call.
    seconds : float
        Wall time of the call.
    out : str
        The sweep folder.
    failures : tuple of str
        One line per failed task: its instance id and the error.
    rows_with_errors : int
        Rows of the grid stored (by this call or before) with a non-null ``error`` column: a
        measure or the simulation failed on them (a rerun does not recompute them).
    """

    tasks_total: int
    tasks_skipped: int
    tasks_done: int
    tasks_failed: int
    rows_written: int
    seconds: float
    out: str = ""
    failures: tuple[str, ...] = field(default=())
    rows_with_errors: int = 0


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C (or a KeyboardInterrupt raised by ``on_task_done``) stopped a sweep between two writes.

    Parameters
    ----------
    result : SweepResult
        The counts when it stopped: ``rows_written`` rows are stored, in whole parts; a rerun of
        the same sweep resumes after them.
    """

    def __init__(self, result: SweepResult) -> None:
        super().__init__(f"interrupted; {result.rows_written} rows stored, rerun the same command to resume")
        self.result = result


def worker_pythonpath(grid: SweepGrid) -> str | None:
    """The ``PYTHONPATH`` the workers need to import the grid's user rules (None: no user rule).

    The folder each user rule was imported from (``module:attribute`` names and classes added
    with :func:`~spectr_gbv.reference.registry.register`; the root of a dotted module's
    top-level package), then the driver's current directory, then the driver's own
    ``PYTHONPATH``; duplicates dropped.

    Parameters
    ----------
    grid : SweepGrid
        A built grid (its rules were imported when it was checked).

    Returns
    -------
    str or None
        ``os.pathsep``-joined folders; None when every method of the grid is registered.
    """
    from spectr_gbv.core.methods import is_registered
    from spectr_gbv.reference.registry import get_verifier

    user = [m for m in grid.methods if ":" in m and not is_registered(m)]
    added = [type(get_verifier(m)) for m in grid.methods if ":" not in m and not is_registered(m)]
    if not user and not added:
        return None
    folders: list[str] = []
    for name in user + [f"{cls.__module__}:{cls.__qualname__}" for cls in added]:
        module = sys.modules.get(name.split(":")[0])
        path = getattr(module, "__file__", None)
        if path:
            root = Path(path).resolve().parent
            for _ in range(name.split(":")[0].count(".")):
                root = root.parent
            folders.append(str(root))
    folders.append(os.getcwd())
    folders += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(folders))


def import_backends() -> Any:
    """The ``ray`` module, after checking that pyarrow imports too (the ``sweep`` extra).

    Every sweep driver (:func:`run_sweep`, an application's) calls it before touching a folder.

    Returns
    -------
    module
        ``ray``.

    Raises
    ------
    ImportError
        ray or pyarrow is missing; the message starts with :data:`INSTALL_HINT`.
    """
    try:
        import pyarrow  # noqa: F401
        import ray
    except ImportError as exc:
        raise ImportError(f"{INSTALL_HINT} ({exc})") from exc
    return ray


def _task_body(task: Task) -> list[dict[str, Any]]:
    """What a Ray worker runs: the kill hook, then :func:`~spectr_gbv.sweep.tasks.run_task`."""
    marker = os.environ.get(KILL_ONCE_ENV)
    if marker:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.write(fd, f"{os.getpid()} {task.instance_id}\n".encode())
            os.close(fd)
            os._exit(1)  # the worker process dies mid-task: Ray must retry it
    from spectr_gbv.sweep.tasks import run_task

    return run_task(task)


_REMOTE: dict[int, Any] = {}


def _remote(ray: Any, max_retries: int) -> Any:
    """The Ray remote function of :func:`_task_body` with ``max_retries`` (built once per value)."""
    if max_retries not in _REMOTE:
        _REMOTE[max_retries] = ray.remote(max_retries=max_retries, num_cpus=1)(_task_body)
    return _REMOTE[max_retries]


def _cancel(ray: Any, refs: Any) -> None:
    """Cancel the tasks still in flight (best effort: Ray may have finished them)."""
    for ref in refs:
        try:
            ray.cancel(ref, force=False)
        except Exception:  # noqa: BLE001 - a finished or lost task cannot be cancelled; nothing to do
            pass


def start_ray(ray: Any, address: str | None, num_cpus: int | None) -> bool:
    """Initialise Ray unless it already is: ``address``, or a local Ray without dashboard.

    Returns True when this call started it (the caller then shuts it down). While it starts a
    local Ray, Ray's note that token authentication is on is dropped
    (the cluster is this run's alone and token authentication stays on; only the line that
    announces Ray's default is dropped); nothing is filtered for ``address``.

    Raises
    ------
    ValueError
        ``address`` is unreachable (:func:`check_address`) or Ray refuses to connect to it
        (e.g. ``auto`` without a running cluster); one line naming ``--address``.
    """
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address is None:
        options.update(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False)
    else:
        check_address(address)
    auth_logger, note_filter = logging.getLogger(RAY_AUTH_LOGGER), _LocalAuthNoteFilter()
    if address is None:  # our own local cluster only (_LocalAuthNoteFilter says why)
        auth_logger.addFilter(note_filter)
    try:
        ray.init(address=address, **options)
    except (ConnectionError, TimeoutError, RuntimeError) as exc:
        if address is None:
            raise
        raise ValueError(f"--address {address!r}: Ray cannot connect ({' '.join(str(exc).split())[:200]})") from exc
    finally:
        auth_logger.removeFilter(note_filter)
    return True


def drive(
    ray: Any,
    pending: list[Any],
    submit: Callable[[Any], Any],
    name: Callable[[Any], str],
    store: Any,
    result: SweepResult,
    *,
    label: str,
    window: int,
    show_progress: bool,
    on_task_done: Callable[[SweepResult], None] | None = None,
) -> SweepResult:
    """Run ``pending`` items as Ray tasks, at most ``window`` in flight; the driver writes their rows.

    Parameters
    ----------
    ray : module
    pending : list
        Items to run, in order (tasks of a grid, an application's configurations).
    submit : callable
        ``submit(item) -> ObjectRef`` of a task returning the item's rows (a list of dicts).
    name : callable
        ``name(item) -> str``: the item in a failure line.
    store : SweepStore
        Where each finished item's rows are written (only new keys are stored).
    result : SweepResult
        The counts so far (total, skipped); returned updated.
    label : str
        The progress bar's and failure lines' label (``"sweep"``, or the application's).
    window : int
        Largest number of tasks in flight.
    show_progress : bool
        A progress bar on stderr (terminals only) with done / failed and an ETA.
    on_task_done : callable, optional
        Called with the result so far after each written item; an exception it raises stops the
        run (rows written stay, tasks in flight are cancelled).

    Returns
    -------
    SweepResult
        With ``tasks_done``, ``tasks_failed``, ``rows_written`` and ``failures`` updated
        (``seconds`` is the caller's to set).

    Raises
    ------
    SweepInterrupted
        A KeyboardInterrupt (Ctrl-C, or from ``on_task_done``) stopped the run; it carries the
        result so far (the parts written are whole; tasks in flight are cancelled).
    SweepWriteError
        A part could not be written (disk full, read-only folder): one line with the rows
        stored by this run; the folder stays consistent and a rerun resumes.
    """
    from spectr_gbv.core.progress import progress
    from spectr_gbv.sweep.publish import SweepWriteError

    queue = list(reversed(pending))
    in_flight: dict[Any, Any] = {}
    failures: list[str] = list(result.failures)
    bar = progress(len(pending), label, quiet=None if show_progress else True, unit="task")
    try:
        while queue or in_flight:
            while queue and len(in_flight) < window:
                item = queue.pop()
                in_flight[submit(item)] = item
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                item = in_flight.pop(ref)
                try:
                    rows = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a task failed after its retries: report it, go on
                    line = " ".join(str(exc).split())[:300]
                    failures.append(f"{name(item)}: {type(exc).__name__}: {line}")
                    print(f"spectr-gbv {label}: task failed: {failures[-1]}", file=sys.stderr)
                    result = replace(result, tasks_failed=result.tasks_failed + 1, failures=tuple(failures))
                else:
                    try:
                        written = store.write(rows)
                    except SweepWriteError as exc:
                        err = SweepWriteError(
                            f"{exc} ({result.rows_written} rows stored by this run); make room or fix the folder, "
                            "then rerun the same command to resume"
                        )
                        err.errno = exc.errno
                        raise err from exc
                    result = replace(
                        result, tasks_done=result.tasks_done + 1, rows_written=result.rows_written + written
                    )
                bar.update(1)
                bar.set_postfix_str(f"done {result.tasks_done}, failed {result.tasks_failed}")
                if on_task_done is not None:
                    on_task_done(result)
    except KeyboardInterrupt as exc:
        if isinstance(exc, SweepInterrupted):
            raise
        raise SweepInterrupted(result) from exc
    finally:
        bar.close()
        if in_flight:
            _cancel(ray, in_flight)
    return result


def run_sweep(
    grid: SweepGrid,
    out: str | Path,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    show_progress: bool = True,
    on_task_done: Callable[[SweepResult], None] | None = None,
    max_retries: int = 3,
) -> SweepResult:
    """Run every task of ``grid`` not yet stored in ``out``, on Ray; rows go to the Parquet dataset.

    Parameters
    ----------
    grid : SweepGrid
        The declared grid.
    out : str or Path
        The sweep folder (:class:`~spectr_gbv.sweep.store.SweepStore`; created if missing).
        Rows already stored there are kept and their tasks skipped.
    address : str, optional
        An existing Ray cluster (``ray.init(address=...)``). Default: a local Ray with
        ``num_cpus`` CPUs and no dashboard. A Ray already initialised is reused as it is.
        The cluster's workers must be able to import this package.
    num_cpus : int, optional
        CPUs of the local Ray (default ``os.cpu_count()``); one task per CPU at a time.
    show_progress : bool
        A progress bar on stderr (:func:`~spectr_gbv.core.progress.progress`: terminals only)
        with the tasks done / failed and an ETA.
    on_task_done : callable, optional
        Called with the :class:`SweepResult` so far after each task's rows are written. An
        exception it raises (e.g. KeyboardInterrupt) stops the sweep: the rows written stay,
        the tasks in flight are cancelled, and a rerun resumes.
    max_retries : int
        Ray's retries of a task whose worker died (default 3).

    Returns
    -------
    SweepResult

    Raises
    ------
    ImportError
        ray or pyarrow is missing (one line: ``pip install 'spectr_gbv[sweep]'``).
    ValueError
        ``out`` is not a folder, the grid's instance ids collide, or ``address`` is unreachable
        (:func:`check_address`, before anything is written).
    FolderLockedError
        Another sweep is writing into ``out`` (:meth:`~spectr_gbv.sweep.store.SweepStore.locked`).
    PartError
        A stored part is damaged, foreign or corrupt (named): its keys are not skipped; move it
        out of the folder and rerun to recompute them.
    SweepWriteError
        ``out`` cannot be written (read-only, immutable, disk full); the parts stored stay whole.
    SweepInterrupted
        Ctrl-C (a KeyboardInterrupt) stopped the sweep; it carries the counts so far.
    """
    start = time.perf_counter()
    ray = import_backends()
    from spectr_gbv.sweep.store import SweepStore

    if address is not None and not ray.is_initialized():
        check_address(address)  # before the folder is touched
    store = SweepStore(out)
    with store.locked():
        store.record_grid(grid.to_dict())
        tasks = grid.tasks()
        stored = store.existing_keys()
        pending = [t for t in tasks if not t.keys() <= stored]
        result = SweepResult(len(tasks), len(tasks) - len(pending), 0, 0, 0, 0.0, str(out))
        if pending:
            started_ray = start_ray(ray, address, num_cpus)
            try:
                remote = _remote(ray, max_retries)
                env_vars: dict[str, str] = {}
                marker = os.environ.get(KILL_ONCE_ENV)
                if marker:
                    env_vars[KILL_ONCE_ENV] = marker
                pythonpath = worker_pythonpath(grid)
                if pythonpath:
                    env_vars["PYTHONPATH"] = pythonpath
                if env_vars:
                    remote = remote.options(runtime_env={"env_vars": env_vars})
                window = max(4, 2 * int(ray.available_resources().get("CPU", 1) or 1))
                result = drive(
                    ray,
                    pending,
                    remote.remote,
                    lambda task: task.instance_id,
                    store,
                    result,
                    label="sweep",
                    window=window,
                    show_progress=show_progress,
                    on_task_done=on_task_done,
                )
            finally:
                if started_ray:
                    ray.shutdown()
        wanted = set().union(*(t.keys() for t in tasks))
        errors = len(store.error_keys() & wanted)
    return replace(result, seconds=time.perf_counter() - start, rows_with_errors=errors)


__all__ = [
    "CONNECT_TIMEOUT",
    "INSTALL_HINT",
    "KILL_ONCE_ENV",
    "RAY_AUTH_LOGGER",
    "RAY_AUTH_NOTE",
    "SweepInterrupted",
    "SweepResult",
    "check_address",
    "drive",
    "import_backends",
    "run_sweep",
    "start_ray",
    "worker_pythonpath",
]
