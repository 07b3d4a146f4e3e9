r"""Run-time guards of the decoder against faults that would otherwise decode wrongly and silently.

Three faults of a decoding call that no argument check sees:

* a model left in training mode: dropout (and any other train-time behaviour) makes its laws
  random functions of the context, so the target law the output follows is not the model's
  law (a tiny Llama pair with attention dropout 0.5 decoded its first 3 tokens at total
  variation 0.31 from it).
  :func:`eval_mode` runs the models in eval mode for the call, warns once per call with
  :class:`TrainingModeWarning` naming the model, and restores every submodule's mode after;
* a :class:`~spectr_gbv.gpu.decoding.draft_sources.DraftSource` returning drafts or laws of
  other shapes than asked for (1 draft when asked for 4 was verified as K = 1 and reported as
  K = 4): :func:`check_proposal` raises ``ValueError`` naming the source and both numbers;
* a verifier whose per-node rule sorts and peels full vocabulary rows (``optimal_multidraft``,
  ``near_opt_bv``) on a large vocabulary: seconds to minutes per verification call.
  :func:`slow_method_note` gives the estimate that the decoder warns with
  (:class:`SlowMethodWarning`) and ``spectr-gbv bench`` prints.

References
----------
PyTorch ``torch.nn.Module.eval`` (dropout is active in training mode); THEORY.md section 1
(p and q are the models' next-token laws); docs/decoder.md, "Decoder faults".
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch

#: Methods whose per-node rule sorts and peels full vocabulary rows; their cost grows faster than V.
SLOW_METHODS: tuple[str, ...] = ("optimal_multidraft", "near_opt_bv")
#: Above this vocabulary size the decoder warns when one of :data:`SLOW_METHODS` is used.
SLOW_METHOD_VOCAB = 4096
#: Per-call cost model of :data:`SLOW_METHODS`: (seconds per drafted node at V = 8,192, exponent of V).
#: Fitted to one kernel call (B = 1, K = 3, L = 4, dense softmax rows as in ``bench/kernel_overhead.py``,
#: one CPU thread) at V = 2,048, 4,096 and 8,192: ``optimal_multidraft`` 0.63, 1.73, 5.70 s,
#: ``near_opt_bv`` 1.12, 1.90, 4.55 s. Top-k / top-p, which shrink the support, make calls cheaper.
SLOW_METHOD_COST: dict[str, tuple[float, float]] = {
    "optimal_multidraft": (0.47, 1.7),
    "near_opt_bv": (0.38, 1.3),
}
_COST_REFERENCE_VOCAB = 8192


class TrainingModeWarning(UserWarning):
    """A model was in training mode; the decoder ran it in eval mode for the call (:func:`eval_mode`)."""


class SlowMethodWarning(UserWarning):
    """A verifier of :data:`SLOW_METHODS` on a vocabulary above :data:`SLOW_METHOD_VOCAB` (:func:`slow_method_note`)."""


def training_submodules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The submodules of ``model`` (itself included) in training mode.

    Parameters
    ----------
    model : torch.nn.Module

    Returns
    -------
    list of torch.nn.Module
        Empty when the whole model is in eval mode.
    """
    return [m for m in model.modules() if m.training]


@contextmanager
def eval_mode(models: Mapping[str, torch.nn.Module | None], caller: str) -> Iterator[None]:
    """Run ``models`` in eval mode inside the block; restore each submodule's mode after it.

    Parameters
    ----------
    models : mapping role -> torch.nn.Module or None
        E.g. ``{"target": target, "draft": draft}``; ``None`` entries are skipped, and a
        model listed under two roles is handled once.
    caller : str
        Named in the warning (e.g. ``"SpeculativeDecoder.generate"``).

    Yields
    ------
    None

    Warns
    -----
    TrainingModeWarning
        Once per block, when any model had a submodule in training mode, naming the role and
        class of each such model.

    Notes
    -----
    Only the submodules that were in training mode are switched, and exactly those are
    switched back (also when the block raises), so a caller's mixed modes survive.
    """
    switched: list[torch.nn.Module] = []
    named: list[str] = []
    seen: set[int] = set()
    for role, model in models.items():
        if model is None or id(model) in seen:
            continue
        seen.add(id(model))
        training = training_submodules(model)
        if training:
            named.append(f"the {role} model {type(model).__name__}")
            switched.extend(training)
    if named:
        warnings.warn(
            f"{' and '.join(named)} {'is' if len(named) == 1 else 'are'} in training mode (dropout would "
            f"change the laws decoded); {caller} runs {'it' if len(named) == 1 else 'them'} in eval mode "
            "and restores the mode afterwards",
            TrainingModeWarning,
            stacklevel=3,
        )
    for m in switched:
        m.training = False
    try:
        yield
    finally:
        for m in switched:
            m.training = True


def check_proposal(
    source: object, drafts: object, draft_probs: object, rows: int, num_drafts: int, draft_length: int, vocab: int
) -> None:
    """Refuse a draft proposal whose shapes or dtypes differ from what was asked.

    Parameters
    ----------
    source : DraftSource
        Named in the message (its class).
    drafts : Tensor [R, K, L], integer
        As returned by ``source.propose``.
    draft_probs : Tensor [R, K, L, V], floating
        As returned by ``source.propose``.
    rows, num_drafts, draft_length, vocab : int
        R (active rows), K, L and V asked for.

    Raises
    ------
    ValueError
        Not tensors, an integer ``draft_probs`` or a floating ``drafts``, or any dimension
        other than asked; the message names the source, the dimension and both numbers
        (e.g. "returned 1 draft per row (drafts of shape (1, 1, 3)), asked for num_drafts = 4").
    """
    name = type(source).__name__
    if not isinstance(drafts, torch.Tensor) or not isinstance(draft_probs, torch.Tensor):
        raise ValueError(
            f"draft source {name}.propose must return two tensors (drafts, draft_probs), got "
            f"{type(drafts).__name__}, {type(draft_probs).__name__}"
        )
    if drafts.dtype.is_floating_point or drafts.dtype.is_complex or drafts.dtype == torch.bool:
        raise ValueError(f"draft source {name}.propose returned drafts of dtype {drafts.dtype}; token ids are integers")
    if not draft_probs.dtype.is_floating_point:
        raise ValueError(
            f"draft source {name}.propose returned draft_probs of dtype {draft_probs.dtype}; laws are floats"
        )
    asked = (rows, num_drafts, draft_length, vocab)
    what = (("row", "rows"), ("draft", "drafts"), ("token", "tokens"), ("probability", "probabilities"))
    per = ("", " per row", " per draft", " per law")
    given = ("active rows", "num_drafts", "draft_length", "the target's vocabulary size")
    for tensor, label, ndim in ((drafts, "drafts", 3), (draft_probs, "draft_probs", 4)):
        shape = tuple(tensor.shape)
        if len(shape) != ndim:
            expect = "[R, K, L]" if ndim == 3 else "[R, K, L, V]"
            raise ValueError(
                f"draft source {name}.propose returned {label} of shape {shape}; expected {expect} = "
                f"{list(asked[:ndim])}"
            )
        for dim, (got, want) in enumerate(zip(shape, asked[:ndim], strict=True)):
            if got != want:
                raise ValueError(
                    f"draft source {name}.propose returned {got} {what[dim][got != 1]}{per[dim]} ({label} of "
                    f"shape {shape}), asked for {given[dim]} = {want}"
                )


def slow_method_seconds(method: str, vocab: int, nodes: int) -> float:
    r"""Estimated seconds of one verification call of a :data:`SLOW_METHODS` kernel on dense rows.

    .. math::
        t \approx n\, c_m\, (V / 8192)^{e_m}

    with n drafted nodes (at most B K L) and :data:`SLOW_METHOD_COST` ``[method] = (c_m, e_m)``.

    Parameters
    ----------
    method : str
        One of :data:`SLOW_METHODS`.
    vocab : int
        V.
    nodes : int
        Drafted prefixes verified in the call (B K L bounds it).

    Returns
    -------
    float
        Seconds, an order-of-magnitude estimate (one CPU thread; dense rows).

    Raises
    ------
    KeyError
        ``method`` is not in :data:`SLOW_METHODS`.
    """
    coef, expo = SLOW_METHOD_COST[method]
    return nodes * coef * (vocab / _COST_REFERENCE_VOCAB) ** expo


def slow_method_note(method: str, vocab: int, num_drafts: int, draft_length: int, batch: int = 1) -> str | None:
    """The warning for ``method`` on a vocabulary of ``vocab`` tokens, or None when it is cheap enough.

    Parameters
    ----------
    method : str
    vocab : int
        V; a note is given for :data:`SLOW_METHODS` when V > :data:`SLOW_METHOD_VOCAB`.
    num_drafts, draft_length, batch : int
        K, L and B of a call (the estimate is for B K L drafted nodes).

    Returns
    -------
    str or None
        E.g. "near_opt_bv verifies with a per-node sort and peel of the vocabulary rows: at V = 32000,
        K = 3, L = 8 about 1e+02 s per verification call (...); mdbv ...".
    """
    if method not in SLOW_METHODS or vocab <= SLOW_METHOD_VOCAB:
        return None
    nodes = batch * num_drafts * draft_length
    seconds = slow_method_seconds(method, vocab, nodes)
    return (
        f"{method} verifies with a sort and a peel of every drafted node's vocabulary row, which grows "
        f"faster than V: at V = {vocab}, K = {num_drafts}, L = {draft_length}, B = {batch} expect about "
        f"{seconds:.2g} s per verification call on dense laws (estimate for one CPU thread; peaked laws, "
        f"top-k and top-p make it cheaper); mdbv, spectr and gbv_multipath take milliseconds (vocabularies above "
        f"{SLOW_METHOD_VOCAB} warn)"
    )
