"""Adapters that turn a verifier given in one of the interfaces into one internal callable.

Interfaces (:data:`INTERFACES`):

``generic`` (the package's own, multi-draft)
    ``verify(draft_tokens, draft_probs, target_probs, rng) -> list[int]`` with
    ``draft_tokens`` int64 [K, L], ``draft_probs`` float64 [K, L, V] (``draft_probs[k, t] =
    q(. | X^(k)_{1:t})``), ``target_probs`` float64 [K, L+1, V] (row L: the bonus position)
    and ``rng`` a :class:`numpy.random.Generator`, the only source of randomness. Returns the
    emitted tokens: the accepted prefix of one draft plus one token (length 1..L+1), as a
    list, tuple, 1-D numpy array or torch tensor of ints. The arrays are numpy (read-only);
    a verifier that raises on numpy input but runs on torch tensors is fed torch tensors
    (``torch.from_numpy`` copies, float64).
``chain`` (single draft, the layout of serving systems)
    ``verify(draft_ids, draft_probs, target_probs, uniforms) -> int64[B, L+1]`` with
    ``draft_ids`` int64 [B, L], ``draft_probs`` float64 [B, L, V], ``target_probs`` float64
    [B, L+1, V] and ``uniforms`` float64 [B, L+1] in [0, 1) (the harness always supplies
    them; a verifier may ignore them and draw its own, at the cost of the determinism check
    and of the exact level). Output row b: the emitted tokens, then -1 up to length L+1.
    Rows are batched (up to :data:`CHAIN_BATCH` per call); numpy or torch as above.
``hf``
    Hugging Face transformers' ``_speculative_sampling(candidate_input_ids, candidate_logits,
    candidate_length, new_logits, ...)`` (``transformers.generation.utils``): batch size 1,
    logits in, the global torch RNG. The adapter feeds ``candidate_input_ids`` = the draft
    [1, L] (int64), ``candidate_logits`` = log q [1, L, V] and ``new_logits`` = log p
    [1, L+1, V] in float32 with ``-inf`` for zero probabilities (softmax recovers q and p),
    ``candidate_length = L`` and ``is_done_candidate=False`` when the installed version takes
    it; it seeds torch's global RNG from the harness rng once per batch (or installs the
    ``torch_state`` given to :meth:`Adapter.emit`), restores the caller's RNG state
    afterwards, and reads ``(valid_tokens [1, m], n_matches)`` as the emitted tokens
    ``valid_tokens[0]`` (``m`` must be ``n_matches + 1``).
``batched`` (multi-draft, many iterations per call)
    ``verify(draft_tokens int64[B, K, L], draft_probs float64[B, K, L, V], target_probs
    float64[B, K, L+1, V], rng: numpy.random.Generator) -> int[B, L+1]``: row b the emitted
    tokens of iteration b, then -1 (as chain). Up to :data:`CHAIN_BATCH` rows per call.
``batched_torch``, ``generic_torch``, ``chain_torch``
    ``batched``, ``generic`` and ``chain`` with torch tensors (float64 probabilities, int64
    ids, CPU) and, instead of the numpy Generator, a CPU :class:`torch.Generator`
    (``generic_torch``, ``batched_torch``) that the harness seeds from its rng once per call
    (or, given ``torch_state``, sets once per batch); ``chain_torch`` receives its uniforms as
    a float64 tensor [B, L+1]. Outputs as a torch tensor or numpy array. Module:
    :mod:`spectr_gbv.validate.interfaces.torch_adapters`; torch is imported only for these.

Every call runs isolated from the harness under a per-call time limit
(:class:`~spectr_gbv.validate.isolation.guard.CallGuard`: a forked worker process by default), and
outputs are read by :mod:`spectr_gbv.validate.interfaces.outputs`, so a verifier that raises, hangs,
exits or returns garbage is reported instead of ending the harness. Loading a verifier from
``"module:function"`` is :mod:`spectr_gbv.validate.interfaces.loading` (``load_verifier``,
``UnloadableVerifier``, ``verifier_name``, ``IMPORT_TIME_LIMIT_S``: still importable from here).
"""

from __future__ import annotations

#: Interface names accepted by :func:`~spectr_gbv.validate.validate` and the CLI.
INTERFACES: tuple[str, ...] = ("generic", "chain", "hf", "batched", "batched_torch", "generic_torch", "chain_torch")
#: Interfaces whose verifier takes torch tensors (torch needed).
TORCH_INTERFACES: tuple[str, ...] = ("hf", "batched_torch", "generic_torch", "chain_torch")

#: Rows per call of a chain or batched verifier.
CHAIN_BATCH = 4096


def check_interface(interface: str) -> str:
    """Return ``interface`` if it is one of :data:`INTERFACES`.

    Raises
    ------
    ValueError
        ``unknown interface 'x'; valid: generic, chain, hf, ...``.
    """
    if interface not in INTERFACES:
        raise ValueError(f"unknown interface {interface!r}; valid: {', '.join(INTERFACES)}")
    return interface


__all__ = ["CHAIN_BATCH", "INTERFACES", "TORCH_INTERFACES", "check_interface"]
