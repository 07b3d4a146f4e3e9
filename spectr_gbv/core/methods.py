"""The method table: every registered verification method's facts, as pure data, in one place.

Every layer that accepts a method name reads this table: the reference registry (which class
implements a name, whether it is lossless, its citation and its reading shape), the exact
simulators (stateful or instance-specific methods), the sweep, the torch kernels and their
closed-form tau laws, the decoder, the benchmark and the CLI. Adding a registered method is
one :class:`MethodSpec` entry here plus its code (a reference class, and optionally a torch
kernel and a closed-form law); nothing else lists method names.

Implementations are named by import path (``"module:attribute"``) so that this module imports
none of them: the layer that needs an implementation imports it with :func:`import_path`.

How many drafts a method reads (``drafts``), decided once for every layer
(:meth:`MethodSpec.grid_shape`):

``"none"``
    ``ar``: the target alone. On a grid it runs at K = 1, L = 0; the decoder drafts nothing.
``"one"``
    The rule verifies draft 0 only (``sd``, ``bv``, ``greedy_bv``, ``hsd``, ``hsd_released``).
    Grids run it at K = 1 only; the decoder refuses K != 1 (it would draft blocks nobody
    reads); given K > 1 drafts, the reference classes and the kernels read draft 0, so their
    law equals the K = 1 law.
``"many"``
    The rule reads all K drafts.

References
----------
THEORY.md sections 3, 5, 6 and 6a (the methods); each entry's ``citation`` names its paper
and algorithm.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

DraftArity = Literal["none", "one", "many"]

#: The reading shapes of :mod:`spectr_gbv.reference.structure` a method may declare.
STRUCTURES: tuple[str, ...] = ("selected_draft", "draft_scan", "draft_tree")
#: Longest ``MethodSpec.summary`` (the report's legend column then fits five K columns in 100).
SUMMARY_MAX_LEN = 27


@dataclass(frozen=True)
class MethodSpec:
    """The facts of one registered method.

    Attributes
    ----------
    name : str
        Stable method name (CLI, JSON, Parquet rows); a public contract.
    lossless : bool
        The output law equals the target's on every instance (THEORY.md section 2); False for
        the rules kept on purpose because they are published and lossy.
    drafts : {"none", "one", "many"}
        How many drafts the rule reads (see the module docstring).
    citation : str
        Paper and algorithm the implementation follows.
    reference : str or None
        ``"module:Class"`` of the :class:`~spectr_gbv.reference.Verifier` registered under
        ``name``; None for ``greedy_bv`` (stateful, simulated by
        :func:`~spectr_gbv.simulate.stateful.simulate_greedy_exact`).
    structure : str or None
        The reading shape (:data:`STRUCTURES`) the reference class declares, which lets the
        exact simulator average over i.i.d. drafts without enumerating draft tuples.
    stateful : bool
        The rule carries state between iterations (``greedy_bv``).
    needs_instance : bool
        The rule's kernel is solved for one instance (``lp_oracle``: the OPT(K) LP).
    kernel : str or None
        ``"module:function"`` of the torch kernel in :mod:`spectr_gbv.gpu.kernels` (the
        decoder and the benchmark run exactly the methods that have one).
    tau_law : bool
        The law of tau given the drafts has a closed form
        (:func:`spectr_gbv.gpu.kernels.expected.accepted_law`, whose function for a method
        ``m`` is ``_law_m`` of that module).
    bench_default : bool
        Run by the benchmark presets; the other kernel methods are opt-in there (the field's
        node rules are slow on a 50k vocabulary).
    summary : str
        What the rule is, with its year, in one short phrase (at most
        :data:`~spectr_gbv.core.methods.SUMMARY_MAX_LEN` characters): the legend of
        ``spectr-gbv report``. ``citation`` and docs/verifiers.md have the rest.
    """

    name: str
    lossless: bool
    drafts: DraftArity
    citation: str
    reference: str | None = None
    structure: str | None = None
    stateful: bool = False
    needs_instance: bool = False
    kernel: str | None = None
    tau_law: bool = False
    bench_default: bool = False
    summary: str = ""

    def grid_shape(self, num_drafts: int, draft_length: int) -> tuple[int, int]:
        """(K, L) at which a grid runs this method when asked for (``num_drafts``, ``draft_length``).

        ``"none"``: (1, 0); ``"one"``: (1, L); ``"many"``: (K, L) (:func:`grid_shape`).
        """
        return grid_shape(self.drafts, num_drafts, draft_length)


def grid_shape(drafts: DraftArity, num_drafts: int, draft_length: int) -> tuple[int, int]:
    """(K, L) at which a grid runs a method reading ``drafts`` when asked for (``num_drafts``, ``draft_length``).

    The one rule for single-draft methods and ``ar`` (module docstring), also for a user's rule
    that declares its ``drafts``: ``"none"``: (1, 0); ``"one"``: (1, L); ``"many"``: (K, L).
    """
    if drafts == "none":
        return 1, 0
    if drafts == "one":
        return 1, draft_length
    return num_drafts, draft_length


_REF = "spectr_gbv.reference"
_KER = "spectr_gbv.gpu.kernels"

#: Every registered method, in report order.
METHOD_TABLE: tuple[MethodSpec, ...] = (
    MethodSpec(
        "ar", True, "none",
        "plain autoregressive sampling from the target p (THEORY.md section 6)",
        reference=f"{_REF}.ar:AutoregressiveVerifier", structure="selected_draft",
        kernel=f"{_KER}.ar:verify_ar", bench_default=True,
        summary="the target alone, no drafts",
    ),
    MethodSpec(
        "sd", True, "one",
        "Leviathan et al. 2023 (arXiv 2211.17192), Algorithm 1; THEORY.md section 3",
        reference=f"{_REF}.sd:SpeculativeDecodingVerifier", structure="selected_draft",
        kernel=f"{_KER}.sd:verify_sd", tau_law=True, bench_default=True,
        summary="speculative decoding, 2023",
    ),
    MethodSpec(
        "bv", True, "one",
        "Sun et al. 2024 (arXiv 2403.10444), Algorithm 2; THEORY.md section 3",
        reference=f"{_REF}.bv:BlockVerifier", structure="selected_draft",
        kernel=f"{_KER}.bv:verify_bv", tau_law=True, bench_default=True,
        summary="block verification, 2024",
    ),
    MethodSpec(
        "greedy_bv", True, "one",
        "Sun et al. 2024 (arXiv 2403.10444), appendix: greedy block verification (the GBV of "
        "SpecTr-GBV) with a carried target-law correction; THEORY.md sections 2-3",
        stateful=True,
        summary="greedy BV, stateful, 2024",
    ),
    MethodSpec(
        "spectr", True, "many",
        "Sun et al. 2023 (arXiv 2310.15141), K-SEQ on the draft tree; THEORY.md section 6",
        reference=f"{_REF}.spectr:SpecTrVerifier", structure="draft_tree",
        kernel=f"{_KER}.spectr:verify_spectr", bench_default=True,
        summary="SpecTr's K-SEQ, 2023",
    ),
    MethodSpec(
        "rrs", True, "many",
        "Miao et al. 2024 (SpecInfer, arXiv 2305.09781), multi-step speculative sampling on the "
        "draft tree; THEORY.md section 6",
        reference=f"{_REF}.rrs:RecursiveRejectionVerifier", structure="draft_tree",
        kernel=f"{_KER}.rrs:verify_rrs", bench_default=True,
        summary="SpecInfer's RRS, 2024",
    ),
    MethodSpec(
        "gbv_multipath", True, "many",
        "Thomas & Pal 2026 (arXiv 2602.16961), multi-path greedy BV; Sun et al. 2024 (arXiv "
        "2403.10444), Algorithm 2; THEORY.md section 6",
        reference=f"{_REF}.gbv_multipath:MultiPathGreedyVerifier", structure="selected_draft",
        kernel=f"{_KER}.gbv_multipath:verify_gbv_multipath", tau_law=True,
        bench_default=True,
        summary="multi-path greedy BV, 2026",
    ),
    MethodSpec(
        "mdbv", True, "many",
        "this project's lossless reading of Lin et al. 2026 (SpecTr-GBV, arXiv 2604.25925) "
        "Steps 1-3, built on Sun et al. 2024 (arXiv 2403.10444) Algorithm 2; THEORY.md section 6",
        reference=f"{_REF}.mdbv:MultiDraftBlockVerifier", structure="draft_scan",
        kernel=f"{_KER}.mdbv:verify_mdbv", tau_law=True, bench_default=True,
        summary="lossless SpecTr-GBV, 2026",
    ),
    MethodSpec(
        "lp_oracle", True, "many",
        "OPT(K) linear program kernel (Hu et al. 2025, arXiv 2502.18779; THEORY.md section 5)",
        reference=f"{_REF}.lp_oracle:LPOracleVerifier", needs_instance=True,
        summary="solves OPT(K)'s LP, 2025",
    ),
    MethodSpec(
        "spectr_gbv_released", False, "many",
        "LOSSY: Lin et al. 2026 (arXiv 2604.25925) as released in junemily/SpecTr-GBV "
        "src/engine.py @ e399f44; THEORY.md section 6a",
        reference=f"{_REF}.spectr_gbv_released:ReleasedSpecTrGBVVerifier",
        kernel=f"{_KER}.released:verify_spectr_gbv_released",
        summary="released SpecTr-GBV, 2026",
    ),
    MethodSpec(
        "independent_bv", False, "many",
        "LOSSY baseline: Sun et al. 2024 (arXiv 2403.10444) Algorithm 2 on each draft, longest "
        "kept (first draft on ties); THEORY.md section 6 (b)",
        reference=f"{_REF}.independent_bv:IndependentBlockVerifier",
        summary="BV per draft, longest kept",
    ),
    MethodSpec(
        "traversal", True, "many",
        "Weng et al. 2025 (Traversal Verification, NeurIPS 2025, arXiv 2505.12398), Algorithm 1 "
        "on the trie of the drafts, q(.|u) as the draft law of every node",
        reference=f"{_REF}.traversal:TraversalVerifier", kernel=f"{_KER}.traversal:verify_traversal",
        summary="trie traversal, 2025",
    ),
    MethodSpec(
        "khisti_is", True, "many",
        "Khisti et al. 2025 (arXiv 2410.18234), canonical decomposition: truncated-LP importance "
        "sampling selection (s = 5, pairwise tournament for K > 2) then speculative sampling, per "
        "node of the draft tree",
        reference=f"{_REF}.khisti_is:ImportanceSamplingVerifier", structure="draft_tree",
        summary="importance sampling, 2025",
    ),
    MethodSpec(
        "rrs_random", True, "many",
        "Miao et al. 2024 (SpecInfer, arXiv 2305.09781), multi-step speculative sampling with the "
        "drafts through each node tried in uniformly random order; THEORY.md section 6",
        reference=f"{_REF}.rrs_random:RandomOrderRecursiveRejectionVerifier", structure="draft_tree",
        summary="RRS in random order, 2024",
    ),
    MethodSpec(
        "hsd", True, "one",
        "Zhou et al. 2026 (arXiv 2601.05724), Algorithm 2 with Definitions 4-6 and Eqs. (19)-(20); "
        "equal in law to BV (Sun et al. 2024, arXiv 2403.10444); THEORY.md section 3",
        reference=f"{_REF}.hsd:HierarchicalVerifier", structure="selected_draft",
        summary="hierarchical SD, 2026",
    ),
    MethodSpec(
        "hsd_released", False, "one",
        "LOSSY: Zhou et al. 2026 (arXiv 2601.05724) as released in "
        "ZhouYuxuanYX/Hierarchical-Speculative-Decoding transformers/generation/utils.py @ 3b1ae00 "
        "(uncapped whole-draft ratio)",
        reference=f"{_REF}.hsd:ReleasedHierarchicalVerifier", structure="selected_draft",
        summary="HSD as released, 2026",
    ),
    MethodSpec(
        "hsd_multidraft", True, "many",
        "Zhou et al. 2026 (arXiv 2601.05724), Algorithm 3; equal in law to MDBV (THEORY.md section 6)",
        reference=f"{_REF}.hsd:MultiDraftHierarchicalVerifier", structure="draft_scan",
        summary="multi-draft HSD, 2026",
    ),
    MethodSpec(
        "optimal_multidraft", True, "many",
        "optimal single-step multi-draft verification (value: Hu et al. 2025, arXiv 2502.18779; "
        "decomposition: Khisti et al. 2024, arXiv 2410.18234) lifted node by node to the draft trie; "
        "exact polymatroid construction of this project",
        reference=f"{_REF}.optimal_multidraft:OptimalMultiDraftVerifier", structure="draft_tree",
        kernel=f"{_KER}.optimal_multidraft:verify_optimal_multidraft",
        summary="L=1 optimum per node, 2025",
    ),
    MethodSpec(
        "near_opt_bv", True, "many",
        "near_opt_bv (this project): one draft selected by the largest of independent scores whose "
        "laws split each node's score-law polymatroid by its lexicographically optimal base "
        "(BV-weighted target p), the under-drafted children re-split in proportion to q, then block "
        "verification with its law (Sun et al. 2024, arXiv 2403.10444, Algorithm 2)",
        reference=f"{_REF}.near_opt_bv:NearOptBlockVerifier", structure="selected_draft",
        kernel=f"{_KER}.near_opt_bv:verify_near_opt_bv", tau_law=True,
        summary="select a draft, then BV",
    ),
)  # fmt: skip

_BY_NAME: dict[str, MethodSpec] = {m.name: m for m in METHOD_TABLE}

#: Every registered method name, in report order.
METHOD_NAMES: tuple[str, ...] = tuple(_BY_NAME)


def method_spec(name: str) -> MethodSpec:
    """The table entry of ``name``.

    Raises
    ------
    TypeError
        ``name`` is not a str.
    ValueError
        ``name`` is not in the table (the message lists the valid names).
    """
    if not isinstance(name, str):
        raise TypeError(f"method must be a method name (a str), got {type(name).__name__} {name!r:.60}")
    spec = _BY_NAME.get(name)
    if spec is None:
        raise ValueError(f"unknown method {name!r}{method_hint(name)}; valid: {', '.join(METHOD_NAMES)}")
    return spec


#: Names people type for the paper's rule, which the table lists under two names.
PAPER_NAMES: frozenset[str] = frozenset({"spectr_gbv", "spectrgbv", "gbv", "spectr_gbv_lossless"})


def method_hint(name: object) -> str:
    """A hint to append to an unknown-method message, or "" (the paper's name -> ``mdbv`` / ``spectr_gbv_released``).

    Examples
    --------
    >>> method_hint("SpecTr-GBV").startswith(" (the paper's SpecTr-GBV rule is 'mdbv'")
    True
    >>> method_hint("nope")
    ''
    """
    if isinstance(name, str) and name.strip().lower().replace("-", "_") in PAPER_NAMES:
        return (
            " (the paper's SpecTr-GBV rule is 'mdbv', this package's lossless reading of it, or "
            "'spectr_gbv_released', as its authors released it: lossy)"
        )
    return ""


def is_registered(name: object) -> bool:
    """True when ``name`` is a str naming an entry of the table."""
    return isinstance(name, str) and name in _BY_NAME


def methods_where(
    *,
    lossless: bool | None = None,
    kernel: bool | None = None,
    tau_law: bool | None = None,
    bench_default: bool | None = None,
    drafts: DraftArity | None = None,
) -> tuple[str, ...]:
    """Names of the entries with the given facts, in table order (None: any).

    ``kernel`` / ``tau_law`` select entries that have (True) or lack (False) a torch kernel /
    a closed-form tau law.
    """

    def keep(m: MethodSpec) -> bool:
        return (
            (lossless is None or m.lossless == lossless)
            and (kernel is None or (m.kernel is not None) == kernel)
            and (tau_law is None or m.tau_law == tau_law)
            and (bench_default is None or m.bench_default == bench_default)
            and (drafts is None or m.drafts == drafts)
        )

    return tuple(m.name for m in METHOD_TABLE if keep(m))


def import_path(path: str) -> Any:
    """The object a table entry names by ``"module:attribute"`` (its ``reference`` or ``kernel`` field).

    Raises
    ------
    ImportError, AttributeError
        An entry naming a module or attribute that does not exist (a packaging fault).
    """
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def class_facts(name: str) -> tuple[bool, str | None, str]:
    """(lossless, structure, citation) of ``name``, for a reference class body to read.

    A registered reference class states ``lossless, structure, citation = class_facts(name)`` in
    its own body, so the facts live in the table only and the exact simulator still sees the
    reading shape as declared by the class itself.
    """
    spec = method_spec(name)
    return spec.lossless, spec.structure, spec.citation
