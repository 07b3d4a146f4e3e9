"""The options of a validation run: :class:`ValidateOptions`, and the names its fields take.

:class:`ValidateOptions` gathers what :func:`~spectr_gbv.validate.harness.driver.validate` is
asked to do besides the verifier itself (interface, level, budget, seed, reference, probes,
search, conventions, isolation, ...) and checks each argument when it is built, so that a bad
option raises before any verifier call. ``validate(verify, interface=..., level=...)`` builds one
from its keywords; ``validate(verify, options=ValidateOptions(...))`` takes a ready one.

Imports: :mod:`spectr_gbv.validate.checks.reference` and
:mod:`spectr_gbv.validate.interfaces.names` only.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from spectr_gbv.validate.checks import reference as reference_check
from spectr_gbv.validate.interfaces.names import check_interface

#: Levels of a run: ``"exact"`` (the law computed exactly where possible) or ``"statistical"``.
LEVELS: tuple[str, ...] = ("exact", "statistical")
#: Budgets of a run: the total-variation error each sampled law test is planned against (0.1, 0.02, 0.01).
BUDGETS: tuple[str, ...] = ("quick", "standard", "thorough")
#: Conventions an interface does not promise, which a run checks only when declared:
#: ``"vllm"``: drafts padded with -1 placeholder ids (stop there and draw from the target row).
CONVENTIONS: tuple[str, ...] = ("vllm",)


def check_conventions(conventions: Any) -> tuple[str, ...]:
    """The conventions as a tuple of names of :data:`CONVENTIONS`.

    Parameters
    ----------
    conventions : sequence of str or str
        Names, or one comma-separated string (``"vllm"``; blanks are dropped).

    Returns
    -------
    tuple of str
        The names, in the order given.

    Raises
    ------
    ValueError
        ``conventions: expected names among ...`` for a value that is not iterable;
        ``conventions: unknown 'x'; valid: ...`` for a name outside :data:`CONVENTIONS`.
    """
    if isinstance(conventions, str):
        conventions = tuple(c.strip() for c in conventions.split(",") if c.strip())
    try:
        out = tuple(conventions)
    except TypeError:
        raise ValueError(f"conventions: expected names among {', '.join(CONVENTIONS)}, got {conventions!r}") from None
    bad = [c for c in out if c not in CONVENTIONS]
    if bad:
        raise ValueError(f"conventions: unknown {bad[0]!r}; valid: {', '.join(CONVENTIONS)}")
    return out


def check_args(level: str, budget: str, seed: Any, reference: str | None) -> None:
    """Check the level, budget, seed and reference of a run.

    Raises
    ------
    ValueError
        ``level: expected one of ...``, ``budget: expected one of ...``, ``seed: expected an
        int >= 0, got ...`` (a bool is not a seed), ``reference: expected a method name or None,
        got TYPE``; the first that applies, in that order.
    """
    if level not in LEVELS:
        raise ValueError(f"level: expected one of {', '.join(LEVELS)}, got {level!r}")
    if budget not in BUDGETS:
        raise ValueError(f"budget: expected one of {', '.join(BUDGETS)}, got {budget!r}")
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
    if reference is not None and not isinstance(reference, str):
        raise ValueError(f"reference: expected a method name or None, got {type(reference).__name__}")


@dataclasses.dataclass(frozen=True)
class ValidateOptions:
    """What a validation run is asked to do: every argument of ``validate`` but the verifier.

    Built once and checked when built (interface, level, budget, seed, reference, conventions, in
    that order; the time limit, isolation and workers are checked when the run's call guard is
    made, the instances when its battery is built). Frozen: a run cannot change its options.

    Parameters
    ----------
    interface : str
        ``"generic"``, ``"chain"``, ``"hf"`` or another name of
        :data:`~spectr_gbv.validate.interfaces.names.INTERFACES` (see
        :mod:`spectr_gbv.validate.interfaces`).
    level : str
        ``"exact"``: the law computed exactly where possible (declared ``outcome_law``, or a
        chain verifier's supplied uniforms), otherwise statistical (the report says so).
        ``"statistical"``: sampling only.
    reference : str, optional
        Stable method name the verifier claims to implement (``"sd"``, ``"bv"``, ``"mdbv"``,
        ``"spectr"``, ``"rrs"``, ``"gbv_multipath"``, ...): adds the conditional-law checks.
    seed : int
        Seed of every random draw of the harness (>= 0); stored as a Python int.
    budget : str
        ``"quick"`` (TV 0.1 detected with power 0.99, ``wide_vocab`` at 0.3, a lighter search:
        for unit tests and a first look), ``"standard"`` (TV 0.02, the default) or
        ``"thorough"`` (TV 0.01).
    time_limit_s : float
        Seconds one verifier call may take before it counts as hung.
    instances : optional
        Replaces the battery: an :class:`~spectr_gbv.core.Instance`, an ``(Instance, K)``
        pair, a :class:`~spectr_gbv.validate.battery.instance.BatteryInstance`, or a list of them (K
        defaults to 2, or 1 for chain/hf).
    probes : bool
        Run the fixed robustness probes (placeholder ids, a zero coin, all-zero residuals
        forced and forcing-free, a NaN target row; chain: uniform reuse). False tests only the instances (and
        the determinism check on the first), e.g. in a property test whose examples are instances;
        the report notes what was skipped.
    search : bool
        Run the adversarial search. False likewise.
    conventions : sequence of str or str
        Conventions the interface does not promise, to check as part of the verdict (see
        :data:`CONVENTIONS`): ``("vllm",)`` makes the -1 placeholder probes count. Without it they
        are advisory notes. Stored as a tuple of names.
    isolation : str, optional
        ``"process"`` (default where ``fork`` exists: the verifier runs in a worker process, so
        an exit, a crash or a hang in C code is reported) or ``"thread"`` (in-process).
    workers : int, optional
        Worker processes that run batches concurrently (default ``min(2, os.cpu_count())``).
    quiet : bool, optional
        Hide the progress bar (shown on stderr only when it is a terminal); None follows
        :func:`spectr_gbv.core.progress.set_quiet` and ``SPECTR_GBV_QUIET``.

    Raises
    ------
    ValueError
        Unknown interface, level, budget, reference or convention; a bad seed (the messages of
        :func:`~spectr_gbv.validate.interfaces.names.check_interface`, :func:`check_args`,
        :func:`check_conventions` and :func:`~spectr_gbv.validate.checks.reference.check_reference`).

    Examples
    --------
    >>> opts = ValidateOptions(level="exact", budget="quick", conventions="vllm")
    >>> opts.conventions, opts.seed
    (('vllm',), 0)
    """

    interface: str = "generic"
    level: str = "statistical"
    reference: str | None = None
    seed: int = 0
    budget: str = "standard"
    time_limit_s: float = 10.0
    instances: Any = None
    probes: bool = True
    search: bool = True
    conventions: Any = ()
    isolation: str | None = None
    workers: int | None = None
    quiet: bool | None = None

    def __post_init__(self) -> None:
        check_interface(self.interface)
        check_args(self.level, self.budget, self.seed, self.reference)
        object.__setattr__(self, "conventions", check_conventions(self.conventions))
        object.__setattr__(self, "reference", reference_check.check_reference(self.reference))
        object.__setattr__(self, "seed", int(self.seed))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The names of the options, in declaration order (the keywords ``validate`` takes)."""
        return tuple(f.name for f in dataclasses.fields(cls))


__all__ = ["BUDGETS", "CONVENTIONS", "LEVELS", "ValidateOptions", "check_args", "check_conventions"]
