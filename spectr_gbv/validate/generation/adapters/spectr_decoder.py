r"""Ready adapters for this package's decoder, :class:`spectr_gbv.gpu.SpeculativeDecoder`.

Each call builds ``SpeculativeDecoder(target, draft, method, num_drafts=K, draft_length=L,
temperature=T, top_k=k or None, top_p=p if p < 1 else None, seed=seed, device=<the target's>,
scoring=...)`` and returns the new ids of ``generate(prompt, max_new_tokens)``. The decoder
draws every draft token and every verification uniform from its own ``torch.Generator``
seeded with ``seed``, so the same seed gives the same ids. Its sampling settings are
transformers' warpers in transformers' order (``SamplingConfig``, ``top_k=0`` / ``top_p=1``
mapped to "off").

Registered adapters (K = 2, L = 3 unless named otherwise; :data:`DEFAULT_NUM_DRAFTS`,
:data:`DEFAULT_DRAFT_LENGTH`):

* ``spectr-decoder:METHOD`` for every lossless method of
  :data:`spectr_gbv.gpu.decoding.decoder.LOSSLESS_METHODS` (``ar`` runs the target alone;
  ``sd`` and ``bv`` verify one draft, K = 1), with ``scoring="auto"`` (a token tree where the
  models pass the tree-attention probe, else flat);
* ``spectr-decoder:METHOD:tree`` and ``spectr-decoder:METHOD:flat`` for the multi-draft
  methods (K > 1): the target scores the K drafts as one token tree (4-D ancestor mask,
  explicit positions) or as K batch rows;
* ``spectr-decoder-batched:METHOD`` (and ``:tree`` / ``:flat`` for multi-draft methods), the
  ``generation_batched`` interface: B prompts decoded in one ``generate`` call per prompt
  length (the decoder refuses a ragged batch, so prompts of equal length share a call, in the
  order given, and the groups run one after another on one decoder and one seed; rows of a
  call share the forwards, with per-row masks and positions);
* ``spectr-decoder:released``: the released SpecTr-GBV rule (``spectr_gbv_released``,
  ``allow_lossy=True``), KNOWN LOSSY (THEORY.md section 6a), registered with
  ``lossless = False`` as a control the referee must reject.

References
----------
THEORY.md sections 1-3 and 6; docs/decoder.md; Lin et al. 2026 (SpecTr-GBV, arXiv 2604.25925).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spectr_gbv.core.methods import method_spec, methods_where
from spectr_gbv.validate.generation.adapters.common import (
    bound_adapter,
    check_batch,
    check_prompt,
    check_settings,
    model_device,
    stamp,
)

#: K of the multi-draft adapters (single-draft methods use 1).
DEFAULT_NUM_DRAFTS: int = 2
#: L of every adapter (ignored by ``ar``).
DEFAULT_DRAFT_LENGTH: int = 3

# The decoder's method lists, read from the method table (pure data: listing the registry imports no torch).
#: Lossless methods of the decoder (the table's lossless methods with a torch kernel), one adapter family each.
DECODER_LOSSLESS_METHODS: tuple[str, ...] = methods_where(lossless=True, kernel=True)
#: Methods that verify one draft (K = 1) or none (``ar``): one scoring mode only.
SINGLE_PATH_METHODS: tuple[str, ...] = tuple(m for m in DECODER_LOSSLESS_METHODS if method_spec(m).drafts != "many")
#: The lossy method registered as ``spectr-decoder:released``.
RELEASED_METHOD: str = "spectr_gbv_released"


def _decoder(
    target: Any,
    draft: Any,
    method: str,
    num_drafts: int,
    draft_length: int,
    scoring: str,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int,
) -> Any:
    """A ``SpeculativeDecoder`` on the target's device with the interface's settings mapped to its own."""
    from spectr_gbv.gpu.decoding.decoder import SpeculativeDecoder

    return SpeculativeDecoder(
        target,
        None if method == "ar" else draft,
        method=method,
        num_drafts=num_drafts,
        draft_length=draft_length,
        temperature=float(temperature),
        top_k=int(top_k) if top_k else None,
        top_p=float(top_p) if top_p < 1 else None,
        seed=int(seed),
        device=model_device(target),
        allow_lossy=method == RELEASED_METHOD,
        scoring=scoring,
    )


def decoder_generate(
    target: Any,
    draft: Any,
    prompt_ids: Any,
    max_new_tokens: int,
    *,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int,
    method: str = "mdbv",
    num_drafts: int = DEFAULT_NUM_DRAFTS,
    draft_length: int = DEFAULT_DRAFT_LENGTH,
    scoring: str = "auto",
) -> list[int]:
    """Decode one prompt with :class:`~spectr_gbv.gpu.SpeculativeDecoder` and return the new ids.

    Parameters
    ----------
    target, draft : transformers causal LMs
        One vocabulary (``draft`` is not used by ``ar``).
    prompt_ids : sequence of int
        T >= 1 ids.
    max_new_tokens : int
        N >= 1.
    temperature, top_k, top_p, seed
        The generation interface's settings (``top_k=0``, ``top_p=1.0`` = off; T > 0).
    method : str
        A decoder method (:data:`DECODER_LOSSLESS_METHODS` or ``spectr_gbv_released``).
    num_drafts, draft_length : int
        K, L.
    scoring : str
        ``"auto"``, ``"tree"`` or ``"flat"`` (:class:`~spectr_gbv.gpu.DecoderConfig`).

    Returns
    -------
    list of int
        The N new ids.

    Raises
    ------
    ValueError
        Settings outside the interface's ranges or the decoder's refusals (vocabulary mismatch,
        context too short, ``scoring="tree"`` on a model that fails the tree-attention probe).
    """
    ids = check_prompt(prompt_ids)
    check_settings(max_new_tokens, temperature, top_k, top_p, seed)
    dec = _decoder(target, draft, method, num_drafts, draft_length, scoring, temperature, top_k, top_p, seed)
    tokens, _ = dec.generate(ids, int(max_new_tokens))
    return [int(x) for x in tokens[len(ids) :].tolist()]


def decoder_generate_batched(
    target: Any,
    draft: Any,
    prompt_ids: Any,
    max_new_tokens: int,
    *,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int,
    method: str = "mdbv",
    num_drafts: int = DEFAULT_NUM_DRAFTS,
    draft_length: int = DEFAULT_DRAFT_LENGTH,
    scoring: str = "auto",
) -> list[list[int]]:
    """Decode B prompts, one ``generate`` call per distinct prompt length, and return B lists of new ids.

    Parameters
    ----------
    prompt_ids : list of B sequences of int
        Ragged lengths allowed: prompts of one length are decoded together as a ``[B_l, T_l]``
        batch (in the order given), the groups in order of first appearance, on one decoder
        (one generator seeded with ``seed``).
    target, draft, max_new_tokens, temperature, top_k, top_p, seed, method, num_drafts, draft_length, scoring
        As in :func:`decoder_generate`.

    Returns
    -------
    list of B lists of int
        Row b holds the N new ids of ``prompt_ids[b]``.

    Raises
    ------
    ValueError
        As :func:`decoder_generate`; a row that is not a prompt is named (``prompt_ids[b]``). A
        batch of more than one row needs models that pass the tree-attention probe (the
        decoder's refusal names the model).
    """
    rows = check_batch(prompt_ids)
    check_settings(max_new_tokens, temperature, top_k, top_p, seed)
    dec = _decoder(target, draft, method, num_drafts, draft_length, scoring, temperature, top_k, top_p, seed)
    groups: dict[int, list[int]] = {}
    for b, row in enumerate(rows):
        groups.setdefault(len(row), []).append(b)
    out: list[list[int]] = [[] for _ in rows]
    for length, members in groups.items():
        tokens, _ = dec.generate([rows[b] for b in members], int(max_new_tokens))
        for b, new in zip(members, tokens[:, length:].tolist(), strict=True):
            out[b] = [int(x) for x in new]
    return out


def make_decoder_adapter(
    name: str,
    method: str,
    *,
    num_drafts: int,
    draft_length: int = DEFAULT_DRAFT_LENGTH,
    scoring: str = "auto",
    batched: bool = False,
) -> Callable[..., Any]:
    """An adapter (generation or generation_batched interface) running the decoder with fixed settings.

    Parameters
    ----------
    name : str
        Registry name.
    method : str
        Decoder method; ``spectr_gbv_released`` is run with ``allow_lossy=True`` and stamped
        ``lossless = False``.
    num_drafts, draft_length : int
        K, L.
    scoring : str
        ``"auto"``, ``"tree"`` or ``"flat"``.
    batched : bool
        ``True``: the ``generation_batched`` interface (:func:`decoder_generate_batched`).

    Returns
    -------
    callable
        With the attributes of :data:`~spectr_gbv.validate.generation.adapters.common.ADAPTER_ATTRIBUTES`
        and ``method``, ``num_drafts``, ``draft_length``, ``scoring``.
    """
    body = decoder_generate_batched if batched else decoder_generate
    fixed = dict(method=method, num_drafts=num_drafts, draft_length=draft_length, scoring=scoring)

    generate = bound_adapter(body, **fixed)
    for key, value in fixed.items():
        setattr(generate, key, value)
    lossy = method == RELEASED_METHOD
    shape = "target alone" if method == "ar" else f"K = {num_drafts}, L = {draft_length}, scoring {scoring}"
    rows = "B prompts per call, " if batched else ""
    description = f"SpeculativeDecoder {method}, {rows}{shape}" + (
        ": the released SpecTr-GBV rule, KNOWN LOSSY (THEORY.md 6a), a control the referee must reject" if lossy else ""
    )
    return stamp(
        generate,
        name,
        interface="generation_batched" if batched else "generation",
        description=description,
        family="spectr-decoder",
        lossless=not lossy,
        uses_draft=method != "ar",
    )


def _registry() -> dict[str, Callable[..., Any]]:
    """Every decoder adapter, by registry name (see the module docstring)."""
    adapters: dict[str, Callable[..., Any]] = {}
    for batched, prefix in ((False, "spectr-decoder"), (True, "spectr-decoder-batched")):
        for method in DECODER_LOSSLESS_METHODS:
            K = 1 if method in SINGLE_PATH_METHODS else DEFAULT_NUM_DRAFTS
            modes = ("auto",) if method in SINGLE_PATH_METHODS else ("auto", "tree", "flat")
            for mode in modes:
                name = f"{prefix}:{method}" + ("" if mode == "auto" else f":{mode}")
                adapters[name] = make_decoder_adapter(name, method, num_drafts=K, scoring=mode, batched=batched)
    name = "spectr-decoder:released"
    adapters[name] = make_decoder_adapter(name, RELEASED_METHOD, num_drafts=DEFAULT_NUM_DRAFTS)
    return adapters


#: Registry name -> adapter for this package's decoder.
DECODER_ADAPTERS: dict[str, Callable[..., Any]] = _registry()
