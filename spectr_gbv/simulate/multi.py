r"""Exact multi-iteration block efficiency on tabular models (dynamic programming over histories).

One iteration of a verifier at history h emits ``o`` (accepted draft tokens plus one) with
an exact law; stateful verifiers also carry a target-law correction into the next iteration
(THEORY.md section 2). Over a generation horizon N this module computes exactly

* ``E[calls]``: expected target calls until at least N tokens exist,
  :math:`f(h, s) = 1 + \sum_{o, s'} P(o, s' | h, s)\, f(h o, s')`, ``f = 0`` once ``|h| >= N``;
  the horizon block efficiency reported is ``N / E[calls]`` (tokens per target call);
* ``E[tokens after m iterations]`` for m = 1..N (the criterion of Sun et al. 2024, who prove
  BV optimal over any fixed number of iterations among single-draft verifiers).

States are memoised on (the part of the history the tabular model can see, the carried
law, the tokens still missing), so the cost is the number of distinct reachable states times
one exact iteration. The models are read as Markov chains of order ``depth`` beyond their
tables (:meth:`TabularAR.cond` with ``extend=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from fractions import Fraction

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.numbers import Scalar, scalar_one

#: Largest horizon N accepted (the number of histories grows as n^N).
MAX_HORIZON = 16

StepLaw = dict[tuple[tuple[int, ...], Hashable], Scalar]
#: ``step(history, state) -> {(emitted tokens, next state): probability}``
StepFn = Callable[[tuple[int, ...], Hashable], StepLaw]


@dataclass
class MultiIterationResult:
    """Exact multi-iteration figures of one verifier on one instance.

    Attributes
    ----------
    method : str
    K, L, horizon : int
    expected_calls : Fraction or float
        E[target calls to produce >= N tokens].
    block_efficiency : Fraction or float
        ``horizon / expected_calls`` (tokens per target call over the horizon).
    expected_tokens : list
        ``expected_tokens[m-1] = E[tokens after m iterations]`` for m = 1..horizon (not capped at N).
    states : int
        Distinct (history view, carried law) states evaluated.
    """

    method: str
    K: int
    L: int
    horizon: int
    expected_calls: Scalar
    block_efficiency: Scalar
    expected_tokens: list[Scalar] = field(default_factory=list)
    states: int = 0


class _Memo:
    def __init__(self, instance: Instance, step: StepFn) -> None:
        self.step = step
        self.depth = max(instance.target.depth, instance.draft.depth)
        self.exact = instance.exact
        self.laws: dict[tuple[tuple[int, ...], Hashable], StepLaw] = {}
        self.calls: dict[tuple[tuple[int, ...], Hashable, int], Scalar] = {}
        self.tokens: dict[tuple[tuple[int, ...], Hashable, int], Scalar] = {}

    def view(self, h: tuple[int, ...]) -> tuple[int, ...]:
        # what the tabular models can see of the history
        return h if len(h) < self.depth else h[len(h) - self.depth :]

    def law(self, h: tuple[int, ...], s: Hashable) -> StepLaw:
        key = (self.view(h), s)
        if key not in self.laws:
            self.laws[key] = self.step(h, s)
        return self.laws[key]

    def expected_calls(self, h: tuple[int, ...], s: Hashable, missing: int) -> Scalar:
        if missing <= 0:
            return scalar_one(self.exact) * 0
        key = (self.view(h), s, missing)
        if key not in self.calls:
            total = scalar_one(self.exact)
            for (o, s2), prob in self.law(h, s).items():
                total += prob * self.expected_calls(h + o, s2, missing - len(o))
            self.calls[key] = total
        return self.calls[key]

    def expected_tokens(self, h: tuple[int, ...], s: Hashable, iters: int) -> Scalar:
        if iters <= 0:
            return scalar_one(self.exact) * 0
        key = (self.view(h), s, iters)
        if key not in self.tokens:
            total = scalar_one(self.exact) * 0
            for (o, s2), prob in self.law(h, s).items():
                total += prob * (len(o) + self.expected_tokens(h + o, s2, iters - 1))
            self.tokens[key] = total
        return self.tokens[key]


def multi_iteration(
    instance: Instance, step: StepFn, *, method: str, num_drafts: int, horizon: int
) -> MultiIterationResult:
    """Exact E[calls] for ``horizon`` tokens and E[tokens] after m = 1..horizon iterations.

    Parameters
    ----------
    instance : Instance
        Tabular target and draft (read as Markov chains beyond their depth).
    step : callable
        ``step(history, state) -> {(emitted, next_state): prob}``, the exact law of one
        iteration; stateless verifiers use ``state = None`` throughout.
    method : str
        Name reported in the result.
    num_drafts : int
        K, reported.
    horizon : int
        N, tokens to generate, from 1 to :data:`MAX_HORIZON`.

    Returns
    -------
    MultiIterationResult

    Raises
    ------
    ValueError
        ``horizon`` outside 1..MAX_HORIZON, or a step law that does not sum to 1 (exact) /
        within 1e-9 (float), naming the history.

    References
    ----------
    THEORY.md section 2 (block efficiency over a whole generation); Sun et al. 2024,
    arXiv 2403.10444 (optimality of BV over a fixed number of iterations).
    """
    if not isinstance(horizon, int) or not 1 <= horizon <= MAX_HORIZON:
        raise ValueError(f"horizon (N) must be an int in 1..{MAX_HORIZON}, got {horizon!r}")

    def checked(h: tuple[int, ...], s: Hashable) -> StepLaw:
        law = step(h, s)
        total = sum(law.values(), scalar_one(instance.exact) * 0)
        ok = total == 1 if instance.exact else abs(float(total) - 1.0) <= 1e-9
        if not ok:
            raise ValueError(f"step law at history {h} sums to {total}, not 1")
        return law

    memo = _Memo(instance, checked)
    calls = memo.expected_calls((), None, horizon)
    tokens = [memo.expected_tokens((), None, m) for m in range(1, horizon + 1)]
    be = Fraction(horizon) / calls if isinstance(calls, Fraction) else horizon / float(calls)
    return MultiIterationResult(
        method=method,
        K=num_drafts,
        L=instance.L,
        horizon=horizon,
        expected_calls=calls,
        block_efficiency=be,
        expected_tokens=tokens,
        states=len(memo.laws),
    )
