r"""Grid and presets of ``spectr-gbv bench``: the paper's ablation axes, one factor at a time.

The grid is one-factor-at-a-time around a centre (K, L, T) = (3, 8, 0.7), over the paper's
ablation axes scaled to a small machine: K in {1, 3, 5, 7} at (L, T) = (8, 0.7), L in
{4, 8, 12, 16} at (K, T) = (3, 0.7) and T in {0.1, 0.4, 0.7} at (K, L) = (3, 8). Each method
runs at its table shape (:meth:`~spectr_gbv.core.methods.MethodSpec.grid_shape`): single-draft
methods (``sd``, ``bv``) at K = 1 on every sweep; ``ar`` at (K, L) = (1, 0), once per temperature
(it is the speed-up baseline). A full factorial (4 x 4 x 3 per method) is out of reach of a CPU.

References
----------
Lin et al., SpecTr-GBV, arXiv 2604.25925 (ablation axes K, L, T).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from spectr_gbv.core.methods import is_registered, method_spec, methods_where
from spectr_gbv.realpair.models.prompts import DATASETS

if TYPE_CHECKING:
    import torch

METHODS: tuple[str, ...] = methods_where(lossless=True, kernel=True)
"""Methods the bench can run (``--methods``): the table's lossless methods with a torch kernel, in
table order (:data:`~spectr_gbv.core.methods.METHOD_TABLE`). A user's rule (``"module:attribute"``,
:mod:`spectr_gbv.gpu.kernels.rules`) runs too, after these, in the order given."""
DEFAULT_METHODS: tuple[str, ...] = methods_where(bench_default=True)
"""Methods the presets run: the table's ``bench_default`` entries, :data:`METHODS` less the field's
verifiers, which are opt-in (``--methods ...,traversal,optimal_multidraft,near_opt_bv``;
``optimal_multidraft`` and ``near_opt_bv`` build a polymatroid node rule, O(V^3 log V) per node at
worst, seconds to minutes per call on a 50k vocabulary). A user's rule is never a default."""
SINGLE_DRAFT: tuple[str, ...] = methods_where(kernel=True, drafts="one")
"""Methods that verify one draft (the table's ``drafts == "one"``): always K = 1."""
K_AXIS = (1, 3, 5, 7)
"""Numbers of drafts K swept (Lin et al. 2026, ablation over K)."""
L_AXIS = (4, 8, 12, 16)
"""Draft lengths L swept."""
T_AXIS = (0.1, 0.4, 0.7)
"""Sampling temperatures T swept (applied to target and draft alike)."""
CENTRE = (3, 8, 0.7)
"""Centre (K, L, T) of the one-factor-at-a-time sweeps."""
CHAT_DATASETS = ("gsm", "instruct")
"""Datasets whose prompts are questions: sent through the tokenizer's chat template."""
LOSSLESS_PROMPTS = (
    ("code", False, 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'),
    ("chat", True, "What is 12 times 7? Answer with one number."),
)
"""Fixed prompts (name, chat template?, text) of the law test on the real model."""


def is_user_method(method: object) -> bool:
    """True for a user's rule the bench accepts by name: ``"module:attribute"``, or a name added with
    :func:`~spectr_gbv.reference.registry.register` that is not in the table.

    A ``module:attribute`` string is checked for its form only (the decoder imports it:
    :func:`~spectr_gbv.gpu.kernels.rules.resolve_kernel_rule`; ``spectr-gbv bench`` resolves it
    before any run).
    """
    if not isinstance(method, str) or is_registered(method):
        return False
    if method.count(":") == 1 and all(method.split(":")):
        return True
    from spectr_gbv.reference.registry import available_methods  # noqa: PLC0415 - on demand

    return method in available_methods()


@dataclass(frozen=True)
class GridPoint:
    """One decoding configuration of the grid.

    Attributes
    ----------
    method : str
    num_drafts : int
        K (1 for ``ar``, ``sd``, ``bv``).
    draft_length : int
        L (0 for ``ar``: the decoder takes it as is).
    temperature : float
        T.
    sweeps : tuple of str
        The sweeps (``"K"``, ``"L"``, ``"T"``) the point belongs to; the centre is in all three.
    """

    method: str
    num_drafts: int
    draft_length: int
    temperature: float
    sweeps: tuple[str, ...]

    @property
    def key(self) -> tuple[str, int, int, float]:
        """(method, K, L, T)."""
        return (self.method, self.num_drafts, self.draft_length, self.temperature)


def build_grid(
    methods: Sequence[str],
    ks: Sequence[int],
    ls: Sequence[int],
    ts: Sequence[float],
    centre: tuple[int, int, float] = CENTRE,
) -> list[GridPoint]:
    """One-factor-at-a-time grid around ``centre``.

    K-sweep: every K in ``ks`` at (L_c, T_c); L-sweep: every L in ``ls`` at (K_c, T_c);
    T-sweep: every T in ``ts`` at (K_c, L_c). Each registered method runs at
    :meth:`~spectr_gbv.core.methods.MethodSpec.grid_shape` of the point: ``sd`` and ``bv``
    take K = 1 everywhere; ``ar`` runs at every temperature of ``ts`` and T_c, with
    (K, L) = (1, 0). A user's rule runs at every (K, L). Duplicates are merged (the centre
    belongs to the three sweeps).

    Parameters
    ----------
    methods : sequence of str
        Among :data:`METHODS`, or a user's rule: ``"module:attribute"`` (checked for its form
        only; the decoder imports it) or a name added with
        :func:`~spectr_gbv.reference.registry.register`. ``ar`` is always added (it is the
        speed-up baseline).
    ks, ls : sequence of int
        K >= 1 and L >= 1 values.
    ts : sequence of float
        Temperatures >= 0.
    centre : (int, int, float)
        (K_c, L_c, T_c).

    Returns
    -------
    list of GridPoint
        ``ar`` first, then methods in :data:`METHODS` order, then the user's rules in the
        order given, each sorted by (K, L, T).

    Raises
    ------
    ValueError
        Unknown method (neither in :data:`METHODS` nor of the ``module:attribute`` form),
        empty axis, or a value out of range.

    Examples
    --------
    >>> grid = build_grid(DEFAULT_METHODS, K_AXIS, L_AXIS, T_AXIS)
    >>> len(grid), sum(p.method == "mdbv" for p in grid), [p.num_drafts for p in grid if p.method == "sd"]
    (51, 9, [1, 1, 1, 1, 1, 1])
    """
    unknown = [m for m in methods if m not in METHODS and not is_user_method(m)]
    if unknown:
        raise ValueError(
            f"unknown method(s) {', '.join(map(str, unknown))}; valid: {', '.join(METHODS)}, "
            "or 'module:attribute' naming your own rule"
        )
    if not ks or not ls or not ts:
        raise ValueError("every axis (K, L, T) needs at least one value")
    if any(k < 1 for k in ks) or any(n < 1 for n in ls) or any(not t >= 0 for t in ts):
        raise ValueError(f"need K >= 1, L >= 1, T >= 0; got K={list(ks)}, L={list(ls)}, T={list(ts)}")
    kc, lc, tc = centre
    points: dict[tuple[str, int, int, float], set[str]] = {}

    def add(method: str, k: int, n: int, t: float, sweep: str) -> None:
        if is_registered(method):
            k, n = method_spec(method).grid_shape(k, n)
        points.setdefault((method, k, n, float(t)), set()).add(sweep)

    for m in dict.fromkeys(("ar", *methods)):
        if m == "ar":
            for t in ts:
                add(m, 1, 0, t, "T")
            for sweep in "KLT":
                add(m, 1, 0, tc, sweep)
            continue
        for k in ks:
            add(m, k, lc, tc, "K")
        for n in ls:
            add(m, kc, n, tc, "L")
        for t in ts:
            add(m, kc, lc, t, "T")
    order = {m: i for i, m in enumerate((*METHODS, *(m for m in dict.fromkeys(methods) if m not in METHODS)))}
    return [
        GridPoint(*key, tuple(sorted(sw))) for key, sw in sorted(points.items(), key=lambda x: (order[x[0][0]], x[0]))
    ]


@dataclass(frozen=True)
class BenchConfig:
    """Everything a benchmark run depends on (a preset, possibly with overrides).

    Attributes
    ----------
    datasets : tuple of str
        Prompt sets (:data:`DATASETS`).
    methods : tuple of str
        Methods (``ar`` is always run).
    ks, ls, ts : tuple
        Sweep values of K, L, T.
    centre : (int, int, float)
        (K_c, L_c, T_c) of the sweeps.
    num_prompts : int
        Prompts per dataset.
    max_new_tokens : int
        Tokens generated per prompt and run.
    seed : int
        Prompt selection and decoder seeds (prompt i uses ``seed + 7919 * i`` for every method:
        common random numbers).
    max_prompt_tokens : int
        Longer prompts are cut: raw text keeps its last tokens, chat questions their first.
    peer, predict, lossless : bool
        Run the peer comparison, the predictions, the law test.
    predict_samples : int
        Monte Carlo continuations per context for the predictions.
    predict_contexts : int
        Contexts per prompt for the predictions: the prompt and prefixes of its ``ar``
        continuation at evenly spaced lengths (the contexts decoding meets).
    predict_sweeps : bool
        Predict at every (L, T) of the L and T sweeps, not only at the centre.
    lossless_prompts : tuple of str
        Names of the :data:`LOSSLESS_PROMPTS` tested.
    lossless_methods : tuple of str
    lossless_runs, lossless_tokens, lossless_drafts, lossless_length : int
        Batched runs, first tokens tested, K and L of the law test.
    """

    datasets: tuple[str, ...] = ("humaneval", "gsm")
    methods: tuple[str, ...] = DEFAULT_METHODS
    ks: tuple[int, ...] = K_AXIS
    ls: tuple[int, ...] = L_AXIS
    ts: tuple[float, ...] = T_AXIS
    centre: tuple[int, int, float] = CENTRE
    num_prompts: int = 1
    max_new_tokens: int = 40
    seed: int = 0
    max_prompt_tokens: int = 384
    peer: bool = True
    predict: bool = True
    predict_samples: int = 64
    predict_contexts: int = 8
    predict_sweeps: bool = False
    lossless: bool = True
    lossless_prompts: tuple[str, ...] = ("code",)
    lossless_methods: tuple[str, ...] = ("sd", "mdbv")
    lossless_runs: int = 1500
    lossless_tokens: int = 1
    lossless_drafts: int = 2
    lossless_length: int = 2

    def __post_init__(self) -> None:
        bad = [d for d in self.datasets if d not in DATASETS]
        if bad or not self.datasets:
            raise ValueError(f"datasets must be among {', '.join(DATASETS)}; got {list(self.datasets)}")
        positive = ("num_prompts", "max_new_tokens", "max_prompt_tokens", "predict_samples", "predict_contexts")
        for name in (*positive, "lossless_runs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        names = [name for name, _, _ in LOSSLESS_PROMPTS]
        if any(n not in names for n in self.lossless_prompts):
            raise ValueError(f"lossless_prompts must be among {names}, got {list(self.lossless_prompts)}")
        build_grid(self.methods, self.ks, self.ls, self.ts, self.centre)

    def grid(self) -> list[GridPoint]:
        """The grid points of this configuration (:func:`build_grid`)."""
        return build_grid(self.methods, self.ks, self.ls, self.ts, self.centre)

    def with_axes(
        self, ks: Sequence[int] | None = None, ls: Sequence[int] | None = None, ts: Sequence[float] | None = None
    ) -> BenchConfig:
        """A copy with other sweep values (``None`` keeps one).

        A centre coordinate missing from its new axis becomes that axis' first value.
        """
        kc, lc, tc = self.centre
        ks, ls, ts = tuple(ks or self.ks), tuple(ls or self.ls), tuple(float(t) for t in (ts or self.ts))
        centre = (kc if kc in ks else ks[0], lc if lc in ls else ls[0], tc if tc in ts else ts[0])
        return replace(self, ks=ks, ls=ls, ts=ts, centre=centre)

    def for_prompts(self, counts: Mapping[str, int]) -> BenchConfig:
        """The configuration a run on these prompt sets is: their datasets, the largest prompt count.

        Parameters
        ----------
        counts : mapping of str to int
            Dataset (among :data:`~spectr_gbv.realpair.models.prompts.DATASETS`) -> number of prompts, in run order.

        Raises
        ------
        ValueError
            An unknown dataset, or no dataset (as :class:`BenchConfig`).
        """
        return replace(self, datasets=tuple(counts), num_prompts=max(counts.values(), default=self.num_prompts))

    def summary(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        return asdict(self)


PRESETS: dict[str, BenchConfig] = {
    # 51 grid points x 2 datasets x 1 prompt x 40 tokens, the law test of the first token on one
    # fixed prompt (1,500 runs: power about 0.6 against TV 0.05 -- the full preset has the power)
    "quick": BenchConfig(),
    # the paper's axes on the four prompt sets
    "full": BenchConfig(
        datasets=DATASETS,
        num_prompts=4,
        max_new_tokens=96,
        predict_samples=128,
        predict_sweeps=True,
        lossless_prompts=("code", "chat"),
        lossless_runs=20000,
        lossless_tokens=2,
    ),
}
"""Named configurations of ``spectr-gbv bench --preset``."""


@dataclass
class BenchModels:
    """Target, draft and the tokenizer hooks of one benchmark.

    Attributes
    ----------
    target : torch.nn.Module
        Hugging Face causal LM p.
    draft : torch.nn.Module or DraftSource
        Draft q on the same vocabulary.
    encode : callable (text: str, chat: bool, max_tokens: int) -> Tensor [T], int64
        Prompt ids (through the chat template when ``chat``).
    decode : callable (Tensor [N]) -> str, optional
        For the sample continuations stored in the results.
    target_name, draft_name : str
    """

    target: torch.nn.Module
    draft: Any
    encode: Callable[[str, bool, int], torch.Tensor]
    decode: Callable[[torch.Tensor], str] | None = None
    target_name: str = "target"
    draft_name: str = "draft"
