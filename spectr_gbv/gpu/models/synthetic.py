r"""Synthetic target/draft pairs of real models' shapes: random weights, high acceptance, nothing downloaded.

For timing a decoder at a real model's size where its weights are not available (a GPU
machine with no network, a CI run), :func:`synthetic_pair` builds a Llama target and draft of
given shapes (:data:`SHAPES`: SmolLM2-135M's and SmolLM2-1.7B's, and tiny ones for tests)
whose next-token laws are close, so drafts are accepted often, as with a trained draft:

* every decoder layer is near the identity: its residual branches (``o_proj``, ``down_proj``)
  are scaled by ``closeness`` (the draft's by ``closeness`` as well, from other random
  weights), so both models are close to the bigram model ``head(norm(embed(x)))``;
* the two bigram models are the same: the draft's embedding and head are random
  ``[V, h_d]`` matrices E and W; the target's are ``E Q^T`` and ``W Q^T`` with Q a random
  ``[h_t, h_d]`` matrix of orthonormal columns (``h_t >= h_d``), and the target's final
  norm weight is ``sqrt(h_d / h_t)``, which undoes the RMS norm's change of scale, so
  ``W Q^T norm_t(Q e) = W norm_d(e)`` exactly (the target's norm epsilon is the draft's times
  ``h_d / h_t`` for the same reason).

What is left between p and q is what the near-identity layers add (more for the deeper,
wider target), so alpha falls as ``closeness`` grows. The layers' weights have standard
deviation ``init_std``; the head's, ``head_std`` (its logits have standard deviation about
``head_std * sqrt(h_d)``: 4.8 at the default 0.2 and SmolLM2-135M's width, peaked like a
language model's laws).

References
----------
Zhang & Sennrich, Root Mean Square Layer Normalization, NeurIPS 2019 (the norm's scale);
Allal et al., SmolLM2, 2025 (the shapes).
"""

from __future__ import annotations

import math

import torch

#: Llama shapes by name: hidden size, layers, attention heads, key/value heads, MLP width, vocabulary.
SHAPES: dict[str, dict[str, int]] = {
    "smollm2-1.7b": dict(
        hidden_size=2048,
        num_hidden_layers=24,
        num_attention_heads=32,
        num_key_value_heads=32,
        intermediate_size=8192,
        vocab_size=49152,
    ),
    "smollm2-135m": dict(
        hidden_size=576,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        intermediate_size=1536,
        vocab_size=49152,
    ),
    "tiny-target": dict(
        hidden_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=512,
    ),
    "tiny-draft": dict(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        vocab_size=512,
    ),
}


def llama_config(shape: str, **overrides: object) -> object:
    """A ``LlamaConfig`` of one of :data:`SHAPES` (untied head, 8,192 positions, RoPE theta 1e5).

    Raises
    ------
    ValueError
        ``shape`` is not a key of :data:`SHAPES`.
    """
    from transformers import LlamaConfig

    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    base = dict(
        SHAPES[shape],
        max_position_embeddings=8192,
        rope_theta=100000.0,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    base.update(overrides)
    return LlamaConfig(**base)


@torch.no_grad()
def synthetic_pair(
    target_shape: str = "smollm2-1.7b",
    draft_shape: str = "smollm2-135m",
    *,
    closeness: float = 0.05,
    init_std: float = 0.02,
    head_std: float = 0.2,
    embed_std: float = 1.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> tuple[torch.nn.Module, torch.nn.Module]:
    r"""A random Llama target and draft of the given shapes whose bigram parts coincide.

    .. math::
        E_t = E_d Q^\top,\quad W_t = W_d Q^\top,\quad g_t = \sqrt{h_d / h_t}
        \;\Rightarrow\; W_t\,\mathrm{norm}_t(E_t x) = W_d\,\mathrm{norm}_d(E_d x)

    Parameters
    ----------
    target_shape, draft_shape : str
        Keys of :data:`SHAPES`, with one vocabulary and ``h_target >= h_draft``.
    closeness : float
        In [0, 1]: scale of every layer's residual branches (0: both models are the same
        bigram model, so alpha = 1).
    init_std : float
        > 0: standard deviation of the random weights (embeddings included).
    head_std : float
        > 0: standard deviation of the draft head's weights (the target's is the same map).
    embed_std : float
        > 0: standard deviation of the draft's embedding (the target's is the same map): large
        against the layers' branches (about ``closeness * init_std * sqrt(h)`` each), so the
        layers are near the identity.
    seed : int
        ``torch`` seed (the weights are a function of it and the shapes).
    dtype : torch.dtype
        float32, bfloat16 or float16 (the weights are built in float32, then cast).
    device : torch.device or str

    Returns
    -------
    target, draft : LlamaForCausalLM
        In eval mode, with ``sdpa`` attention.

    Raises
    ------
    ValueError
        Unknown shapes, different vocabularies, a draft wider than the target, ``closeness``
        outside [0, 1], ``init_std``, ``head_std`` or ``embed_std`` <= 0.

    Examples
    --------
    >>> t, d = synthetic_pair("tiny-target", "tiny-draft", closeness=0.0)
    >>> x = torch.tensor([[5, 17, 3]])
    >>> float((t(input_ids=x).logits - d(input_ids=x).logits).abs().max().detach()) < 1e-4
    True
    """
    from transformers import LlamaForCausalLM

    tcfg, dcfg = llama_config(target_shape), llama_config(draft_shape)
    if tcfg.vocab_size != dcfg.vocab_size or tcfg.hidden_size < dcfg.hidden_size:
        raise ValueError(
            f"target {target_shape!r} and draft {draft_shape!r} need one vocabulary and a target at least as wide "
            f"(vocab {tcfg.vocab_size} vs {dcfg.vocab_size}, hidden {tcfg.hidden_size} vs {dcfg.hidden_size})"
        )
    if not 0 <= closeness <= 1 or not min(init_std, head_std, embed_std) > 0:
        raise ValueError(
            f"closeness must lie in [0, 1] and init_std, head_std, embed_std be > 0, got {closeness}, "
            f"{init_std}, {head_std}, {embed_std}"
        )
    for cfg in (tcfg, dcfg):
        cfg.initializer_range = init_std
        cfg._attn_implementation = "sdpa"
    tcfg.rms_norm_eps = dcfg.rms_norm_eps * dcfg.hidden_size / tcfg.hidden_size
    torch.manual_seed(seed)
    draft = LlamaForCausalLM(dcfg).eval()
    target = LlamaForCausalLM(tcfg).eval()
    for model in (target, draft):
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(closeness)
            layer.mlp.down_proj.weight.mul_(closeness)
    draft.lm_head.weight.normal_(0.0, head_std)
    draft.model.embed_tokens.weight.normal_(0.0, embed_std)
    q, _ = torch.linalg.qr(torch.randn(tcfg.hidden_size, dcfg.hidden_size))  # orthonormal columns
    target.model.embed_tokens.weight.copy_(draft.model.embed_tokens.weight @ q.T)
    target.lm_head.weight.copy_(draft.lm_head.weight @ q.T)
    target.model.norm.weight.fill_(math.sqrt(dcfg.hidden_size / tcfg.hidden_size))
    draft.model.norm.weight.fill_(1.0)
    return target.to(device=device, dtype=dtype), draft.to(device=device, dtype=dtype)
