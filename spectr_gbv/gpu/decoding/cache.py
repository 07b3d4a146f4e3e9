r"""KV-cache helpers for speculative decoding with Hugging Face causal LMs.

Two levels:

* plain helpers on a ``transformers.DynamicCache`` (:func:`crop_cache` to an absolute length,
  :func:`select_cache_rows`, :func:`repeat_cache_rows`), written against the per-layer
  ``keys``/``values`` tensors ``[R, H, C, D]`` because ``DynamicCache.crop`` in transformers 5.x
  only accepts negative counts (a positive argument raises) and its batch helpers skip
  uninitialised layers differently across versions;
* :class:`RowCache`, a cache of R independent rows with a per-row validity mask ``[R, C]``, so
  that rows with different accepted lengths share one batched forward: stale entries are
  masked out by an explicit 4-D additive attention mask and positions are passed explicitly
  (``position_ids``), so a row's logits equal those of a forward on that row alone. When every
  entry is valid (always the case for one row) no mask is built and the model's own causal
  path runs. :meth:`RowCache.forward_masked` feeds a token tree (each node attends to the
  context, its ancestors and itself) and :meth:`RowCache.keep_slots` keeps the accepted path,
  copying only the tree's slots.

Only full-attention decoder layers (``DynamicLayer``) are supported: sliding-window or
linear-attention layers raise ``NotImplementedError``. Custom 4-D masks need the ``eager`` or
``sdpa`` attention implementation (used for token trees and when rows are ragged, i.e.
batch > 1; :mod:`spectr_gbv.gpu.decoding.tree_support` checks a model honours them).

References
----------
Leviathan et al. 2023, Chen et al. 2023 (speculative decoding, rollback of rejected tokens);
THEORY.md section 1 (one iteration = one target call over every draft prefix).
"""

from __future__ import annotations

import inspect

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

#: Forward parameter names per model class (``inspect.signature`` costs tens of microseconds a call).
_FORWARD_PARAMS: dict[type, frozenset[str]] = {}


def _forward_params(model: torch.nn.Module) -> frozenset[str]:
    """Parameter names of ``model.forward``, cached per class."""
    cls = type(model)
    params = _FORWARD_PARAMS.get(cls)
    if params is None:
        try:
            params = frozenset(inspect.signature(model.forward).parameters)
        except (TypeError, ValueError):  # pragma: no cover - exotic wrappers
            params = frozenset()
        _FORWARD_PARAMS[cls] = params
    return params


def _cache_kwarg(model: torch.nn.Module) -> str:
    """Name of the forward's cache argument: ``cache`` (transformers >= 5.2x) or ``past_key_values``."""
    return "cache" if "cache" in _forward_params(model) else "past_key_values"


def model_forward(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    cache: DynamicCache,
    position_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    logits_to_keep: int | None = None,
) -> torch.Tensor:
    """Run a causal LM on new tokens with a cache, updating the cache in place.

    Parameters
    ----------
    model : transformers PreTrainedModel (causal LM)
    input_ids : Tensor [R, W], int64
    cache : DynamicCache
        Holding ``C`` past positions for the R rows (possibly empty); grows by W.
    position_ids : Tensor [R, W], int64
        Logical positions of the new tokens.
    attention_mask : Tensor [R, 1, W, C + W], float, optional
        Additive mask (0 = attend, dtype-min = masked); ``None`` = plain causal attention.
    logits_to_keep : int, optional
        ``k >= 1``: only the last k positions need logits (the LM head runs on those alone
        when the model's forward takes ``logits_to_keep``, as transformers' causal LMs do;
        otherwise every position is computed and the last k returned).

    Returns
    -------
    Tensor [R, W, V] (or [R, k, V]), float
        Logits (the model's dtype).
    """
    kwargs: dict[str, object] = {_cache_kwarg(model): cache}
    if logits_to_keep is not None and "logits_to_keep" in _forward_params(model):
        kwargs["logits_to_keep"] = int(logits_to_keep)
    out = model(
        input_ids=input_ids,
        position_ids=position_ids,
        attention_mask=attention_mask,
        use_cache=True,
        **kwargs,
    )
    logits = out.logits
    return logits if logits_to_keep is None else logits[:, -int(logits_to_keep) :]


def _layers(cache: DynamicCache) -> list[DynamicLayer]:
    layers = list(getattr(cache, "layers", []))
    for i, layer in enumerate(layers):
        if type(layer) is not DynamicLayer:
            raise NotImplementedError(
                f"cache layer {i} is a {type(layer).__name__}; only full-attention DynamicLayer caches are "
                "supported (sliding-window / linear-attention layers cannot be rolled back by slicing)"
            )
    return [layer for layer in layers if layer.is_initialized and layer.keys is not None]


def cache_length(cache: DynamicCache) -> int:
    """Physical sequence length C of a cache (0 when empty)."""
    layers = _layers(cache)
    return int(layers[0].keys.shape[-2]) if layers else 0


def crop_cache(cache: DynamicCache, length: int) -> None:
    """Keep the first ``length`` positions of every layer (absolute length, in place).

    Parameters
    ----------
    cache : DynamicCache
    length : int
        ``0 <= length <= C``.

    Raises
    ------
    ValueError
        ``length`` outside ``[0, C]``.
    NotImplementedError
        A non-``DynamicLayer`` layer.
    """
    c = cache_length(cache)
    if not 0 <= length <= c:
        raise ValueError(f"crop_cache: length must be in [0, {c}], got {length}")
    for layer in _layers(cache):
        layer.keys = layer.keys[..., :length, :]
        layer.values = layer.values[..., :length, :]


def select_cache_rows(cache: DynamicCache, rows: torch.Tensor) -> None:
    """Keep (and reorder, or duplicate) batch rows: ``keys <- keys[rows]`` in every layer.

    Parameters
    ----------
    cache : DynamicCache
    rows : Tensor [R'], int64
        Row indices into the current batch.
    """
    for layer in _layers(cache):
        idx = rows.to(layer.keys.device)
        layer.keys = layer.keys.index_select(0, idx)
        layer.values = layer.values.index_select(0, idx)


def repeat_cache_rows(cache: DynamicCache, repeats: int) -> None:
    """Repeat every row ``repeats`` times in place (row r becomes rows r*repeats .. r*repeats+repeats-1)."""
    for layer in _layers(cache):
        layer.keys = layer.keys.repeat_interleave(repeats, dim=0)
        layer.values = layer.values.repeat_interleave(repeats, dim=0)


def _gather_cache_positions(cache: DynamicCache, index: torch.Tensor) -> None:
    """``keys[r, :, c] <- keys[r, :, index[r, c]]`` for every layer (index [R, C'])."""
    for layer in _layers(cache):
        idx = index.to(layer.keys.device)[:, None, :, None]
        layer.keys = torch.gather(layer.keys, 2, idx.expand(-1, layer.keys.shape[1], -1, layer.keys.shape[3]))
        layer.values = torch.gather(layer.values, 2, idx.expand(-1, layer.values.shape[1], -1, layer.values.shape[3]))


class RowCache:
    """KV cache of R independent rows with a per-row validity mask.

    Row ``r`` has processed the tokens whose cache slots ``valid[r]`` marks, in slot order;
    :attr:`lengths` counts them (the row's logical length). Slots of a row that are not valid
    (padding inside a block, rejected draft tokens) are never attended to.

    Two ways to feed new tokens: :meth:`forward` (each new token sees the row's valid slots and
    the new tokens before it: a chain) and :meth:`forward_masked` (each new token sees what an
    explicit mask says: a token tree); :meth:`keep_slots` then keeps a tree's accepted path.

    Parameters
    ----------
    num_rows : int
        R >= 1.
    device : torch.device

    Attributes
    ----------
    cache : DynamicCache
        Keys/values ``[R, H, C, D]`` per layer.
    valid : Tensor [R, C], bool
    """

    def __init__(self, num_rows: int, device: torch.device) -> None:
        self.cache = DynamicCache()
        self.valid = torch.zeros(num_rows, 0, dtype=torch.bool, device=device)

    @property
    def num_rows(self) -> int:
        """R."""
        return int(self.valid.shape[0])

    @property
    def physical_length(self) -> int:
        """C: cache slots per row, valid or not."""
        return int(self.valid.shape[1])

    @property
    def lengths(self) -> torch.Tensor:
        """Tensor [R], int64: number of valid slots per row (logical length)."""
        return self.valid.sum(dim=1)

    def forward(
        self,
        model: torch.nn.Module,
        tokens: torch.Tensor,
        token_valid: torch.Tensor | None = None,
        logits_to_keep: int | None = None,
    ) -> torch.Tensor:
        """Feed W new tokens per row, append them to the cache, return their logits.

        Parameters
        ----------
        model : causal LM
        tokens : Tensor [R, W], int64
            Padding slots may hold any id in the vocabulary.
        token_valid : Tensor [R, W], bool, optional
            False marks padding (not attended to, not counted). Default: all valid.
        logits_to_keep : int, optional
            Only the last k positions' logits are computed and returned (see :func:`model_forward`).

        Returns
        -------
        Tensor [R, W, V] (or [R, k, V])
            Logits; rows of padding slots are meaningless (but finite).
        """
        R, W = tokens.shape
        if R != self.num_rows:
            raise ValueError(f"RowCache.forward: tokens has {R} rows, the cache {self.num_rows}")
        if token_valid is None:
            token_valid = torch.ones(R, W, dtype=torch.bool, device=tokens.device)
        token_valid = token_valid.to(self.valid.device)
        lengths = self.lengths
        position_ids = (lengths[:, None] + token_valid.long().cumsum(dim=1) - 1).clamp(min=0)
        mask = None
        if not bool(self.valid.all() & token_valid.all()):
            causal = torch.ones(W, W, dtype=torch.bool, device=self.valid.device).tril()
            mask = self._additive_mask(token_valid[:, None, :] & causal[None], self.physical_length, model.dtype)
        logits = model_forward(model, tokens, self.cache, position_ids, mask, logits_to_keep)
        self.valid = torch.cat([self.valid, token_valid], dim=1)
        return logits

    def forward_masked(
        self,
        model: torch.nn.Module,
        tokens: torch.Tensor,
        token_valid: torch.Tensor,
        position_ids: torch.Tensor,
        attend: torch.Tensor,
        attend_from: int,
    ) -> torch.Tensor:
        """Feed W new tokens per row with an explicit attention pattern (a token tree).

        Parameters
        ----------
        model : causal LM
            Must honour custom 4-D attention masks and explicit ``position_ids``
            (:func:`spectr_gbv.gpu.decoding.tree_support.supports_tree_attention`).
        tokens : Tensor [R, W], int64
        token_valid : Tensor [R, W], bool
            False marks padding (never attended to by a valid token, not counted).
        position_ids : Tensor [R, W], int64
            Logical position of each new token (a tree node: the row's length + its depth).
        attend : Tensor [R, W, C + W - attend_from], bool
            Which slots from ``attend_from`` on (the new tokens included, last) each new token
            attends to; the slots before ``attend_from`` are attended to where valid. The
            diagonal is always opened (a query attending to nothing would be NaN).
        attend_from : int
            ``0 <= attend_from <= C``.

        Returns
        -------
        Tensor [R, W, V]
            Logits of every new token.

        Raises
        ------
        ValueError
            Shapes that do not fit the cache.
        """
        R, W = tokens.shape
        C = self.physical_length
        if R != self.num_rows or not 0 <= attend_from <= C or tuple(attend.shape) != (R, W, C + W - attend_from):
            raise ValueError(
                f"RowCache.forward_masked: tokens {tuple(tokens.shape)}, attend {tuple(attend.shape)} and "
                f"attend_from {attend_from} do not fit a cache of {self.num_rows} rows x {C} slots"
            )
        mask = self._additive_mask(attend.to(self.valid.device), attend_from, model.dtype)
        logits = model_forward(model, tokens, self.cache, position_ids, mask)
        self.valid = torch.cat([self.valid, token_valid.to(self.valid.device)], dim=1)
        return logits

    def _additive_mask(self, attend: torch.Tensor, attend_from: int, dtype: torch.dtype) -> torch.Tensor:
        """[R, 1, W, C+W] additive mask: valid slots before ``attend_from``, then ``attend`` [R, W, C+W-from].

        The diagonal is always open so a padding query never attends to nothing (a fully
        masked softmax row would be NaN and leak into later layers through its keys).
        """
        R, W = attend.shape[:2]
        C = self.physical_length
        past = self.valid[:, None, :attend_from].expand(R, W, attend_from)
        allowed = torch.cat([past, attend], dim=2)
        diagonal = torch.arange(W, device=allowed.device)
        allowed[:, diagonal, C + diagonal] = True
        zero = torch.zeros((), dtype=dtype, device=allowed.device)
        return torch.where(allowed[:, None], zero, torch.finfo(dtype).min)

    def keep_slots(self, start: int, slots: torch.Tensor, count: torch.Tensor) -> None:
        """Keep, after slot ``start``, the slots ``start + slots[r, :count[r]]`` of each row, in that order.

        The kept slots move to ``start, start + 1, ...`` (only the tail is copied: the slots
        before ``start`` stay where they are) and everything after ``start + max(count)`` is
        dropped; a row that keeps fewer slots has invalid ones at the end of its tail. When the
        invalid slots of ragged rows add up to a quarter of the cache (and at least 32), the cache
        is compacted (:meth:`compact`).

        Parameters
        ----------
        start : int
            ``0 <= start <= C``.
        slots : Tensor [R, S], int64
            Offsets from ``start`` of the slots to keep (row r reads its first ``count[r]``), each
            in ``[0, C - start)``.
        count : Tensor [R], int64
            ``0 <= count[r] <= S``.
        """
        C = self.physical_length
        count = count.to(self.valid.device)
        if not count.numel():
            return
        # one host sync: the new tail's width and the longest row after the cut
        w, longest = torch.stack([count.max(), (self.valid[:, :start].sum(dim=1) + count).max()]).tolist()
        idx = (start + slots[:, :w]).clamp(max=max(C - 1, 0)).to(self.valid.device)
        for layer in _layers(self.cache):
            for name in ("keys", "values"):
                x = getattr(layer, name)
                kept = torch.gather(x, 2, idx[:, None, :, None].expand(-1, x.shape[1], -1, x.shape[3]))
                x[:, :, start : start + w] = kept
                setattr(layer, name, x[:, :, : start + w])
        tail = torch.arange(w, device=self.valid.device)[None] < count[:, None]
        self.valid = torch.cat([self.valid[:, :start], tail], dim=1)
        waste = self.physical_length - longest
        if waste >= max(32, self.physical_length // 4):
            self.compact()

    def select(self, rows: torch.Tensor) -> None:
        """Keep rows ``rows`` (Tensor [R'], int64; repeats allowed), in that order."""
        rows = rows.to(self.valid.device)
        if rows.numel() == self.num_rows and bool((rows == torch.arange(self.num_rows, device=rows.device)).all()):
            return  # identity (K = 1, or no row finished): no copy
        select_cache_rows(self.cache, rows)
        self.valid = self.valid.index_select(0, rows)

    def repeat(self, repeats: int) -> None:
        """Row r -> rows r*repeats .. r*repeats + repeats - 1 (shared prefix for K drafts)."""
        if repeats == 1:
            return
        repeat_cache_rows(self.cache, repeats)
        self.valid = self.valid.repeat_interleave(repeats, dim=0)

    def truncate(self, lengths: torch.Tensor) -> None:
        """Keep the first ``lengths[r]`` valid slots of each row, then compact.

        Parameters
        ----------
        lengths : Tensor [R], int64
            ``0 <= lengths[r] <= self.lengths[r]``.

        Notes
        -----
        After compaction row r's valid slots are ``0 .. lengths[r]-1`` and the physical
        length is ``max(lengths)``; with equal lengths this is :func:`crop_cache`.
        """
        lengths = lengths.to(self.valid.device)
        if bool((lengths > self.lengths).any()) or bool((lengths < 0).any()):
            raise ValueError("RowCache.truncate: a requested length exceeds the row's length or is negative")
        self.valid = self.valid & (self.valid.long().cumsum(dim=1) <= lengths[:, None])
        self.compact()

    def compact(self) -> None:
        """Move each row's valid slots to the front and drop all-invalid trailing slots."""
        new_len = int(self.lengths.max()) if self.num_rows else 0
        prefix = torch.arange(self.valid.shape[1], device=self.valid.device)[None] < self.lengths[:, None]
        if not bool((self.valid == prefix).all()):
            order = torch.sort((~self.valid).to(torch.uint8), dim=1, stable=True).indices
            _gather_cache_positions(self.cache, order[:, :new_len])
        elif cache_length(self.cache):
            crop_cache(self.cache, new_len)
        self.valid = prefix[:, :new_len]


def model_vocab_size(model: torch.nn.Module) -> int:
    """Width V of a causal LM's logits.

    Parameters
    ----------
    model : transformers PreTrainedModel

    Returns
    -------
    int
        ``model.get_output_embeddings().out_features`` when available, else
        ``model.config.vocab_size``.

    Raises
    ------
    ValueError
        If neither is available.
    """
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None and getattr(head, "out_features", None):
        return int(head.out_features)
    v = getattr(getattr(model, "config", None), "vocab_size", None)
    if not v:
        raise ValueError(f"cannot determine the vocabulary size of {type(model).__name__}")
    return int(v)
