r"""The plan of a generation-referee run: scenarios, exact laws, sample sizes and the test family.

A *scenario* is one (reference pair, prompt, sampling settings, m): the system is called N
times on it with distinct seeds, and the first m generated tokens are tested against the
target's exact sequence law after temperature, top-k and top-p
(:func:`spectr_gbv.gpu.models.sequence_law.sequence_law`, an enumeration, never an estimate).
The budgets (:data:`SCENARIOS`) cover the reference pairs close, far, identical (p = q),
draft_zeros (q = 0 where p > 0), target_zeros (p = 0 where q > 0), peaked and wide (V > 256),
temperatures other than 1, top-k and top-p, and a context-dependent law of the first three
tokens.

Sample sizes: each law test is a G-test with cells of expected count below 5 pooled; N is
:func:`~spectr_gbv.simulate.monte_carlo.iterations_for_power` for power
:data:`~spectr_gbv.validate.checks.statistical.POWER_TARGET` against a total-variation error
``tv`` (:data:`TV_BY_BUDGET`) at the last look's level of the test, the degrees of freedom
those of the pooled test (iterated until stable, as
:func:`~spectr_gbv.validate.checks.statistical.sample_size` does). The run's law tests form one
Bonferroni family at :data:`~spectr_gbv.validate.checks.statistical.ALPHA`.

Imports: numpy, the simulate and validate.checks.statistical layers; torch and the reference
models only inside :func:`build_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spectr_gbv.simulate.monte_carlo import iterations_for_power
from spectr_gbv.validate.checks.statistical import ALPHA, POWER_TARGET, final_alpha

#: Total-variation error of the joint law of the first m tokens each law test is planned to
#: detect with power :data:`POWER_TARGET`, per budget.
TV_BY_BUDGET: dict[str, float] = {"quick": 0.2, "standard": 0.1, "thorough": 0.05}
#: Scenarios per budget: (pair, prompt index, temperature, top_k, top_p, m).
SCENARIOS: dict[str, tuple[tuple[str, int, float, int, float, int], ...]] = {
    "quick": (
        ("close", 1, 0.5, 0, 1.0, 2),
        ("far", 1, 0.7, 3, 1.0, 2),
    ),
    "standard": (
        ("close", 1, 0.5, 0, 1.0, 2),
        ("far", 1, 0.7, 0, 1.0, 2),
        ("identical", 0, 0.7, 3, 1.0, 2),
        ("draft_zeros", 1, 0.7, 0, 1.0, 2),
        ("target_zeros", 1, 1.3, 0, 1.0, 2),
        ("peaked", 1, 1.0, 0, 0.9, 2),
        ("wide", 0, 0.6, 0, 0.9, 2),
        ("close", 0, 1.0, 0, 1.0, 3),
    ),
    "thorough": (
        ("close", 1, 0.5, 0, 1.0, 3),
        ("far", 1, 0.7, 0, 1.0, 3),
        ("identical", 0, 0.7, 3, 1.0, 3),
        ("draft_zeros", 1, 0.7, 0, 1.0, 3),
        ("target_zeros", 1, 1.3, 0, 1.0, 3),
        ("peaked", 1, 1.0, 0, 0.9, 3),
        ("wide", 0, 0.6, 0, 0.9, 3),
        ("close", 0, 1.0, 0, 1.0, 3),
        ("far", 0, 1.5, 5, 0.8, 3),
    ),
}

#: Pairs whose draft invariance (``draft`` vs ``alt_draft``) is tested, per budget, each on its
#: first scenario: temperatures other than 1 and top-k / top-p, where a q taken from other
#: logits than the drafts' (untempered, unfiltered, bfloat16) shows.
INVARIANCE_PAIRS: dict[str, tuple[str, ...]] = {
    "quick": ("far",),
    "standard": ("close", "wide"),
    "thorough": ("close", "far", "draft_zeros", "peaked", "wide"),
}
#: Rows of a batch in the batch-invariance check of the batched interface (the tested prompt
#: is row 0; the others are the pair's other prompts, of other lengths).
BATCH_ROWS = 3


@dataclass(frozen=True)
class Scenario:
    """One tested case: a reference pair, a prompt, sampling settings and the tested length m.

    Attributes
    ----------
    pair : str
        Name in :data:`spectr_gbv.gpu.models.reference_pairs.REFERENCE_PAIRS`.
    prompt_index : int
        Index into the pair's ``prompts``.
    prompt : tuple of int
        The prompt's token ids.
    temperature, top_k, top_p : float, int, float
        Sampling settings (transformers' warpers, in that order; 0 / 1.0 switch a filter off).
    m : int
        Generated tokens whose joint law is tested (>= 1).
    """

    pair: str
    prompt_index: int
    prompt: tuple[int, ...]
    temperature: float
    top_k: int
    top_p: float
    m: int

    @property
    def label(self) -> str:
        """``"close,p0,T=1,m=2"`` (``top_k=``/``top_p=`` added when on): the name in check names."""
        parts = [self.pair, f"p{self.prompt_index}", f"T={self.temperature:g}"]
        if self.top_k:
            parts.append(f"top_k={self.top_k}")
        if self.top_p < 1.0:
            parts.append(f"top_p={self.top_p:g}")
        parts.append(f"m={self.m}")
        return ",".join(parts)

    def settings_kwargs(self) -> dict[str, Any]:
        """The keywords of a generate call for these settings (``seed`` excluded)."""
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p}

    def spec(self) -> dict[str, Any]:
        """JSON spec of the scenario (kind ``"generation"``): what rebuilds the case."""
        return {
            "kind": "generation",
            "name": self.label,
            "pair": self.pair,
            "prompt_ids": list(self.prompt),
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "m": self.m,
        }


@dataclass
class Planned:
    """A scenario with its exact law and planned sample size.

    Attributes
    ----------
    scenario : Scenario
    law : dict of tuple of int to float
        Exact joint law of the first m tokens (nonzero entries, sums to 1).
    num : int
        Planned calls N.
    df : int
        Degrees of freedom of the pooled G-test at N.
    """

    scenario: Scenario
    law: dict[tuple[int, ...], float]
    num: int
    df: int


@dataclass
class GenerationPlan:
    """Everything a run will do: scenarios, invariance cases, the test family and its levels.

    Attributes
    ----------
    budget : str
    tv : float
        TV error every law test is planned against.
    scenarios : list of Planned
        The ``sequence_law`` / ``positional_law`` scenarios.
    invariance : list of Planned
        One scenario per pair of the ``draft_invariance`` check (run again with ``alt_draft``).
    batch : list of Planned
        Scenarios of the ``batch_invariance`` check (batched interface only).
    pairs : dict of str to ReferencePair
        The reference pairs used, by name.
    max_new_tokens : int or None
        ``max_new_tokens`` passed to the system (None: each scenario's m).
    family_size : int
        Law tests in the Bonferroni family.
    """

    budget: str
    tv: float
    scenarios: list[Planned]
    invariance: list[Planned]
    batch: list[Planned]
    pairs: dict[str, Any]
    max_new_tokens: int | None
    family_size: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def alpha_test(self) -> float:
        """Level of one law test: ``ALPHA / family_size`` (Bonferroni)."""
        return ALPHA / max(self.family_size, 1)

    def new_tokens(self, sc: Scenario) -> int:
        """``max_new_tokens`` of a call on ``sc``."""
        return self.max_new_tokens if self.max_new_tokens is not None else sc.m

    @property
    def total_calls(self) -> int:
        """Planned generate calls (a batch call counts once), the determinism note's 6 included."""
        return 6 + sum(p.num for p in (*self.scenarios, *self.invariance, *self.batch))


def pooled_df(probs: np.ndarray, num: int) -> int:
    """Degrees of freedom of the pooled G-test of ``num`` samples of a law with cell probabilities ``probs``."""
    small = probs * num < 5
    return max(int((~small).sum()) + int(small.any()) - 1, 1)


def sample_size(law: dict[tuple[int, ...], float], alpha_test: float, tv: float) -> tuple[int, int]:
    """Calls N for power :data:`POWER_TARGET` against ``tv`` at the last look of a test at ``alpha_test``.

    Parameters
    ----------
    law : dict of tuple of int to float
        Exact joint law (nonzero entries).
    alpha_test : float
        The test's Bonferroni level (its last look runs at
        :func:`~spectr_gbv.validate.checks.statistical.final_alpha` of it).
    tv : float
        TV error in (0, 1].

    Returns
    -------
    (int, int)
        N and the pooled test's degrees of freedom at N.
    """
    probs = np.fromiter(law.values(), dtype=np.float64)
    alpha = final_alpha(alpha_test)
    df = max(len(probs) - 1, 1)
    num = iterations_for_power(df, alpha, tv, POWER_TARGET)
    for _ in range(8):
        pooled = pooled_df(probs, num)
        if pooled == df:
            break
        df = pooled
        num = iterations_for_power(df, alpha, tv, POWER_TARGET)
    return num, df


def _check_args(budget: str, pairs: Any, m: Any, max_new_tokens: Any) -> tuple[str, ...] | None:
    if budget not in TV_BY_BUDGET:
        raise ValueError(f"budget: expected one of {', '.join(TV_BY_BUDGET)}, got {budget!r}")
    if m is not None and (not isinstance(m, int | np.integer) or isinstance(m, bool) or m < 1):
        raise ValueError(f"m: expected an int >= 1, got {m!r}")
    if max_new_tokens is not None:
        if not isinstance(max_new_tokens, int | np.integer) or isinstance(max_new_tokens, bool):
            raise ValueError(f"max_new_tokens: expected an int >= 1, got {max_new_tokens!r}")
        largest = m if m is not None else max(s[-1] for s in SCENARIOS[budget])
        if max_new_tokens < largest:
            raise ValueError(
                f"max_new_tokens: {max_new_tokens} is less than m = {largest}, the tokens whose law is tested"
            )
    if pairs is None:
        return None
    names = (pairs,) if isinstance(pairs, str) or hasattr(pairs, "target") else tuple(pairs)
    if not names or not all(isinstance(n, str) or hasattr(n, "target") for n in names):
        raise ValueError(f"pairs: expected reference pair names or ReferencePair objects, got {pairs!r}")
    return names


def check_custom_pair(pair: Any) -> None:
    """Refuse a user's pair the referee cannot judge exactly.

    Parameters
    ----------
    pair : ReferencePair-like
        ``name``, ``target``, ``draft``, ``alt_draft``, ``prompts``, ``vocab_size``, ``support``.

    Raises
    ------
    ValueError
        (``pairs: ...``) a missing attribute, a model whose exact law is unknown (no
        ``next_logits(context)``), models with different vocabularies, no prompt, a prompt id
        outside the vocabulary.
    """
    name = getattr(pair, "name", None)
    missing = [a for a in ("name", "target", "draft", "alt_draft", "prompts") if not hasattr(pair, a)]
    if missing or not isinstance(name, str):
        raise ValueError(f"pairs: a custom pair needs the attributes of ReferencePair; missing {', '.join(missing)}")
    if not callable(getattr(pair.target, "next_logits", None)):
        raise ValueError(
            f"pairs: pair {name!r}: the target has no next_logits(context), so its exact law is unknown "
            "(build it as a spectr_gbv.gpu.models.reference_lm.ReferenceLM)"
        )
    sizes = {w: int(getattr(getattr(pair, w).config, "vocab_size", -1)) for w in ("target", "draft", "alt_draft")}
    if len(set(sizes.values())) != 1:
        raise ValueError(
            f"pairs: pair {name!r}: models with different vocabularies (target V = {sizes['target']}, draft "
            f"{sizes['draft']}, alt_draft {sizes['alt_draft']}); speculative decoding needs one vocabulary"
        )
    V = sizes["target"]
    if not pair.prompts or any(not p or min(p) < 0 or max(p) >= V for p in pair.prompts):
        raise ValueError(f"pairs: pair {name!r}: expected non-empty prompts of ids in [0, {V})")


def build_plan(
    budget: str,
    *,
    interface: str = "generation",
    pairs: Any = None,
    m: int | None = None,
    max_new_tokens: int | None = None,
    seed: int = 0,
) -> GenerationPlan:
    """The scenarios, exact laws and sample sizes of a run.

    Parameters
    ----------
    budget : str
        ``"quick"``, ``"standard"`` or ``"thorough"`` (:data:`SCENARIOS`, :data:`TV_BY_BUDGET`).
    interface : str
        ``"generation"`` or ``"generation_batched"`` (adds the batch-invariance scenarios).
    pairs : sequence of str or ReferencePair, optional
        Keep only the budget's scenarios on these pairs (a pair with none gets one at T = 1, m = 2,
        its first prompt). A ``ReferencePair``-like object is a custom pair (checked by
        :func:`check_custom_pair`; its target needs ``next_logits``).
    m : int, optional
        Test the first ``m`` tokens in every scenario instead of the budget's m.
    max_new_tokens : int, optional
        ``max_new_tokens`` passed to the system (default: each scenario's m); must be >= m.
    seed : int
        Seed of the reference models' tables (``reference_pair(name, seed=seed)``).

    Returns
    -------
    GenerationPlan

    Raises
    ------
    ValueError
        Unknown budget or pair name, a custom pair :func:`check_custom_pair` refuses (models
        with different vocabularies), ``m`` < 1 or too large to enumerate (from
        :func:`~spectr_gbv.gpu.models.sequence_law.sequence_law`), ``max_new_tokens < m``.
    """
    names = _check_args(budget, pairs, m, max_new_tokens)
    from spectr_gbv.gpu.models.reference_pairs import REFERENCE_PAIRS, reference_pair  # noqa: PLC0415
    from spectr_gbv.gpu.models.sequence_law import SamplingSettings, sequence_law  # noqa: PLC0415

    built: dict[str, Any] = {}
    if names is not None:
        for n in names:
            if not isinstance(n, str):
                check_custom_pair(n)
                if n.name in built or n.name in REFERENCE_PAIRS:
                    raise ValueError(f"pairs: a custom pair's name {n.name!r} is taken; give it another")
                built[n.name] = n
        unknown = [n for n in names if isinstance(n, str) and n not in REFERENCE_PAIRS]
        if unknown:
            raise ValueError(f"pairs: unknown reference pair {unknown[0]!r}; known: {', '.join(REFERENCE_PAIRS)}")
        names = tuple(n if isinstance(n, str) else n.name for n in names)
    rows = [r for r in SCENARIOS[budget] if names is None or r[0] in names]
    if names is not None:
        rows += [(n, 0, 1.0, 0, 1.0, 2) for n in names if all(r[0] != n for r in rows)]
    for row in rows:
        if row[0] not in built:
            built[row[0]] = reference_pair(row[0], seed=seed)
    scenarios: list[Scenario] = []
    for pair, idx, temp, top_k, top_p, m_row in rows:
        prompts = built[pair].prompts
        scenarios.append(
            Scenario(
                pair,
                idx % len(prompts),
                tuple(prompts[idx % len(prompts)]),
                temp,
                top_k,
                top_p,
                int(m if m is not None else m_row),
            )
        )
    laws: dict[Scenario, dict[tuple[int, ...], float]] = {}
    for sc in scenarios:
        settings = SamplingSettings(sc.temperature, sc.top_k, sc.top_p)
        laws[sc] = sequence_law(built[sc.pair].target, list(sc.prompt), sc.m, settings)
    inv_pairs = INVARIANCE_PAIRS[budget] if names is None else names[:2]
    inv = [next(sc for sc in scenarios if sc.pair == p) for p in inv_pairs if any(sc.pair == p for sc in scenarios)]
    batch = scenarios[:2] if interface == "generation_batched" else []
    # family: sequence + positional per scenario, two per invariance pair and per batch scenario
    family = 2 * len(scenarios) + 2 * len(inv) + 2 * len(batch)
    tv = TV_BY_BUDGET[budget]
    alpha = ALPHA / family

    def planned(sc: Scenario) -> Planned:
        num, df = sample_size(laws[sc], alpha, tv)
        return Planned(sc, laws[sc], num, df)

    plan = GenerationPlan(
        budget,
        tv,
        [planned(sc) for sc in scenarios],
        [planned(sc) for sc in inv],
        [planned(sc) for sc in batch],
        built,
        max_new_tokens,
        family,
    )
    return plan


def sizes_covered(plan: GenerationPlan) -> dict[str, list[Any]]:
    """What a run covers: the pairs, vocabulary sizes, m and sampling settings of its scenarios.

    Returns
    -------
    dict
        ``{"pairs": [...], "V": [min, max], "m": [min, max], "settings": [...]}``.
    """
    scs = [p.scenario for p in plan.scenarios]
    sizes = [int(plan.pairs[sc.pair].target.config.vocab_size) for sc in scs]
    settings = sorted({" ".join(sc.label.split(",")[2:-1]) for sc in scs})
    return {
        "pairs": list(dict.fromkeys(sc.pair for sc in scs)),
        "V": [min(sizes), max(sizes)],
        "m": [min(sc.m for sc in scs), max(sc.m for sc in scs)],
        "settings": settings,
    }


def describe_power(plan: GenerationPlan) -> str:
    """One sentence: the TV error, power and level the law tests are planned at."""
    return (
        f"each law test has power >= {POWER_TARGET} against a TV error of {plan.tv:g} on the joint law of the "
        f"first m tokens at level {plan.alpha_test:.3g} (family alpha {ALPHA:g} over {plan.family_size} tests, "
        f"Bonferroni); N per scenario {', '.join(str(p.num) for p in plan.scenarios)}"
    )


__all__ = [
    "BATCH_ROWS",
    "INVARIANCE_PAIRS",
    "SCENARIOS",
    "TV_BY_BUDGET",
    "GenerationPlan",
    "Planned",
    "Scenario",
    "build_plan",
    "check_custom_pair",
    "describe_power",
    "pooled_df",
    "sample_size",
    "sizes_covered",
]
