"""What a validation run needs around its checks: the call guard, progress, warnings, sizes.

* :func:`make_guard`: the :class:`~spectr_gbv.validate.isolation.guard.CallGuard` of a run (isolation,
  workers, time limit);
* :func:`progress_bar`: a bar over the run's verifier calls on stderr (silent off a terminal or
  when quiet), advanced by every ``emit`` of the adapter;
* :class:`CapturedWarnings`: the Python warnings a verifier issues, counted instead of printed;
* :func:`sizes_covered`, :func:`search_sizes`: the (n, L, K) ranges a report states.

Imports: validate.adversarial, battery, isolation, checks.statistical, interfaces, core.progress.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from spectr_gbv.validate.adversarial import search as adversarial_search
from spectr_gbv.validate.adversarial import sizes as search_sizes_mod
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.checks import statistical
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.isolation.guard import CallGuard


def make_guard(time_limit_s: float, isolation: str | None, workers: int | None) -> CallGuard:
    """The call guard; ``isolation`` / ``workers`` are passed on when given."""
    kw: dict[str, Any] = {}
    if isolation is not None:
        kw["isolation"] = isolation
    if workers is not None:
        kw["workers"] = workers
    return CallGuard(time_limit_s, **kw)


def sizes_covered(
    battery: list[BatteryInstance], budget: str, single_draft: bool, search: bool
) -> dict[str, list[Any]]:
    """Ranges of n (vocabulary), L and K over the battery and, when it ran, the search sizes.

    Returns
    -------
    dict
        ``{"n": [min, max], "L": [min, max], "K": [min, max]}`` over the instances whose every
        token id is tested; with an instance seen through a wide vocabulary
        (:mod:`~spectr_gbv.validate.battery.wide`) also ``"vocab_size"`` (the largest such V,
        as ``[V, V]``), ``"vocab_ids"`` (the ids its mass is on) and ``"vocab_tv"`` (the TV error
        its law tests are planned against, :func:`~spectr_gbv.validate.checks.statistical.planned_tv`).
    """
    sizes = [(bi.instance.n, bi.instance.L, bi.K) for bi in battery]
    if search:
        sizes += list(search_sizes(budget, single_draft))
    out = {key: [min(s[i] for s in sizes), max(s[i] for s in sizes)] for i, key in enumerate(("n", "L", "K"))}
    wide = [bi for bi in battery if bi.vocab is not None]
    if wide:
        widest = max(wide, key=lambda bi: bi.V)
        out["vocab_size"] = [widest.V, widest.V]
        out["vocab_ids"] = list(widest.vocab.ids) if widest.vocab is not None else []
        tv = statistical.planned_tv(widest, statistical.TV_BY_BUDGET[budget])
        out["vocab_tv"] = [tv, tv]
    return out


def search_sizes(budget: str, single_draft: bool) -> tuple[tuple[int, int, int], ...]:
    """The (n, L, K) sizes the adversarial search walks at ``budget``."""
    fn = getattr(search_sizes_mod, "sizes", None)
    if fn is not None:
        return tuple(fn(budget, single_draft))
    return search_sizes_mod.SIZES_SINGLE if single_draft else search_sizes_mod.SIZES_MULTI


class Bar:
    """Progress over verifier calls (stderr; silent when not a terminal or when quiet)."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def update(self, n: int) -> None:
        """Advance by ``n`` calls (the total grows when the estimate was short)."""
        if self.bar is None:
            return
        if self.bar.total is not None and self.bar.n + n > self.bar.total:
            self.bar.total = self.bar.n + n
        self.bar.update(n)

    def close(self) -> None:
        """Finish the bar."""
        if self.bar is not None:
            self.bar.close()


def progress_bar(
    adapter: Adapter, battery: list[BatteryInstance], budget: str, reference: str | None, search: bool, quiet: Any
) -> Bar:
    """A bar whose total estimates the run's verifier calls; every ``emit`` advances it."""
    try:
        from spectr_gbv.core.progress import progress  # noqa: PLC0415
    except ImportError:  # pragma: no cover - the progress module ships with the package
        return Bar(None)
    tv = statistical.TV_BY_BUDGET[budget]
    alpha = statistical.ALPHA / max(3 * len(battery), 1)
    total = sum(statistical.sample_size(bi, alpha, tv) for bi in battery)
    if search:
        restarts, rounds, per = adversarial_search.SEARCH[budget]
        total += (
            len(search_sizes(budget, adapter.single_draft)) * restarts * (1 + adversarial_search.MOVES * rounds) * per
        )
    bar = progress(total, f"validate ({budget})", quiet=quiet, unit="calls")
    if getattr(bar, "disable", False) or not hasattr(bar, "total"):
        return Bar(None)
    wrapped = Bar(bar)
    emit = adapter.emit

    def counting_emit(drafts: np.ndarray, *args: Any, **kw: Any) -> Any:
        out = emit(drafts, *args, **kw)
        wrapped.update(len(drafts))
        return out

    adapter.emit = counting_emit  # type: ignore[method-assign]
    emit_many = getattr(adapter, "emit_many", None)
    if emit_many is not None:

        def counting_emit_many(batches: Any) -> Any:
            out = emit_many(batches)
            wrapped.update(sum(len(e.lengths) for e in out))
            return out

        adapter.emit_many = counting_emit_many  # type: ignore[method-assign]
    return wrapped


class CapturedWarnings:
    """Count the Python warnings issued during a run instead of printing them.

    Probes feed degenerate inputs on purpose, so a verifier's ``RuntimeWarning`` (0/0, NaN)
    would otherwise be printed between the report's lines, or fill pytest's warning summary.
    Counts are kept per (category, first line of the message), at most 20 distinct ones.
    """

    MAX_KINDS = 20

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.total = 0
        self._ctx = warnings.catch_warnings()

    def _show(self, message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
        self.total += 1
        key = f"{category.__name__}: {str(message).strip().splitlines()[0][:120] if str(message).strip() else ''}"
        if key in self.counts or len(self.counts) < self.MAX_KINDS:
            self.counts[key] = self.counts.get(key, 0) + 1

    def __enter__(self) -> CapturedWarnings:
        self._ctx.__enter__()
        warnings.simplefilter("always")
        warnings.showwarning = self._show
        return self

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)

    def summary(self) -> str:
        """One note: how many warnings, the most frequent kinds."""
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:3]
        kinds = "; ".join(f"{k} (x{n})" for k, n in top)
        plural = "warning was" if self.total == 1 else "warnings were"
        return (
            f"{self.total} Python {plural} issued during the run (probes feed degenerate inputs on purpose) "
            f"and captured, not printed: {kinds}"
        )


__all__ = ["Bar", "CapturedWarnings", "make_guard", "progress_bar", "search_sizes", "sizes_covered"]
