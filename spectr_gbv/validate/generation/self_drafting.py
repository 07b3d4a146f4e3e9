r"""The self-drafting kernel interface: a verification kernel that draws its drafts itself.

Serving engines draft and verify with one stream of noise: vLLM's model-runner-v2 draws the draft
token with Gumbel noise at a Philox (seed, position) and the acceptance uniform and the recovery
noise from the same stream. A bug there (the draft's noise reused by the recovery, vLLM PR #54282)
is invisible to a harness that supplies the drafts. Interface ``"self_drafting"``: the system is

``kernel(draft_logits, target_logits, *, num_draft_tokens, last_tokens, positions, seeds, temperature)``

``draft_logits(drafted)``
    ``drafted`` int64 [B, t] (the kernel's own drafts so far, t = 0 .. L-1, called in that order)
    -> float32 [B, V]: the draft model's raw (untempered) logits for the next token of each row.
``target_logits(drafted)``
    ``drafted`` int64 [B, L] -> float32 [B, L+1, V]: the target's untempered logits at the L+1
    positions (row i after the context and ``drafted[:, :i]``), ``-inf`` where top-k / top-p
    removed a token.

``num_draft_tokens`` (int L >= 1), ``last_tokens`` (int64 [B]: each row's last context token),
``positions`` (int64 [B]: each row's context length, the position of its first draft), ``seeds``
(int64 [B], per request, in [0, 2**31)), ``temperature`` (float > 0; the kernel applies it to
both rows, ``softmax(logits / temperature)``).

It returns int [B, L+1] (torch or numpy): each row's emitted tokens (its accepted drafts, then one
recovered or bonus token), then ``-1``. :class:`KernelJob` runs such a kernel as a generation loop
over the referee's reference models: all rows of a scenario (one per seed) in one kernel call per
round, each row's context growing by what it emitted, until every row has m tokens; the tokens are
then tested like a generation loop's (:mod:`~spectr_gbv.validate.generation.driver`). Temperature,
top-k and top-p follow transformers' warpers: the target rows carry the top-k / top-p mask of the
tempered scores and the kernel divides by the temperature, which reproduces the float32 scores of
:func:`~spectr_gbv.gpu.models.sequence_law.warped_scores` bit for bit.

Imports: numpy and the generation layer; torch and the models only inside the calls.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from spectr_gbv.validate.generation.interface import BadOutput
from spectr_gbv.validate.generation.runner import GenerationJob
from spectr_gbv.validate.isolation.failures import VerifierRaised, as_raised

#: The interface name.
SELF_DRAFTING = "self_drafting"
#: Keyword parameters of a self-drafting kernel.
KERNEL_KEYWORDS: tuple[str, ...] = ("num_draft_tokens", "last_tokens", "positions", "seeds", "temperature")
#: Largest supported draft length.
MAX_DRAFT_TOKENS = 8
#: Seeds passed to the kernel lie in [0, SEED_RANGE).
SEED_RANGE = 2**31


def check_kernel_signature(kernel: Any) -> None:
    """Check that ``kernel`` can be called as the self-drafting interface calls it.

    Raises
    ------
    ValueError
        ``kernel`` is not callable, or does not take two positional arguments and the keywords
        :data:`KERNEL_KEYWORDS`; the message names what is missing.
    """
    want = "kernel(draft_logits, target_logits, *, " + ", ".join(KERNEL_KEYWORDS) + ")"
    if not callable(kernel):
        raise ValueError(f"kernel: expected a callable {want}, got {type(kernel).__name__}")
    try:
        sig = inspect.signature(kernel)
    except (TypeError, ValueError):
        return  # builtins and C callables: the first call will tell
    kw = {"num_draft_tokens": 1, "last_tokens": 0, "positions": 0, "seeds": 0, "temperature": 1.0}
    try:
        sig.bind(None, None, **kw)
    except TypeError as exc:
        raise ValueError(f"kernel: cannot be called as {want}: {exc}") from None


def check_num_draft_tokens(num_draft_tokens: Any) -> int:
    """``num_draft_tokens`` as an int in [1, :data:`MAX_DRAFT_TOKENS`].

    Raises
    ------
    ValueError
        Anything else, naming the argument.
    """
    if (
        not isinstance(num_draft_tokens, int | np.integer)
        or isinstance(num_draft_tokens, bool)
        or not 1 <= num_draft_tokens <= MAX_DRAFT_TOKENS
    ):
        raise ValueError(f"num_draft_tokens: expected an int in [1, {MAX_DRAFT_TOKENS}], got {num_draft_tokens!r}")
    return int(num_draft_tokens)


def row_seed(seed: int) -> int:
    """The per-request seed the kernel gets for the harness seed ``seed``: in [0, :data:`SEED_RANGE`)."""
    return int(np.random.SeedSequence(int(seed)).generate_state(1, dtype=np.uint32)[0]) % SEED_RANGE


def read_kernel_output(out: Any, rows: int, L: int, vocab_size: int, drafted: np.ndarray) -> list[np.ndarray]:
    """Each row's emitted tokens, checked.

    Parameters
    ----------
    out : array-like, int, shape [rows, L+1]
        What the kernel returned (torch tensor or numpy array).
    rows, L, vocab_size : int
    drafted : numpy.ndarray, int64 [rows, L]
        The drafts the kernel passed to ``target_logits``.

    Returns
    -------
    list of numpy.ndarray, int64
        Row b's emitted tokens (1 to L+1 of them).

    Raises
    ------
    BadOutput
        Wrong shape or dtype, no token in a row, an id outside [0, V), a token after the ``-1``
        padding, or an emitted token before the last that is not the row's draft at that place
        (only accepted drafts precede the last token).
    """
    if hasattr(out, "detach"):
        out = out.detach().cpu().numpy()
    arr = np.asarray(out)
    if arr.shape != (rows, L + 1) or not np.issubdtype(arr.dtype, np.integer):
        raise BadOutput(f"expected int [{rows}, {L + 1}], got {arr.dtype} {list(arr.shape)}")
    arr = arr.astype(np.int64)
    got: list[np.ndarray] = []
    for b in range(rows):
        row = arr[b]
        pad = np.flatnonzero(row < 0)
        n = int(pad[0]) if pad.size else L + 1
        if n == 0:
            raise BadOutput(f"row {b}: no token emitted ({row.tolist()})")
        if pad.size and (row[n:] >= 0).any():
            raise BadOutput(f"row {b}: a token after the -1 padding ({row.tolist()})")
        if (row[:n] >= vocab_size).any():
            raise BadOutput(f"row {b}: token id outside [0, {vocab_size}) ({row.tolist()})")
        if n > 1 and not np.array_equal(row[: n - 1], drafted[b, : n - 1]):
            raise BadOutput(
                f"row {b}: emitted {row[:n].tolist()} but drafted {drafted[b].tolist()}: the tokens before the last "
                "must be the accepted drafts"
            )
        got.append(row[:n])
    return got


class _Models:
    """The logits callbacks of one round: the referee's reference models on each row's context."""

    def __init__(self, target: Any, draft: Any, settings: Any, contexts: list[list[int]], L: int) -> None:
        self.target, self.draft, self.settings = target, draft, settings
        self.contexts = contexts
        self.L = L
        self.calls = 0
        self.drafted: np.ndarray | None = None
        self.cache: dict[tuple[str, tuple[int, ...]], Any] = {}

    def _logits(self, which: str, context: list[int]) -> Any:
        key = (which, tuple(context))
        if key not in self.cache:
            import torch  # noqa: PLC0415

            from spectr_gbv.gpu.models.sequence_law import warped_scores  # noqa: PLC0415

            model = self.target if which == "target" else self.draft
            raw = model.next_logits(context).detach().to(torch.float32).reshape(-1)
            if which == "target":  # transformers' kept set of the tempered scores, raw logits inside it
                raw = raw.masked_fill(~torch.isfinite(warped_scores(raw, self.settings)), float("-inf"))
            self.cache[key] = raw
        return self.cache[key]

    def _drafted(self, drafted: Any, width: int, who: str) -> np.ndarray:
        if hasattr(drafted, "detach"):
            drafted = drafted.detach().cpu().numpy()
        arr = np.asarray(drafted)
        if arr.shape != (len(self.contexts), width) or not np.issubdtype(arr.dtype, np.integer):
            raise BadOutput(
                f"{who}: expected int64 [{len(self.contexts)}, {width}] drafts, got {arr.dtype} {list(arr.shape)}"
            )
        return arr.astype(np.int64)

    def draft_logits(self, drafted: Any) -> Any:
        import torch  # noqa: PLC0415

        arr = self._drafted(drafted, self.calls, f"draft_logits call {self.calls}")
        if self.calls >= self.L:
            raise BadOutput(f"draft_logits called {self.calls + 1} times for {self.L} drafts")
        self.calls += 1
        return torch.stack([self._logits("draft", c + list(d)) for c, d in zip(self.contexts, arr, strict=True)])

    def target_logits(self, drafted: Any) -> Any:
        import torch  # noqa: PLC0415

        if self.calls != self.L:
            raise BadOutput(f"target_logits called after {self.calls} draft_logits calls; expected {self.L}")
        arr = self._drafted(drafted, self.L, "target_logits")
        self.drafted = arr
        rows = [
            torch.stack([self._logits("target", c + list(d[:i])) for i in range(self.L + 1)])
            for c, d in zip(self.contexts, arr, strict=True)
        ]
        return torch.stack(rows)


class KernelJob(GenerationJob):
    """A self-drafting kernel run as a generation loop: what the generation runner's workers hold.

    :meth:`run` has the contract of the generation runner's per-prompt calls: all ``seeds`` of
    a chunk are rows of one kernel call per round (row b's request seed :func:`row_seed` of
    ``seeds[b]``), so a chunk is one guarded call of the runner.

    Parameters
    ----------
    kernel : callable
        The system (:func:`check_kernel_signature` already applied).
    models : dict
        As the generation runner builds it (per pair: target, draft, alt_draft, vocab_size).
    guard : CallGuard
    num_draft_tokens : int
        L, drafts per round.
    """

    def __init__(
        self, kernel: Callable[..., Any], models: dict[str, Any], guard: Any, num_draft_tokens: int = 2
    ) -> None:
        super().__init__(kernel, models, guard)
        self.L = check_num_draft_tokens(num_draft_tokens)
        self.rounds = 0

    def run(
        self, pair: str, which: str, prompt: tuple[int, ...], new: int, kw: dict[str, Any], seeds: list[int]
    ) -> tuple[np.ndarray, str | None, float]:
        """All ``seeds`` as rows: ``int64 [len(seeds), new]``, None (or the rows so far and a bad output), seconds."""
        import torch  # noqa: PLC0415

        from spectr_gbv.gpu.models.sequence_law import SamplingSettings  # noqa: PLC0415

        models = self.models[pair]
        V = int(models["vocab_size"])
        settings = SamplingSettings(kw["temperature"], kw["top_k"], kw["top_p"])
        contexts = [list(prompt) for _ in seeds]
        made = [0] * len(seeds)
        row_seeds = torch.tensor([row_seed(s) for s in seeds], dtype=torch.int64)
        while True:
            live = [b for b in range(len(seeds)) if made[b] < new]
            if not live:
                break
            self.guard.tick()
            cb = _Models(models["target"], models[which], settings, [contexts[b] for b in live], self.L)
            t0 = time.perf_counter()
            try:
                out = self.generate(
                    cb.draft_logits,
                    cb.target_logits,
                    num_draft_tokens=self.L,
                    last_tokens=torch.tensor([contexts[b][-1] for b in live], dtype=torch.int64),
                    positions=torch.tensor([len(contexts[b]) for b in live], dtype=torch.int64),
                    seeds=row_seeds[live],
                    temperature=float(settings.temperature),
                )
            except BadOutput as exc:
                self.seconds += time.perf_counter() - t0
                return self._done(np.empty((0, new), dtype=np.int64), f"seeds {seeds[0]}..{seeds[-1]}: {exc}")
            except Exception as exc:  # noqa: BLE001 - reported as the failure category "raises"
                self.seconds += time.perf_counter() - t0
                err = as_raised(exc, None)
                raise VerifierRaised(f"{err} (seeds {seeds[0]}..{seeds[-1]})", exc) from None
            self.seconds += time.perf_counter() - t0
            self.rounds += 1
            try:
                if cb.drafted is None:
                    raise BadOutput("the kernel returned without calling target_logits")
                emitted = read_kernel_output(out, len(live), self.L, V, cb.drafted)
            except BadOutput as exc:
                return self._done(np.empty((0, new), dtype=np.int64), f"seeds {seeds[0]}..{seeds[-1]}: {exc}")
            for b, toks in zip(live, emitted, strict=True):
                contexts[b].extend(int(t) for t in toks)
                made[b] += len(toks)
        start = len(prompt)
        return self._done(np.array([c[start : start + new] for c in contexts], dtype=np.int64), None)


__all__ = [
    "KERNEL_KEYWORDS",
    "MAX_DRAFT_TOKENS",
    "SEED_RANGE",
    "SELF_DRAFTING",
    "KernelJob",
    "check_kernel_signature",
    "check_num_draft_tokens",
    "read_kernel_output",
    "row_seed",
]
