"""Seeded generate calls of the system under test, isolated, timed and read back as token arrays.

:class:`GenerationRunner` makes the N calls of a scenario (seed ``base + i``, distinct over
the whole run) through a :class:`~spectr_gbv.validate.isolation.guard.CallGuard`: under process
isolation the calls run in forked workers that inherit the reference models built by the
parent (torch runs one thread there), in chunks spread over the workers, each call timed
against the per-call limit. A system that raises, hangs, exits or returns something other
than ``max_new_tokens`` ids in [0, V) ends the run with :class:`RunStopped`, which carries
the failed check (category ``"robustness"``, diagnosis ``raises``, ``timeout``, ``exits`` or
``bad_output``) naming the scenario and the seed.

Imports: numpy, :mod:`spectr_gbv.validate.isolation`, :mod:`spectr_gbv.validate.generation.interface`
and :mod:`spectr_gbv.validate.generation.plan`; torch is never imported here (the models are).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from spectr_gbv.validate.generation.interface import BadOutput, read_batch, read_output
from spectr_gbv.validate.generation.plan import Scenario
from spectr_gbv.validate.isolation.failures import VerifierFailure, VerifierRaised, as_raised
from spectr_gbv.validate.isolation.guard import CallGuard
from spectr_gbv.validate.report.results import CheckResult

#: Most generate calls in one request to a worker (smaller chunks: finer progress and time checks).
MAX_CHUNK = 64
#: Seeds of one run are ``seed * SEED_STRIDE + i``: distinct for runs of distinct harness seeds.
SEED_STRIDE = 1_000_000


class RunStopped(Exception):
    """The system raised, hung, exited or returned a bad output: ``check`` is the failed check."""

    def __init__(self, check: CheckResult) -> None:
        super().__init__(check.detail)
        self.check = check


class GenerationJob:
    """What a worker holds: the generate callable, the models by pair, the guard (for its clock).

    :meth:`run` (one prompt) and :meth:`run_batch` (B prompts per call) make one generate call per
    seed and return ``(tokens int64 [n, new] or [n, B, new], bad-output message or None, seconds
    inside the calls)``; subclasses (a self-drafting kernel's
    :class:`~spectr_gbv.validate.generation.self_drafting.KernelJob`) keep that contract.

    Parameters
    ----------
    generate : callable
        The system under test.
    models : dict
        Per pair: ``target``, ``draft``, ``alt_draft`` (the reference models) and ``vocab_size``.
    guard : CallGuard
        Whose per-call clock :meth:`run` ticks.
    """

    def __init__(self, generate: Callable[..., Any], models: dict[str, dict[str, Any]], guard: CallGuard) -> None:
        self.generate = generate
        self.models = models
        self.guard = guard
        self.seconds = 0.0  # wall time inside the system's calls since the last chunk (in the worker)

    def _call(self, pair: str, which: str, prompt: Any, new: int, kw: dict[str, Any], seed: int) -> Any:
        self.guard.tick()
        models = self.models[pair]
        t0 = time.perf_counter()
        try:
            return self.generate(models["target"], models[which], prompt, new, **kw, seed=seed)
        except Exception as exc:  # noqa: BLE001 - reported as the failure category "raises"
            err = as_raised(exc, None)
            raise VerifierRaised(f"{err} (seed {seed})", exc) from None
        finally:
            self.seconds += time.perf_counter() - t0

    def _done(self, out: np.ndarray, bad: str | None) -> tuple[np.ndarray, str | None, float]:
        seconds, self.seconds = self.seconds, 0.0
        return out, bad, seconds

    def run(
        self, pair: str, which: str, prompt: tuple[int, ...], new: int, kw: dict[str, Any], seeds: list[int]
    ) -> tuple[np.ndarray, str | None, float]:
        """Calls on one prompt: ``int64 [len(seeds), new]``, None (or the ids so far and a bad output), seconds."""
        V = int(self.models[pair]["vocab_size"])
        out = np.empty((len(seeds), new), dtype=np.int64)
        for i, seed in enumerate(seeds):
            got = self._call(pair, which, list(prompt), new, kw, seed)
            try:
                out[i] = read_output(got, new, V)
            except BadOutput as exc:
                return self._done(out[:i], f"seed {seed}: {exc}")
        return self._done(out, None)

    def run_batch(
        self, pair: str, which: str, prompts: list[tuple[int, ...]], new: int, kw: dict[str, Any], seeds: list[int]
    ) -> tuple[np.ndarray, str | None, float]:
        """Batched calls: ``int64 [len(seeds), B, new]``, None (or the ids so far and a bad-output message), seconds."""
        V = int(self.models[pair]["vocab_size"])
        out = np.empty((len(seeds), len(prompts), new), dtype=np.int64)
        for i, seed in enumerate(seeds):
            got = self._call(pair, which, [list(p) for p in prompts], new, kw, seed)
            try:
                out[i] = read_batch(got, len(prompts), new, V)
            except BadOutput as exc:
                return self._done(out[:i], f"seed {seed}: {exc}")
        return self._done(out, None)


class GenerationRunner:
    """Seeded, isolated generate calls of one run.

    Parameters
    ----------
    generate : callable
        The system under test (signature already checked).
    pairs : dict of str to ReferencePair
        The run's reference pairs (their models are inherited by the forked workers).
    guard : CallGuard
        Isolation and per-call time limit.
    batched : bool
        True for the ``generation_batched`` interface (prompts passed as a list of B prompts).
    seed : int
        Harness seed; call i of the run gets seed ``seed * SEED_STRIDE + i``.
    progress : callable, optional
        ``progress(n)`` after every n calls (the progress bar).
    job : callable, optional
        ``job(generate, models, guard)`` builds what the workers run (default: one generate call
        per seed); a self-drafting kernel's
        :class:`~spectr_gbv.validate.generation.self_drafting.KernelJob` runs a chunk's seeds as
        the rows of one kernel call per round.
    chunk : int
        Most seeds per guarded worker call (default :data:`MAX_CHUNK`).

    Attributes
    ----------
    calls : int
        Generate calls made so far (a batch call counts once).
    seconds_in_calls : float
        Wall time spent inside the system's generate calls, summed over the workers (the
        referee's overhead is the rest of the run's time).
    """

    def __init__(
        self,
        generate: Callable[..., Any],
        pairs: dict[str, Any],
        guard: CallGuard,
        batched: bool,
        seed: int,
        progress: Callable[[int], None] | None = None,
        job: Callable[..., GenerationJob] | None = None,
        chunk: int = MAX_CHUNK,
    ) -> None:
        models = {
            name: {
                "target": pair.target,
                "draft": pair.draft,
                "alt_draft": pair.alt_draft,
                "vocab_size": int(pair.vocab_size),
            }
            for name, pair in pairs.items()
        }
        self.job = (job or GenerationJob)(generate, models, guard)
        self.chunk = int(chunk)
        self.guard = guard
        self.batched = batched
        self.next_seed = int(seed) * SEED_STRIDE
        self.progress = progress
        self.calls = 0
        self.seconds_in_calls = 0.0

    def _seeds(self, num: int) -> list[int]:
        seeds = list(range(self.next_seed, self.next_seed + num))
        self.next_seed += num
        return seeds

    def _failed(self, what: str, sc: Scenario, err: VerifierFailure) -> RunStopped:
        diag = getattr(err, "diagnosis", "raises")
        verb = {"raises": "raised", "timeout": "hung", "exits": "ended its process"}.get(diag, "failed")
        check = CheckResult(
            "runs",
            "robustness",
            False,
            sample_size=self.calls,
            instance=sc.spec(),
            detail=f"the system {verb} during {what} on {sc.label}: {err}",
            diagnosis=diag,
        )
        return RunStopped(check)

    def collect(
        self,
        sc: Scenario,
        num: int,
        new_tokens: int,
        *,
        which: str = "draft",
        neighbours: Sequence[tuple[int, ...]] = (),
        what: str = "sequence_law",
        seeds: list[int] | None = None,
    ) -> np.ndarray:
        """``num`` calls on ``sc``: the first ``sc.m`` generated tokens of each, ``int64 [num, m]``.

        Parameters
        ----------
        sc : Scenario
        num : int
            Calls to make (>= 0).
        new_tokens : int
            ``max_new_tokens`` of each call (>= ``sc.m``).
        which : str
            ``"draft"`` or ``"alt_draft"``: the pair's draft model to pass.
        neighbours : sequence of tuple of int
            Batched interface: prompts of rows 1.. (row 0 is ``sc.prompt``; none: a batch of one).
        what : str
            The check the calls are for (named in a failure).
        seeds : list of int, optional
            The seeds to use (default: the next ``num`` of the run).

        Returns
        -------
        numpy.ndarray, shape [num, m], int64
            Row 0's tokens for a batched call.

        Raises
        ------
        RunStopped
            The system raised, hung, exited or returned a bad output (the run must stop).
        """
        seeds = self._seeds(num) if seeds is None else list(seeds)
        return self._outputs(sc, which, neighbours, new_tokens, seeds, what)[:, : sc.m]

    def full_outputs(self, sc: Scenario, new_tokens: int, seeds: list[int]) -> list[np.ndarray]:
        """The whole outputs (``max_new_tokens`` ids) of one call per seed, in order (row 0 when batched).

        Raises
        ------
        RunStopped
            As :meth:`collect`.
        """
        return [self._outputs(sc, "draft", (), new_tokens, [s], "the first calls")[0] for s in seeds]

    def _outputs(
        self,
        sc: Scenario,
        which: str,
        neighbours: Sequence[tuple[int, ...]],
        new_tokens: int,
        seeds: list[int],
        what: str,
    ) -> np.ndarray:
        """Calls with ``seeds`` in chunks over the workers: the outputs, ``int64 [len(seeds), new_tokens]``."""
        chunk = max(1, min(self.chunk, math.ceil(len(seeds) / (4 * self.guard.workers))))
        method = "run_batch" if self.batched else "run"
        prompt: Any = [sc.prompt, *neighbours] if self.batched else sc.prompt
        kw = sc.settings_kwargs()
        args = [(sc.pair, which, prompt, new_tokens, kw, seeds[i : i + chunk]) for i in range(0, len(seeds), chunk)]
        parts: list[np.ndarray] = [np.empty((0, new_tokens), dtype=np.int64)]
        for r in range(0, len(args), self.guard.workers):
            batch = args[r : r + self.guard.workers]
            try:
                got = self.guard.call_many(self.job, method, batch, needs_torch=True)
            except VerifierFailure as err:
                raise self._failed(what, sc, err) from None
            for (arr, bad, seconds), a in zip(got, batch, strict=True):
                self.calls += len(arr) + (bad is not None)
                self.seconds_in_calls += seconds
                if bad is not None:
                    detail = f"the system returned a bad output during {what} on {sc.label}: {bad}"
                    check = CheckResult(
                        "runs",
                        "robustness",
                        False,
                        sample_size=self.calls,
                        instance=sc.spec(),
                        detail=detail,
                        diagnosis="bad_output",
                    )
                    raise RunStopped(check)
                parts.append(arr[:, 0] if self.batched else arr)
                if self.progress is not None:
                    self.progress(len(a[-1]))
        return np.concatenate(parts)


__all__ = ["MAX_CHUNK", "SEED_STRIDE", "GenerationJob", "GenerationRunner", "RunStopped"]
