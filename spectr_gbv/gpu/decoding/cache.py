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
  path runs.

Only full-attention decoder layers (``DynamicLayer``) are supported: sliding-window or
linear-attention layers raise ``NotImplementedError``. Custom 4-D masks need the ``eager`` or
``sdpa`` attention implementation (used only when rows are ragged, i.e. batch > 1).

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


def _cache_kwarg(model: torch.nn.Module) -> str:
    """Name of the forward's cache argument: ``cache`` (transformers >= 5.2x) or ``past_key_values``."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover - exotic wrappers
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def model_forward(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    cache: DynamicCache,
    position_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
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

    Returns
    -------
    Tensor [R, W, V], float
        Logits (the model's dtype).
    """
    kwargs = {_cache_kwarg(model): cache}
    out = model(
        input_ids=input_ids,
        position_ids=position_ids,
        attention_mask=attention_mask,
        use_cache=True,
        **kwargs,
    )
    return out.logits


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
    def lengths(self) -> torch.Tensor:
        """Tensor [R], int64: number of valid slots per row (logical length)."""
        return self.valid.sum(dim=1)

    def forward(
        self, model: torch.nn.Module, tokens: torch.Tensor, token_valid: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Feed W new tokens per row, append them to the cache, return their logits.

        Parameters
        ----------
        model : causal LM
        tokens : Tensor [R, W], int64
            Padding slots may hold any id in the vocabulary.
        token_valid : Tensor [R, W], bool, optional
            False marks padding (not attended to, not counted). Default: all valid.

        Returns
        -------
        Tensor [R, W, V]
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
        if not (bool(self.valid.all()) and bool(token_valid.all())):
            mask = self._additive_mask(token_valid, model.dtype)
        logits = model_forward(model, tokens, self.cache, position_ids, mask)
        self.valid = torch.cat([self.valid, token_valid], dim=1)
        return logits

    def _additive_mask(self, token_valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """[R, 1, W, C+W] additive mask: valid past slots, causal valid new slots, and the diagonal.

        The diagonal is always open so a padding query never attends to nothing (a fully
        masked softmax row would be NaN and leak into later layers through its keys).
        """
        R, W = token_valid.shape
        C = self.valid.shape[1]
        dev = self.valid.device
        past = self.valid[:, None, :].expand(R, W, C)
        causal = torch.ones(W, W, dtype=torch.bool, device=dev).tril()
        new = (token_valid[:, None, :] & causal[None]) | torch.eye(W, dtype=torch.bool, device=dev)[None]
        allowed = torch.cat([past, new], dim=2)[:, None]
        zero = torch.zeros((), dtype=dtype, device=dev)
        return torch.where(allowed, zero, torch.finfo(dtype).min)

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
