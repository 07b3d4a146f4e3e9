r"""Speculative decoding with Hugging Face causal LMs and the batched verification kernels.

One iteration, for each of B independent rows (THEORY.md section 1):

1. draft: K i.i.d. drafts of L tokens, one batched draft forward per position, the row's
   context cache computed once and expanded to K rows; the exact laws ``q [B, K, L, V]`` the
   tokens were drawn from are recorded (:mod:`spectr_gbv.gpu.decoding.draft_sources`);
2. target: ONE forward on ``B * K`` rows (accepted context + pending token + draft), giving
   ``p [B, K, L+1, V]`` (row L = bonus), processed exactly like ``q``
   (:mod:`spectr_gbv.gpu.decoding.sampling`);
3. verify: ``spectr_gbv.gpu.kernels.verify`` returns the accepted prefix length ``tau``, the
   draft it belongs to and the emitted tokens (prefix + one sampled token); the method is a
   registered name (:data:`LOSSLESS_METHODS`, read from the method table) or a user's rule
   (:mod:`spectr_gbv.gpu.kernels.rules`), whose output is checked like a kernel's;
4. rollback: both caches keep row ``draft_index`` cropped to the accepted path; the emitted
   token that follows becomes the pending token of the next iteration.

Rows finish independently (ragged accepted lengths are handled by
:class:`~spectr_gbv.gpu.decoding.cache.RowCache`); the tail beyond ``max_new_tokens`` (at most L
tokens of the last iteration) is truncated, which is lossless.

Temperature 0 is supported as greedy decoding: both p and q become one-hot laws at their
first arg-max, so the verifiers accept a draft token iff it equals the target's arg-max and
the output is the target's greedy continuation. A tiny temperature T > 0 (down to the
smallest float, 5e-324) is the exact law softmax(logits / T): the arg-max law, exact ties split
evenly (:func:`~spectr_gbv.gpu.decoding.sampling.process_logits`).

Inputs are checked before any work (:meth:`SpeculativeDecoder.generate`): a prompt that is
not integer token ids (a ``str``, a ragged batch, an empty prompt), a seed outside
``0..2**64 - 1``, a device that is not available, and a run longer than the model's context
(``config.max_position_embeddings`` / ``n_positions``) raise ``ValueError`` naming the argument.
Faults no argument check sees are guarded at run time (:mod:`spectr_gbv.gpu.decoding.guards`):
models in training mode run in eval mode for the call (with a warning; their mode is restored),
a draft source's proposal of other shapes than asked raises, and the slow verifiers
(``optimal_multidraft``, ``near_opt_bv``) warn with an estimated cost on a large vocabulary.

References
----------
Leviathan et al. 2023; Chen et al. 2023; Sun et al. 2023 (SpecTr); Sun et al. 2024 (block
verification); Lin et al. 2026 (SpecTr-GBV, arXiv 2604.25925); THEORY.md sections 1-3, 6.
"""

from __future__ import annotations

import reprlib
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from typing import TYPE_CHECKING, Any

import torch

from spectr_gbv.core.methods import is_registered, method_hint, method_spec, methods_where
from spectr_gbv.core.progress import NullProgress, ProgressBar, progress
from spectr_gbv.gpu.decoding.cache import RowCache, model_vocab_size
from spectr_gbv.gpu.decoding.draft_sources import DraftSource, HFDraftSource
from spectr_gbv.gpu.decoding.guards import SlowMethodWarning, check_proposal, eval_mode, slow_method_note
from spectr_gbv.gpu.decoding.sampling import SamplingConfig, process_logits, sample_from
from spectr_gbv.gpu.decoding.stats import DecodeStats, timed
from spectr_gbv.gpu.decoding.tree import TokenTree

if TYPE_CHECKING:
    from spectr_gbv.gpu.kernels.rules import KernelRule

#: Device types a decoder runs on (each only when its backend reports itself available).
DEVICE_TYPES: tuple[str, ...] = ("cpu", "cuda", "mps", "xpu")
#: Config attributes read as a model's context size (positions it has embeddings for).
CONTEXT_ATTRS: tuple[str, ...] = ("n_positions", "max_position_embeddings")

#: Lossless decoding methods: the table's lossless methods with a torch kernel (``ar`` needs no draft).
LOSSLESS_METHODS: tuple[str, ...] = methods_where(lossless=True, kernel=True)
#: Lossy methods with a torch kernel, accepted only with ``allow_lossy=True``.
LOSSY_METHODS: tuple[str, ...] = methods_where(lossless=False, kernel=True)
#: Single-draft methods (the table's ``drafts == "one"`` with a kernel): they require ``num_drafts == 1``.
SINGLE_DRAFT_METHODS: tuple[str, ...] = methods_where(kernel=True, drafts="one")
#: How the target scores the K drafts: ``auto`` (a token tree when the models pass the
#: tree-attention probe, else flat), ``tree`` (required) or ``flat`` (one row per draft).
SCORING_MODES: tuple[str, ...] = ("auto", "tree", "flat")
#: Seconds a :meth:`~spectr_gbv.gpu.decoding.decoder.SpeculativeDecoder.generate` call with
#: ``progress=None`` runs before its bar appears (on a terminal): calls shorter than this print nothing.
PROGRESS_DELAY: float = 2.0


def _progress_bar(show: bool | None, total: int) -> ProgressBar:
    """The bar of one :meth:`SpeculativeDecoder.generate` call (see its ``progress`` argument).

    Parameters
    ----------
    show : bool or None
        ``None``: :func:`spectr_gbv.core.progress.progress`'s rules (a terminal, not silenced),
        appearing after :data:`PROGRESS_DELAY` seconds; ``True``: a bar on stderr from the start;
        ``False``: none.
    total : int
        Tokens to generate over all rows (``B * max_new_tokens``).

    Returns
    -------
    ProgressBar
        A ``tqdm.tqdm`` bar on ``sys.stderr`` (cleared when closed), or a
        :class:`~spectr_gbv.core.progress.NullProgress`.
    """
    if show is False:
        return NullProgress()
    return progress(total, "generate", unit="tok", delay=PROGRESS_DELAY if show is None else 0.0, force=show is True)


def _kernel_verify() -> Callable[..., Any]:
    """``spectr_gbv.gpu.kernels.verify``, imported on first use (kept out of module import)."""
    from spectr_gbv.gpu.kernels import verify

    return verify


def _user_rule(method: Any) -> KernelRule:
    """The :class:`~spectr_gbv.gpu.kernels.rules.KernelRule` of a method that is not a registered kernel method.

    Raises
    ------
    ValueError
        An unknown plain name or a table method without a torch kernel ("unknown method ...";
        the message lists the decoder's methods and the ``module:attribute`` form), or any
        refusal of :func:`~spectr_gbv.gpu.kernels.rules.resolve_kernel_rule`.
    """
    from spectr_gbv.reference.registry import available_methods

    if isinstance(method, str) and ":" not in method and (is_registered(method) or method not in available_methods()):
        why = " (registered without a torch kernel)" if is_registered(method) else method_hint(method)
        raise ValueError(
            f"unknown method {method!r}{why}; valid: {', '.join(LOSSLESS_METHODS + LOSSY_METHODS)}, "
            "or 'module:attribute' naming your own rule"
        )
    from spectr_gbv.gpu.kernels.rules import resolve_kernel_rule

    return resolve_kernel_rule(method)


@dataclass(frozen=True)
class DecoderConfig:
    """Configuration of a :class:`SpeculativeDecoder`.

    Attributes
    ----------
    method : str or rule
        One of :data:`LOSSLESS_METHODS`, or :data:`LOSSY_METHODS` with ``allow_lossy``; or a
        user's rule (:mod:`spectr_gbv.gpu.kernels.rules`): ``"module:attribute"``, a name added
        with :func:`~spectr_gbv.reference.registry.register`, a torch rule
        ``rule(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput``, or a reference
        rule (a ``Verifier`` or a generic ``fn(drafts, draft_probs, target_probs, rng)``, run
        on the CPU one batch row at a time: slow). A rule declaring ``lossless = False``
        needs ``allow_lossy``.
    num_drafts : int
        K >= 1 (must be 1 for the single-draft methods :data:`SINGLE_DRAFT_METHODS`; ignored
        by ``ar``).
    draft_length : int
        L >= 1; ``ar`` drafts nothing: 0 (its grid shape, :meth:`~spectr_gbv.core.methods.MethodSpec.grid_shape`)
        or any L, which it ignores.
    sampling : SamplingConfig
        Processing shared by target and draft.
    seed : int or None
        Seed of the decoder's ``torch.Generator`` (drafting and verification), an int in
        ``0..2**64 - 1`` (the range of ``torch.Generator.manual_seed``, which would alias a
        negative seed to ``2**64 - 1 + seed``); ``None`` uses the global RNG.
    allow_lossy : bool
    scoring : str
        One of :data:`SCORING_MODES`: ``"auto"`` (default) scores the K drafts as a token tree
        (each distinct prefix once, one forward with a 4-D ancestor mask) when K > 1 and the
        target passes :func:`~spectr_gbv.gpu.decoding.tree_support.supports_tree_attention`,
        else flat (K batch rows of ``L + 1`` positions); ``"tree"`` requires the tree;
        ``"flat"`` never builds one. The same choice applies to drafting with a model draft.
    rule : KernelRule or None
        Set by the checks: the resolved user's rule
        (:func:`~spectr_gbv.gpu.kernels.rules.resolve_kernel_rule`), None for a registered
        kernel method. :attr:`method_name` is the label decoder stats carry.

    Raises
    ------
    ValueError
        Unknown method or a bad rule (one line naming ``method``), a lossy method or rule
        without ``allow_lossy``, K < 1, L < 1 (L < 0 for ``ar``), K != 1 for a single-draft
        method, a seed that is not None or an int in ``0..2**64 - 1``, an
        unknown ``scoring``.
    """

    method: Any = "mdbv"
    num_drafts: int = 2
    draft_length: int = 3
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    seed: int | None = None
    allow_lossy: bool = False
    scoring: str = "auto"
    rule: KernelRule | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = self.method
        registered = isinstance(m, str) and m in LOSSLESS_METHODS + LOSSY_METHODS
        if registered and m in LOSSY_METHODS and not self.allow_lossy:
            raise ValueError(
                f"method {m!r} is lossy (its output does not follow the target law; THEORY.md 6a); "
                "pass allow_lossy=True to run it anyway"
            )
        if not registered:
            rule = _user_rule(m)
            if rule.lossless_claimed is False and not self.allow_lossy:
                raise ValueError(rule.lossy_refusal())
            object.__setattr__(self, "rule", rule)
        no_draft = registered and method_spec(m).drafts == "none"
        for name, low in (("num_drafts", 1), ("draft_length", 0 if no_draft else 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
        if m in SINGLE_DRAFT_METHODS and self.num_drafts != 1:
            raise ValueError(f"method {m!r} verifies a single draft; use num_drafts=1 (got {self.num_drafts})")
        s = self.seed
        if s is not None and (isinstance(s, bool) or not isinstance(s, Integral) or not 0 <= s < 2**64):
            raise ValueError(f"seed must be None or an int in 0..2**64 - 1, got {reprlib.repr(s)}")
        if self.scoring not in SCORING_MODES:
            raise ValueError(f"scoring must be one of {', '.join(SCORING_MODES)}, got {reprlib.repr(self.scoring)}")

    @property
    def method_name(self) -> str:
        """The method's label: its name, or the user's rule's (``module:attribute`` / ``module:qualname``)."""
        return self.method if self.rule is None else self.rule.name

    @property
    def kernel_method(self) -> Any:
        """What the decoder passes to :func:`~spectr_gbv.gpu.kernels.verify`: the name, or the resolved rule."""
        return self.method if self.rule is None else self.rule


def check_device(device: str | torch.device | int | None) -> torch.device:
    """The torch device a decoder runs on, refusing devices that cannot run it.

    Parameters
    ----------
    device : str, torch.device, int or None
        ``None``: CUDA when available, else CPU. A device string (``'cpu'``, ``'cuda'``,
        ``'cuda:1'``, ...), a ``torch.device`` or a CUDA index.

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        Not a torch device (e.g. ``'gpu'``), a type outside :data:`DEVICE_TYPES` (e.g.
        ``'meta'``, which holds no data), a backend that is not available (``'cuda'`` without
        a GPU) or a CUDA index >= ``torch.cuda.device_count()``.
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(device, bool) or not isinstance(device, str | torch.device | int):
        raise ValueError(f"device must be None, a str, a torch.device or an int, got {type(device).__name__}")
    if isinstance(device, int):
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} is a CUDA index, but no CUDA GPU is available; use device='cpu'")
        device = f"cuda:{device}"
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError, TypeError) as e:
        raise ValueError(
            f"device={device!r} is not a torch device; use one of {', '.join(DEVICE_TYPES)} (e.g. 'cuda:0')"
        ) from e
    if dev.type not in DEVICE_TYPES:
        raise ValueError(
            f"device={device!r}: the decoder runs on {', '.join(DEVICE_TYPES)}, not {dev.type!r}"
            + (" (a meta tensor holds no data)" if dev.type == "meta" else "")
        )
    if dev.type != "cpu":
        backend = getattr(torch, dev.type, None)
        if backend is None or not backend.is_available():
            raise ValueError(
                f"device={device!r}, but no {dev.type} device is available "
                f"(torch.{dev.type}.is_available() is False); use device='cpu' or None"
            )
        count = backend.device_count() if hasattr(backend, "device_count") else 1
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"device={device!r}, but only {count} {dev.type} device(s) are available")
    return dev


def context_size(model: object) -> int | None:
    """Positions a model has embeddings for: the first int of :data:`CONTEXT_ATTRS` in its config.

    Parameters
    ----------
    model : transformers PreTrainedModel or any object
        ``None`` when it has no ``config`` or the config names no context size.

    Returns
    -------
    int or None
    """
    found = _context_attr(model)
    return None if found is None else found[1]


def _context_attr(model: object) -> tuple[str, int] | None:
    """(config attribute, context size) of :func:`context_size`."""
    config = getattr(model, "config", None)
    for name in CONTEXT_ATTRS:
        v = getattr(config, name, None)
        if isinstance(v, Integral) and not isinstance(v, bool) and v > 0:
            return name, int(v)
    return None


class SpeculativeDecoder:
    """Multi-draft speculative decoder over a target causal LM.

    Parameters
    ----------
    target : transformers PreTrainedModel
        Causal LM p (full attention; ``eager`` or ``sdpa`` attention when B > 1).
    draft : PreTrainedModel or DraftSource or None
        Draft q (a model is wrapped in :class:`HFDraftSource`); ``None`` only for ``ar``.
    method, num_drafts, draft_length, allow_lossy, scoring
        See :class:`DecoderConfig`. ``method`` may be a user's rule: ``"module:attribute"``,
        a torch rule with the kernel signature ``rule(inputs: KernelInputs, uniforms:
        UniformSource) -> VerifyOutput`` (:mod:`spectr_gbv.gpu.kernels.common`), or a
        reference rule (``Verifier`` or generic function; slow: a CPU loop per batch row).
    temperature, top_k, top_p
        See :class:`~spectr_gbv.gpu.decoding.sampling.SamplingConfig` (temperature 0 = greedy).
    seed : int, optional
        In ``0..2**64 - 1``.
    device : str or torch.device, optional
        Default CUDA when available, else CPU (checked by :func:`check_device`). Models are
        moved there only once every argument is checked; their train/eval mode is left as it
        is (:meth:`generate` runs them in eval mode and restores it).

    Raises
    ------
    ValueError
        Invalid configuration (see :class:`DecoderConfig`), an unavailable device (see
        :func:`check_device`), a target that is not a ``torch.nn.Module``, a missing draft, or
        target and draft vocabularies of different sizes.

    Warns
    -----
    SlowMethodWarning
        ``optimal_multidraft`` or ``near_opt_bv`` with a vocabulary above
        :data:`~spectr_gbv.gpu.decoding.guards.SLOW_METHOD_VOCAB` (4,096): the message gives the
        estimated seconds per verification call
        (:func:`~spectr_gbv.gpu.decoding.guards.slow_method_note`).
    UnverifiedRuleWarning
        A user's rule without a ``lossless`` attribute: its output law is unchecked; the
        message names the law test (:data:`~spectr_gbv.gpu.kernels.rules.LAW_TEST`).

    References
    ----------
    THEORY.md sections 1-3 and 6; ECOSYSTEM.md B2-B5 (processing, exact q, vocabulary range).

    Examples
    --------
    >>> import torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> cfg = LlamaConfig(vocab_size=8, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
    ...                   num_attention_heads=2, num_key_value_heads=1)
    >>> _ = torch.manual_seed(0); target = LlamaForCausalLM(cfg).eval()
    >>> _ = torch.manual_seed(1); draft = LlamaForCausalLM(cfg).eval()
    >>> dec = SpeculativeDecoder(target, draft, method="mdbv", num_drafts=2, draft_length=3, seed=0,
    ...                          device="cpu")
    >>> ids, stats = dec.generate([1, 2, 3], max_new_tokens=10)
    >>> ids.shape, stats.tokens_generated, sum(stats.accepted_hist) == stats.iterations
    (torch.Size([13]), 10, True)
    """

    def __init__(
        self,
        target: torch.nn.Module,
        draft: torch.nn.Module | DraftSource | None,
        method: Any = "mdbv",
        num_drafts: int = 2,
        draft_length: int = 3,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        device: str | torch.device | None = None,
        allow_lossy: bool = False,
        scoring: str = "auto",
    ) -> None:
        sampling = SamplingConfig(temperature, top_k, top_p)
        self.config = DecoderConfig(method, num_drafts, draft_length, sampling, seed, allow_lossy, scoring)
        self.device = check_device(device)
        if not isinstance(target, torch.nn.Module):
            raise ValueError(f"target must be a causal LM (a torch.nn.Module), got {type(target).__name__}")
        self.vocab_size = model_vocab_size(target)
        name = self.config.method_name
        if draft is None and method != "ar":
            raise ValueError(f"method {name!r} needs a draft model or DraftSource (only 'ar' runs without)")
        is_model = isinstance(draft, torch.nn.Module)
        if draft is not None and not is_model and not isinstance(draft, DraftSource):
            raise ValueError(f"draft must be a causal LM or a DraftSource, got {type(draft).__name__}")
        draft_vocab = model_vocab_size(draft) if is_model else None if draft is None else draft.vocab_size
        if draft is not None and draft_vocab != self.vocab_size:
            raise ValueError(
                f"vocabulary mismatch: the target has {self.vocab_size} logits, the draft {draft_vocab}; "
                "speculative decoding needs one shared vocabulary"
            )
        # every argument is checked: only now move the models (a refused call leaves them as they were);
        # their train/eval mode is the caller's: generate() runs them in eval mode and restores it
        self.target = target.to(self.device)
        tree = {"auto": None, "tree": True, "flat": False}[scoring]
        self.draft = HFDraftSource(draft.to(self.device), tree=tree) if is_model else draft
        self.generator = None
        if seed is not None:
            self.generator = torch.Generator(device=self.device).manual_seed(int(seed))
        self._verify_fn: Callable[..., Any] | None = None
        note = slow_method_note(name, self.vocab_size, num_drafts, draft_length)
        if note is not None:
            warnings.warn(note, SlowMethodWarning, stacklevel=2)
        rule = self.config.rule
        if rule is not None and rule.lossless_claimed is None:
            from spectr_gbv.gpu.kernels.rules import UnverifiedRuleWarning

            warnings.warn(rule.unverified_note(), UnverifiedRuleWarning, stacklevel=2)

    # ------------------------------------------------------------------ the loop
    @torch.no_grad()
    def generate(
        self,
        prompt_ids: torch.Tensor | Sequence[int] | Sequence[Sequence[int]],
        max_new_tokens: int,
        progress: bool | None = None,
    ) -> tuple[torch.Tensor, DecodeStats]:
        """Generate exactly ``max_new_tokens`` tokens after each prompt.

        Parameters
        ----------
        prompt_ids : Tensor [T] or [B, T], integer (or nested sequences of int)
            T >= 1 ids in ``0..V-1``; a 2-D input runs B independent rows (same T: a ragged
            batch is refused, pad it or run the rows separately). Text (``str``) is refused:
            tokenize it first.
        max_new_tokens : int
            N >= 1. With the draft length L (0 for ``ar``) the target model sees up to
            ``T + N + L - 1`` positions (the last iteration may draft past the N-th token) and
            the draft model ``T + N + L - 2``; each must be <= the model's context size
            (:func:`context_size`, from ``config.max_position_embeddings`` / ``n_positions``).
        progress : bool or None
            A progress bar on stderr (tokens generated out of ``B * N``, with the block efficiency
            so far); nothing is ever written to stdout. ``None`` (default): shown when stderr is a
            terminal and bars are not silenced (:func:`spectr_gbv.core.progress.progress`:
            ``SPECTR_GBV_QUIET``, the CLI's ``--quiet``), and only once the call has run
            :data:`~spectr_gbv.gpu.decoding.decoder.PROGRESS_DELAY` seconds, so short calls print
            nothing. ``True``: always shown from the start (on stderr, a terminal or not).
            ``False``: never.

        Returns
        -------
        token_ids : Tensor [T + N] or [B, T + N], int64 (on the decoder's device)
            Prompt followed by the N new tokens (same dimensionality as ``prompt_ids``).
        stats : DecodeStats

        Raises
        ------
        ValueError
            Bad prompt (not token ids, ragged, shape, dtype, empty, ids out of range),
            ``max_new_tokens`` or ``progress`` (not a bool or None); a run longer than the
            target's or the draft's context size (the message names the prompt length,
            ``max_new_tokens``, ``draft_length`` and the context size); a draft source's
            ``propose`` returned drafts or laws of another shape than asked
            (:func:`~spectr_gbv.gpu.decoding.guards.check_proposal`: the message names the source
            and both numbers, e.g. "returned 1 draft per row (drafts of shape (2, 1, 3)), asked for
            num_drafts = 4").
        RuntimeError
            The verifier returned ids outside the vocabulary or output inconsistent with the
            drafts (ECOSYSTEM.md B5-B8: a numerical fault is raised, never emitted).

        Warns
        -----
        TrainingModeWarning
            The target or draft model (or a submodule) was in training mode: the call runs it
            in eval mode, restoring each submodule's mode afterwards
            (:func:`~spectr_gbv.gpu.decoding.guards.eval_mode`), so dropout never changes the
            laws decoded.
        """
        prompt, squeeze = self._check_prompt(prompt_ids)
        N = self._check_max_new(max_new_tokens)
        if progress is not None and not isinstance(progress, bool):
            raise ValueError(f"progress must be True, False or None, got {progress!r}")
        L = 0 if self.config.method == "ar" else self.config.draft_length
        self._check_context(prompt.shape[1], N, L)
        draft_model = self._draft_module() if L else None
        bar = _progress_bar(progress, prompt.shape[0] * N)
        try:
            with eval_mode({"target": self.target, "draft": draft_model}, "SpeculativeDecoder.generate"):
                return self._generate(prompt, squeeze, N, L, bar)
        finally:
            bar.close()

    def _generate(
        self, prompt: torch.Tensor, squeeze: bool, N: int, L: int, bar: ProgressBar | None = None
    ) -> tuple[torch.Tensor, DecodeStats]:
        """The loop of :meth:`generate` (arguments checked, models in eval mode; ``bar`` advanced per token)."""
        cfg, dev = self.config, self.device
        B = prompt.shape[0]
        self._tree = L > 0 and self._choose_tree(B)
        stats = DecodeStats(cfg.method_name, 1 if L == 0 else cfg.num_drafts, L, B)
        stats.scoring = "" if L == 0 else "tree" if self._tree else "flat"
        draft_positions = self.draft.positions if L and self.draft is not None else 0
        start = time.perf_counter()
        out = torch.full((B, N + L + 1), -1, dtype=torch.int64, device=dev)
        rows = torch.arange(B, device=dev)  # original index of each active row
        active_rows = list(range(B))  # the same, on the host
        generated = [0] * B  # tokens written per original row, on the host (no sync to find finished rows)
        tcache, pending = self._prefill(prompt, stats)
        step = self._ar_step if L == 0 else self._speculative_step
        while rows.numel():
            emitted, tau = step(tcache, pending, stats)  # [R, L+1] (-1 padded), [R]
            taus = stats.record(tau)
            offsets = torch.tensor([generated[r] for r in active_rows], dtype=torch.int64, device=dev)
            pos = offsets[:, None] + torch.arange(L + 1, device=dev)
            keep = torch.arange(L + 1, device=dev)[None] <= tau[:, None]
            out[rows[:, None].expand_as(pos)[keep], pos[keep]] = emitted[keep]
            pending = emitted.gather(1, tau[:, None]).squeeze(1)
            done = 0
            for i, t in enumerate(taus):
                done += min(t + 1, N - generated[active_rows[i]])
                generated[active_rows[i]] += t + 1
            if bar is not None:
                bar.set_postfix_str(f"BE {stats.block_efficiency:.2f}", refresh=False)
                bar.update(done)
            still = [i for i, r in enumerate(active_rows) if generated[r] < N]
            if len(still) < len(active_rows):  # drop finished rows from every batch
                active = torch.tensor(still, dtype=torch.int64, device=dev)
                active_rows = [active_rows[i] for i in still]
                rows, pending = rows[active], pending[active]
                tcache.select(active)
                if L:
                    self.draft.select_rows(active)
        stats.tokens_generated = B * N
        if L:
            stats.draft_positions = self.draft.positions - draft_positions
        stats.time_total = time.perf_counter() - start
        tokens = torch.cat([prompt, out[:, :N]], dim=1)
        return (tokens[0] if squeeze else tokens), stats

    def _choose_tree(self, B: int) -> bool:
        """Tree scoring for this run? (``scoring`` and the probe; see :class:`DecoderConfig`.)

        Raises
        ------
        ValueError
            ``scoring='tree'`` with a target that fails the tree-attention probe; a batch
            (B > 1) with a target or draft model that fails it (rows of different accepted
            lengths share a forward only through custom 4-D masks).
        """
        from spectr_gbv.gpu.decoding.tree_support import supports_tree_attention, tree_attention_refusal

        cfg = self.config
        draft_model = self._draft_module()
        wanted = cfg.num_drafts > 1 and cfg.scoring != "flat"
        if not wanted and B == 1:
            return False
        ok = supports_tree_attention(self.target)
        if cfg.scoring == "tree" and not ok:
            raise ValueError(
                f"scoring='tree', but {tree_attention_refusal(self.target, 'target')}; use scoring='auto' or 'flat'"
            )
        if B > 1:
            for role, model in (("target", self.target), ("draft", draft_model)):
                if model is not None and not supports_tree_attention(model):
                    raise ValueError(
                        f"prompt_ids: a batch of {B} rows needs custom 4-D attention masks (rows accept "
                        f"different lengths), but {tree_attention_refusal(model, role)}; run the prompts one at a time"
                    )
        return wanted and ok

    def _prefill(self, prompt: torch.Tensor, stats: DecodeStats) -> tuple[RowCache, torch.Tensor]:
        """Cache every prompt token but the last (which is pending) in target and draft (no logits needed)."""
        tcache = RowCache(prompt.shape[0], self.device)
        with timed(stats, "time_target", self.device):
            if prompt.shape[1] > 1:
                tcache.forward(self.target, prompt[:, :-1], logits_to_keep=1)
                stats.prefill_calls += 1
        if stats.draft_length:
            with timed(stats, "time_draft", self.device):
                calls = self.draft.forward_calls
                self.draft.begin(prompt)
                stats.draft_calls += self.draft.forward_calls - calls
        return tcache, prompt[:, -1]

    def _target_laws(self, logits: torch.Tensor) -> torch.Tensor:
        """Target laws p from target logits: the same processing as the draft side."""
        return process_logits(logits, self.config.sampling)

    def _ar_step(
        self, tcache: RowCache, pending: torch.Tensor, stats: DecodeStats
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Plain sampling: one target call, one token per row (tau = 0)."""
        with timed(stats, "time_target", self.device):
            p = self._target_laws(tcache.forward(self.target, pending[:, None])[:, -1])
            stats.target_positions += pending.shape[0]
        with timed(stats, "time_verify", self.device):
            z = sample_from(p, self.generator)
        return z[:, None], torch.zeros_like(z)

    def _speculative_step(
        self, tcache: RowCache, pending: torch.Tensor, stats: DecodeStats
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draft, score in one target forward, verify, roll both caches back to the accepted path."""
        cfg, dev = self.config, self.device
        K, L = cfg.num_drafts, cfg.draft_length
        with timed(stats, "time_draft", dev):
            calls = self.draft.forward_calls
            drafts, q = self.draft.propose(K, L, cfg.sampling, self.generator)
            check_proposal(self.draft, drafts, q, pending.shape[0], K, L, self.vocab_size)
            drafts, q = drafts.to(dev), q.to(dev)
        with timed(stats, "time_target", dev):
            score = self._score_tree if self._tree else self._score_flat
            p, keep_path = score(tcache, pending, drafts, stats)
        with timed(stats, "time_verify", dev):
            res = self._verify(cfg.kernel_method, drafts, q, p, generator=self.generator, allow_lossy=cfg.allow_lossy)
            fields = ("tokens", "num_accepted", "draft_index")
            if cfg.rule is not None and not all(isinstance(getattr(res, a, None), torch.Tensor) for a in fields):
                raise RuntimeError(f"verify({cfg.method_name!r}) returned {type(res).__name__}, not a VerifyOutput")
            emitted, tau, index = res.tokens.to(dev), res.num_accepted.to(dev), res.draft_index.to(dev)
            self._check_output(drafts, emitted, tau, index)
        with timed(stats, "time_target", dev):
            keep_path(index, tau)
        with timed(stats, "time_draft", dev):
            self.draft.commit(index, tau, emitted.gather(1, tau[:, None]).squeeze(1))
            stats.draft_calls += self.draft.forward_calls - calls
        return emitted, tau

    def _score_tree(
        self, tcache: RowCache, pending: torch.Tensor, drafts: torch.Tensor, stats: DecodeStats
    ) -> tuple[torch.Tensor, Callable[[torch.Tensor, torch.Tensor], None]]:
        """One target forward over each row's distinct prefixes (a token tree rooted at the pending token).

        Returns ``p [R, K, L+1, V]`` gathered from the nodes' laws (drafts sharing a prefix
        share its row exactly) and the function that keeps the accepted path in the cache.
        """
        R = drafts.shape[0]
        tree = TokenTree.from_drafts(drafts, root_tokens=pending)
        start = tcache.physical_length
        positions = tcache.lengths[:, None] + tree.depths()
        logits = tcache.forward_masked(self.target, tree.tokens(), tree.valid(), positions, tree.ancestors(), start)
        stats.target_positions += tree.num_valid
        nodes = tree.node_index()  # [R, K, L+1]
        rows = torch.arange(R, device=drafts.device)
        p = self._target_laws(logits)[rows[:, None, None], nodes]

        def keep_path(index: torch.Tensor, tau: torch.Tensor) -> None:
            tcache.keep_slots(start, nodes[rows, index], tau + 1)  # the root, then the accepted nodes

        return p, keep_path

    def _score_flat(
        self, tcache: RowCache, pending: torch.Tensor, drafts: torch.Tensor, stats: DecodeStats
    ) -> tuple[torch.Tensor, Callable[[torch.Tensor, torch.Tensor], None]]:
        """One target forward on ``R * K`` rows of ``L + 1`` positions (the fallback; K = 1 always)."""
        R, K, L = drafts.shape
        base = tcache.lengths
        tcache.repeat(K)
        tokens = torch.cat([pending.repeat_interleave(K)[:, None], drafts.reshape(R * K, L)], dim=1)
        p = self._target_laws(tcache.forward(self.target, tokens)).view(R, K, L + 1, -1)
        stats.target_positions += R * K * (L + 1)

        def keep_path(index: torch.Tensor, tau: torch.Tensor) -> None:
            tcache.select(torch.arange(R, device=drafts.device) * K + index)
            tcache.truncate(base + 1 + tau)

        return p, keep_path

    # ------------------------------------------------------------------ checks
    @property
    def _verify(self) -> Callable[..., Any]:
        if self._verify_fn is None:
            self._verify_fn = _kernel_verify()
        return self._verify_fn

    def _check_output(
        self, drafts: torch.Tensor, emitted: torch.Tensor, tau: torch.Tensor, index: torch.Tensor
    ) -> None:
        """Contract of the kernel output (cheap tensor checks; raise instead of emitting garbage)."""
        R, K, L = drafts.shape
        m = self.config.method_name
        if emitted.shape != (R, L + 1) or tau.shape != (R,) or index.shape != (R,):
            raise RuntimeError(
                f"verify({m!r}) returned shapes tokens {tuple(emitted.shape)}, num_accepted "
                f"{tuple(tau.shape)}, draft_index {tuple(index.shape)}; expected [{R}, {L + 1}], [{R}], [{R}]"
            )
        cols = torch.arange(L + 1, device=emitted.device)[None]
        range_bad = ((tau < 0) | (tau > L) | (index < 0) | (index >= K)).any()
        used = cols <= tau[:, None]
        vocab_bad = (((emitted < 0) | (emitted >= self.vocab_size)) & used).any()
        chosen = drafts[torch.arange(R, device=drafts.device), index.clamp(0, K - 1)]  # [R, L]
        prefix = cols[:, :L] < tau[:, None]
        prefix_bad = ((emitted[:, :L] != chosen) & prefix).any()
        range_bad, vocab_bad, prefix_bad = torch.stack([range_bad, vocab_bad, prefix_bad]).tolist()  # one sync
        if range_bad:
            raise RuntimeError(f"verify({m!r}) returned num_accepted outside 0..{L} or draft_index outside 0..{K - 1}")
        if vocab_bad:
            raise RuntimeError(
                f"verify({m!r}) emitted a token id outside 0..{self.vocab_size - 1} "
                "(NaN or degenerate laws? see ECOSYSTEM.md B5/B6)"
            )
        if prefix_bad:
            raise RuntimeError(f"verify({m!r}): the accepted prefix is not a prefix of draft draft_index")

    def _draft_module(self) -> torch.nn.Module | None:
        """The draft source's ``model`` (None without a draft, or when it is not a ``torch.nn.Module``)."""
        model = self.draft.model if self.draft is not None else None
        return model if isinstance(model, torch.nn.Module) else None

    def _check_context(self, T: int, N: int, L: int) -> None:
        """Refuse a run that would feed a model more positions than its context size."""
        draft_model = self._draft_module() if L else None
        for role, model, need in (("target", self.target, T + N + L - 1), ("draft", draft_model, T + N + L - 2)):
            found = _context_attr(model)
            if found is not None and need > found[1]:
                drafted = f" + draft_length {L}" if L else ""
                raise ValueError(
                    f"prompt_ids: prompt length {T} + max_new_tokens {N}{drafted} needs {need} positions of the "
                    f"{role} model, more than its context size {found[1]} (config.{found[0]}); shorten the "
                    "prompt or lower max_new_tokens" + (" or draft_length" if L else "")
                )

    def _check_prompt(self, prompt_ids: Any) -> tuple[torch.Tensor, bool]:
        x = _prompt_tensor(prompt_ids)
        if x.ndim not in (1, 2):
            raise ValueError(f"prompt_ids must have shape [T] or [B, T] with B, T >= 1, got {tuple(x.shape)}")
        if x.numel() == 0:
            raise ValueError(
                f"prompt_ids is empty (shape {tuple(x.shape)}): every row needs at least one token to "
                "condition on (e.g. the tokenizer's BOS id)"
            )
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
            raise ValueError(f"prompt_ids must hold integer token ids, got dtype {x.dtype}")
        if bool(((x < 0) | (x >= self.vocab_size)).any()):
            raise ValueError(f"prompt_ids holds an id outside the vocabulary 0..{self.vocab_size - 1}")
        squeeze = x.ndim == 1
        return x.reshape(-1, x.shape[-1]).to(device=self.device, dtype=torch.int64), squeeze

    @staticmethod
    def _check_max_new(max_new_tokens: Any) -> int:
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, Integral) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
        return int(max_new_tokens)


def _prompt_tensor(prompt_ids: Any) -> torch.Tensor:
    """``prompt_ids`` as a tensor, refusing text, ragged batches and other non-id input with our message."""
    if isinstance(prompt_ids, torch.Tensor):
        return prompt_ids
    what = "a Tensor [T] or [B, T] of token ids, a list of ints or a list of equal-length lists of ints"
    if isinstance(prompt_ids, str | bytes | bytearray):
        raise ValueError(
            f"prompt_ids must be token ids ({what}), got {type(prompt_ids).__name__}; tokenize the text first"
        )
    if isinstance(prompt_ids, Sequence) and len(prompt_ids) > 1:
        rows = [r for r in prompt_ids if isinstance(r, Sequence) and not isinstance(r, str | bytes | bytearray)]
        if len(rows) == len(prompt_ids) and len({len(r) for r in rows}) > 1:
            lengths = [len(r) for r in rows]
            shown = ", ".join(map(str, lengths[:8])) + (", ..." if len(lengths) > 8 else "")
            raise ValueError(
                f"prompt_ids is a ragged batch (row lengths {shown}): every row of a batch needs the same "
                "length T; pad the prompts to one length or run them separately"
            )
    try:
        return torch.as_tensor(prompt_ids)
    except (TypeError, ValueError, RuntimeError, OverflowError) as e:
        raise ValueError(f"prompt_ids must be {what}; got {type(prompt_ids).__name__} ({e})") from e
