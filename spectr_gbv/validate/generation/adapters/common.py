"""What every ready generation adapter shares: argument checks, the model's device and the adapter stamp.

A ready adapter is a plain function with the generation interface signature
``generate(target, draft, prompt_ids, max_new_tokens, *, temperature, top_k, top_p, seed)``
(or the batched form, ``prompt_ids`` a list of B prompts), carrying the attributes
:data:`ADAPTER_ATTRIBUTES`. :func:`stamp` sets them; :func:`check_prompt`, :func:`check_batch`
and :func:`check_settings` refuse bad arguments with a ``ValueError`` naming the argument before any model runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral, Real
from typing import Any

#: Interface names of the generation referee: one prompt per call, or B prompts per call.
GENERATION_INTERFACES: tuple[str, ...] = ("generation", "generation_batched")

#: Attributes every ready adapter carries: ``interface`` (one of :data:`GENERATION_INTERFACES`),
#: ``description`` (one line: what runs, with which settings), ``family`` (``"hf-assisted"`` or
#: ``"spectr-decoder"``), ``lossless`` (whether the system is meant to follow the target law
#: exactly; ``False`` for lossy-by-design rules, which the referee must reject),
#: ``deterministic`` (whether the same seed gives the same ids in every process) and ``uses_draft`` (whether the
#: output depends on the ``draft`` argument; ``False`` for autoregressive sampling and for an
#: adapter that brings its own assistant, where a draft-invariance check is vacuous).
ADAPTER_ATTRIBUTES: tuple[str, ...] = ("interface", "description", "family", "lossless", "deterministic", "uses_draft")


def bound_adapter(body: Callable[..., Any], **fixed: Any) -> Callable[..., Any]:
    """A function of exactly the generation signature that calls ``body`` with ``fixed`` keywords added.

    ``generate(target, draft, prompt_ids, max_new_tokens, *, temperature, top_k, top_p, seed)``
    returns ``body(target, draft, prompt_ids, max_new_tokens, temperature=..., top_k=...,
    top_p=..., seed=..., **fixed)``; the referee checks that signature, so the adapter exposes
    it (and no extra parameter). Name and attributes are set by :func:`stamp`.

    Parameters
    ----------
    body : callable
        The adapter's implementation, taking the interface's arguments and ``fixed``.
    **fixed
        Keywords bound for this adapter (e.g. ``settings=...``, ``method="mdbv"``).

    Returns
    -------
    callable
    """

    def generate(
        target: Any,
        draft: Any,
        prompt_ids: Any,
        max_new_tokens: int,
        *,
        temperature: float,
        top_k: int,
        top_p: float,
        seed: int,
    ) -> Any:
        return body(
            target,
            draft,
            prompt_ids,
            max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            **fixed,
        )

    return generate


def stamp(
    fn: Callable[..., Any],
    name: str,
    *,
    interface: str,
    description: str,
    family: str,
    lossless: bool = True,
    deterministic: bool = True,
    uses_draft: bool = True,
) -> Callable[..., Any]:
    """Give an adapter function its registry name and the attributes :data:`ADAPTER_ATTRIBUTES`.

    Parameters
    ----------
    fn : callable
        The adapter (modified in place and returned).
    name : str
        Registry name, e.g. ``"hf-assisted:heuristic"``; becomes ``fn.adapter_name`` and, with
        ``-``, ``:`` and ``.`` replaced by ``_``, ``fn.__name__`` / ``__qualname__``.
    interface : str
        One of :data:`GENERATION_INTERFACES`.
    description, family : str
    lossless, deterministic, uses_draft : bool

    Returns
    -------
    callable
        ``fn``.

    Raises
    ------
    ValueError
        ``interface`` is not one of :data:`GENERATION_INTERFACES`.
    """
    if interface not in GENERATION_INTERFACES:
        raise ValueError(f"interface must be one of {', '.join(GENERATION_INTERFACES)}, got {interface!r}")
    ident = name.replace("-", "_").replace(":", "__").replace(".", "_")
    fn.__name__ = fn.__qualname__ = ident
    fn.adapter_name = name  # type: ignore[attr-defined]
    fn.interface = interface  # type: ignore[attr-defined]
    fn.description = description  # type: ignore[attr-defined]
    fn.family = family  # type: ignore[attr-defined]
    fn.lossless = lossless  # type: ignore[attr-defined]
    fn.deterministic = deterministic  # type: ignore[attr-defined]
    fn.uses_draft = uses_draft  # type: ignore[attr-defined]
    fn.__doc__ = f"Ready generation adapter {name!r} ({interface} interface): {description}"
    return fn


def check_prompt(prompt_ids: Any, name: str = "prompt_ids") -> list[int]:
    """One prompt as a list of ints (a list, tuple, 1-D numpy array or 1-D integer tensor).

    Parameters
    ----------
    prompt_ids : sequence of int
        At least one id, each a non-negative int (the vocabulary bound is the model's to check).
    name : str
        Argument name used in messages (``prompt_ids[2]`` for a batch row).

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        Text, an empty prompt, a nested or non-integer entry, a negative id.
    """
    if isinstance(prompt_ids, str | bytes | bytearray):
        raise ValueError(f"{name} must be token ids, got {type(prompt_ids).__name__}; tokenize the text first")
    tolist = getattr(prompt_ids, "tolist", None)
    seq = tolist() if callable(tolist) else prompt_ids
    if not isinstance(seq, Sequence) or len(seq) == 0:
        raise ValueError(f"{name} must be a non-empty sequence of token ids, got {type(prompt_ids).__name__}")
    ids = []
    for i, v in enumerate(seq):
        if isinstance(v, bool) or not isinstance(v, Integral) or v < 0:
            raise ValueError(f"{name}[{i}] must be a token id (an int >= 0), got {v!r:.40}")
        ids.append(int(v))
    return ids


def check_batch(prompt_ids: Any) -> list[list[int]]:
    """B >= 1 prompts (ragged lengths allowed), each checked by :func:`check_prompt`.

    Raises
    ------
    ValueError
        Not a non-empty sequence of prompts, or a bad row (the message names ``prompt_ids[b]``).
    """
    if isinstance(prompt_ids, str | bytes | bytearray) or not isinstance(prompt_ids, Sequence) or not prompt_ids:
        raise ValueError(f"prompt_ids must be a non-empty list of prompts (lists of ids), got {prompt_ids!r:.60}")
    return [check_prompt(row, f"prompt_ids[{b}]") for b, row in enumerate(prompt_ids)]


def check_settings(max_new_tokens: Any, temperature: Any, top_k: Any, top_p: Any, seed: Any) -> None:
    """Refuse sampling settings outside the generation interface's ranges.

    Parameters
    ----------
    max_new_tokens : int
        >= 1.
    temperature : float
        > 0 and finite.
    top_k : int
        >= 0 (0 = off).
    top_p : float
        In (0, 1] (1.0 = off).
    seed : int
        In ``0..2**63 - 1``.

    Raises
    ------
    ValueError
        The first argument out of range, named.
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, Integral) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r:.40}")
    if isinstance(temperature, bool) or not isinstance(temperature, Real) or not 0 < float(temperature) < float("inf"):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r:.40}")
    if isinstance(top_k, bool) or not isinstance(top_k, Integral) or top_k < 0:
        raise ValueError(f"top_k must be an int >= 0 (0 = off), got {top_k!r:.40}")
    if isinstance(top_p, bool) or not isinstance(top_p, Real) or not 0 < float(top_p) <= 1:
        raise ValueError(f"top_p must be a number in (0, 1] (1.0 = off), got {top_p!r:.40}")
    if isinstance(seed, bool) or not isinstance(seed, Integral) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an int in 0..2**63 - 1, got {seed!r:.40}")


def model_device(model: Any) -> Any:
    """The ``torch.device`` of a model's first parameter or buffer (CPU for a model that has neither)."""
    import torch

    for tensors in (model.parameters(), model.buffers()):
        for t in tensors:
            return t.device
    return torch.device("cpu")
