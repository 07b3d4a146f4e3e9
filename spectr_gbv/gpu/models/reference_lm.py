r"""A Hugging Face causal LM whose next-token law is known exactly: the generation referee's model.

:class:`ReferenceLM` is a real ``transformers`` causal LM (a :class:`ReferenceLMConfig`, a
``DynamicCache``, ``position_ids``, 2-D and 4-D attention masks, ``logits_to_keep``,
``generate``) whose logits are a pure, documented function of the context it reads back from
its own cache:

* each cache slot holds the token fed there and its position id (the layer's keys are
  ``[R, 1, C, 2]`` float32: token id, position id; both exact in float32 below 2**24);
* a query (a new token) attends to the earlier slots its attention mask allows; those pairs
  sorted by position id, then the query's own token, give the context ``c_0 .. c_t`` it sees;
  ``s`` is the query's own position id;
* its logits are ``table[state] + offset`` scattered onto the config's ``support``
  (every other id gets ``-inf``), where ``state`` is :func:`context_state` of
  ``(c_{t-1}, c_t, sum(c) mod 3, s mod 2)``.

The configuration's ``pad_token_id`` is an id outside the support (never generated, and the
reference prompts avoid it), so transformers' ``generate`` never mistakes a real token for padding
when no ``attention_mask`` is passed; ``eos_token_id`` is None (outputs have the asked length).

So the law is context-dependent (the last two tokens, the whole history through the sum, the
position through its parity) and enumerable: :meth:`ReferenceLM.next_logits` computes the
logits of a context directly (``s = t``), which is the definition
:mod:`spectr_gbv.gpu.models.sequence_law` enumerates. A loop that feeds the model the same
context with correct masks and positions gets exactly these logits; a loop that leaves rejected
tokens in the cache, feeds wrong position ids or lets padding through is served a different
law, as it would be by a real model.

The constant ``offset`` is the magnitude of real language models' logits (tens): it cancels in
the softmax but sets the rounding of low-precision logits (bfloat16's spacing is 0.125 at 24,
0.5 at 64), so a draft law computed from bfloat16 logits differs visibly from the float32 one.

References
----------
Wolf et al., Transformers: State-of-the-Art Natural Language Processing, EMNLP 2020 (the
``PreTrainedModel`` / ``GenerationMixin`` / ``DynamicCache`` interfaces this model implements);
Leviathan et al. 2023 (speculative decoding: the cache rollback after a rejection the model
makes observable).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache, GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

#: Parities of the position id and residues of the context sum the state distinguishes.
POSITION_PERIOD = 2
SUM_PERIOD = 3


def context_state(context: Sequence[int], position: int, num_states: int) -> int:
    """The table row of a context: a fixed mix of its last two tokens, its sum mod 3 and the parity of ``position``.

    Parameters
    ----------
    context : sequence of int
        Token ids ``c_0 .. c_t`` (t >= 0), oldest first.
    position : int
        The query's position id (``t`` when positions are correct).
    num_states : int
        Rows of the table (>= 1).

    Returns
    -------
    int
        A row index in ``[0, num_states)``.
    """
    last = int(context[-1])
    before = int(context[-2]) + 1 if len(context) > 1 else 0
    total = sum(int(c) for c in context) % SUM_PERIOD
    mixed = 1_000_003 * last + 7_919 * before + 104_729 * total + 15_485_863 * (int(position) % POSITION_PERIOD)
    return mixed % num_states


class ReferenceLMConfig(PretrainedConfig):
    """The configuration of a :class:`ReferenceLM`: its vocabulary, support and logit table.

    Parameters
    ----------
    vocab_size : int
        V >= 2.
    support : sequence of int
        Distinct token ids in ``[0, V)`` that may get positive probability (S of them).
    table : sequence of sequences of float
        ``[num_states][S]`` logits (before ``offset``); ``-inf`` entries are tokens of probability
        0 in that state; every row needs a finite entry.
    offset : float
        Constant added to every finite logit (cancels in the softmax; sets low-precision rounding).
    max_position_embeddings : int
        The context the model accepts (checked by decoders that read it).

    Raises
    ------
    ValueError
        ``vocab_size`` < 2, ids outside the vocabulary or repeated, a table that is not
        ``[num_states][S]``, a row without a finite logit, NaN or ``+inf`` logits.
    """

    model_type = "spectr_gbv_reference_lm"

    def __init__(
        self,
        vocab_size: int = 8,
        support: Sequence[int] = (0, 1),
        table: Sequence[Sequence[float]] = ((0.0, 0.0),),
        offset: float = 24.0,
        max_position_embeddings: int = 4096,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("is_encoder_decoder", False)
        kwargs.setdefault("eos_token_id", None)
        kwargs.setdefault("bos_token_id", None)
        pad = kwargs.pop("pad_token_id", None)
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.support = [int(i) for i in support]
        self.table = [[float(x) for x in row] for row in table]
        self.offset = float(offset)
        self.max_position_embeddings = int(max_position_embeddings)
        self.num_hidden_layers = 1
        self._check()
        if pad is None:  # an id outside the support: never a real token of the prompts or the output
            outside = sorted(set(range(min(self.vocab_size, len(self.support) + 1))) - set(self.support))
            pad = outside[0] if outside else None
        self.pad_token_id = pad

    def _check(self) -> None:
        V, sup = self.vocab_size, self.support
        if V < 2:
            raise ValueError(f"vocab_size: expected >= 2, got {V}")
        if not sup or len(set(sup)) != len(sup) or min(sup) < 0 or max(sup) >= V:
            raise ValueError(f"support: expected distinct ids in [0, {V}), got {sup}")
        if not self.table or any(len(row) != len(sup) for row in self.table):
            raise ValueError(f"table: expected [num_states][{len(sup)}] logits")
        t = torch.tensor(self.table, dtype=torch.float64)
        if bool(torch.isnan(t).any()) or bool((t == float("inf")).any()):
            raise ValueError("table: NaN or +inf logits")
        if not bool(torch.isfinite(t).any(dim=1).all()):
            raise ValueError("table: a row without a finite logit (a state with no possible token)")


class ReferenceLM(PreTrainedModel, GenerationMixin):
    """A causal LM whose logits are :meth:`next_logits` of the context it reads from its cache.

    Parameters
    ----------
    config : ReferenceLMConfig

    Attributes
    ----------
    support : tuple of int
        The ids that may get positive probability (every other id has logit ``-inf``).

    Notes
    -----
    ``forward(input_ids [R, W] int64, attention_mask=None, position_ids=None, cache=None,
    use_cache=True, logits_to_keep=0)`` returns ``CausalLMOutputWithPast(logits [R, W', V]
    float32, cache)``. ``attention_mask`` may be 2-D ``[R, C + W]`` (1 = real token, 0 = padding;
    causal order implied), 4-D additive ``[R, 1, W, C + W]`` (0 = attend, very negative = not)
    or 4-D boolean (True = attend); without it every earlier slot is attended. Missing
    ``position_ids`` are the count of real tokens before each slot (2-D mask) or the cache
    length plus the offset in the input.
    """

    config_class = ReferenceLMConfig
    base_model_prefix = "reference_lm"
    main_input_name = "input_ids"
    _supports_cache_class = True
    _is_stateful = False

    def __init__(self, config: ReferenceLMConfig) -> None:
        super().__init__(config)
        self.support = tuple(config.support)
        self.register_buffer("_table", torch.tensor(config.table, dtype=torch.float32), persistent=False)
        self.register_buffer("_support", torch.tensor(config.support, dtype=torch.long), persistent=False)
        # One parameter so that .device, .dtype, .to() and eval()/train() behave as for any model.
        self._anchor = torch.nn.Parameter(torch.zeros(1), requires_grad=False)
        self.post_init()

    # ------------------------------------------------------------------ the law
    def next_logits(self, context: Sequence[int], position: int | None = None) -> torch.Tensor:
        """The logits after ``context`` (prompt + generated ids, no padding), as the model serves them.

        Parameters
        ----------
        context : sequence of int
            ``c_0 .. c_t``, at least one id, each in ``[0, V)``.
        position : int, optional
            The query's position id; default ``t`` (correct positions).

        Returns
        -------
        Tensor [V], float32
            ``table[state] + offset`` on :attr:`support`, ``-inf`` elsewhere.

        Raises
        ------
        ValueError
            Empty context or an id outside the vocabulary.
        """
        ids = [int(c) for c in context]
        V = self.config.vocab_size
        if not ids or min(ids) < 0 or max(ids) >= V:
            raise ValueError(f"context: expected at least one id in [0, {V}), got {ids}")
        pos = len(ids) - 1 if position is None else int(position)
        return self._row_logits(context_state(ids, pos, len(self.config.table)))

    def _row_logits(self, state: int) -> torch.Tensor:
        out = torch.full((self.config.vocab_size,), float("-inf"), dtype=torch.float32, device=self._table.device)
        out[self._support] = self._table[state] + torch.tensor(self.config.offset, dtype=torch.float32)
        return out

    # ------------------------------------------------------------------ HF interface
    def get_input_embeddings(self) -> torch.nn.Module | None:
        """No embeddings: the model reads token ids directly (returns None)."""
        return None

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        cache: DynamicCache | None = None,
        use_cache: bool | None = True,
        logits_to_keep: int | torch.Tensor = 0,
        past_key_values: DynamicCache | None = None,
        **kwargs: Any,
    ) -> CausalLMOutputWithPast:
        """One forward over ``W`` new tokens per row; see the class notes for shapes and masks.

        Raises
        ------
        ValueError
            ``input_ids`` missing, not 2-D, or with ids outside the vocabulary; masks or
            position ids of the wrong shape.
        """
        if input_ids is None or input_ids.dim() != 2:
            raise ValueError("input_ids: expected int64 [R, W] token ids (inputs_embeds is not supported)")
        V = self.config.vocab_size
        if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= V):
            raise ValueError(f"input_ids: ids outside [0, {V})")
        cache = cache if cache is not None else past_key_values
        if cache is None and use_cache is not False:
            cache = DynamicCache()
        R, W = input_ids.shape
        past = _cache_slots(cache, R)
        C = past.shape[1]
        if position_ids is None:
            position_ids = _default_positions(attention_mask, C, W, R, input_ids.device)
        try:  # broadcast as a rotary embedding does ([R, 1] or [1, W] ids)
            position_ids = torch.broadcast_to(position_ids, (R, W))
        except RuntimeError as exc:
            shape = tuple(position_ids.shape)
            raise ValueError(f"position_ids: expected [{R}, {W}] (or broadcastable), got {shape}") from exc
        new = torch.stack([input_ids.float(), position_ids.float()], dim=-1)  # [R, W, 2]
        slots = torch.cat([past, new.to(past.device)], dim=1)  # [R, C + W, 2]
        if cache is not None:
            keys = new[:, None].to(torch.float32)
            cache.update(keys, keys.clone(), 0)
        allowed = _allowed(attention_mask, R, W, C)
        keep = int(logits_to_keep) if isinstance(logits_to_keep, int) else 0
        first = W - keep if 0 < keep <= W else 0
        logits = torch.empty(R, W - first, V, dtype=torch.float32, device=input_ids.device)
        n_states = len(self.config.table)
        ids = slots[..., 0].long().tolist()
        pos = slots[..., 1].long().tolist()
        allowed_list = allowed.tolist()
        for r in range(R):
            for w in range(first, W):
                q = C + w
                seen = sorted((pos[r][j], j) for j in range(q) if allowed_list[r][w][j])
                context = [ids[r][j] for _, j in seen] + [ids[r][q]]
                logits[r, w - first] = self._row_logits(context_state(context, pos[r][q], n_states))
        return CausalLMOutputWithPast(logits=logits, cache=cache if use_cache is not False else None)


def _cache_slots(cache: DynamicCache | None, R: int) -> torch.Tensor:
    """The cached (token, position) pairs ``[R, C, 2]`` (C = 0 for an empty cache)."""
    layers = [layer for layer in getattr(cache, "layers", []) if getattr(layer, "keys", None) is not None]
    if not layers or layers[0].keys.numel() == 0:
        return torch.zeros(R, 0, 2)
    keys = layers[0].keys  # [R, 1, C, 2]
    if keys.shape[0] != R:
        raise ValueError(f"cache: holds {keys.shape[0]} rows, input_ids has {R}")
    return keys[:, 0].to(torch.float32)


def _default_positions(mask: torch.Tensor | None, C: int, W: int, R: int, device: torch.device) -> torch.Tensor:
    if mask is not None and mask.dim() == 2 and mask.shape[1] == C + W:
        return (mask.long().cumsum(dim=1) - 1).clamp(min=0)[:, C:]
    return (C + torch.arange(W, device=device)).expand(R, W)


def _allowed(mask: torch.Tensor | None, R: int, W: int, C: int) -> torch.Tensor:
    """``[R, W, C + W]`` bool: which slots each new token attends to (causal, before its own slot)."""
    causal = torch.ones(W, C + W, dtype=torch.bool).tril(diagonal=C)
    if mask is None:
        return causal.expand(R, W, C + W)
    if mask.dim() == 2:
        if tuple(mask.shape) != (R, C + W):
            raise ValueError(f"attention_mask: expected [{R}, {C + W}] for 2-D, got {tuple(mask.shape)}")
        return causal[None] & mask.bool().cpu()[:, None, :]
    if mask.dim() == 4:
        if tuple(mask.shape[-2:]) != (W, C + W) or mask.shape[1] != 1:
            raise ValueError(f"attention_mask: expected [{R}, 1, {W}, {C + W}] for 4-D, got {tuple(mask.shape)}")
        attend = mask.cpu() if mask.dtype == torch.bool else mask.cpu() > torch.finfo(mask.dtype).min / 2
        return attend[:, 0].expand(R, W, C + W) & causal[None]
    raise ValueError(f"attention_mask: expected a 2-D or 4-D mask, got {mask.dim()}-D")
