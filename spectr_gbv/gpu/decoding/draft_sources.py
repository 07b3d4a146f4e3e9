r"""Draft sources: K i.i.d. drafts of L tokens per row, with the exact laws they were drawn from.

A :class:`DraftSource` is stateful per generation: :meth:`~DraftSource.begin` receives the
prompts, each :meth:`~DraftSource.propose` returns drafts ``[B, K, L]`` and laws
``q [B, K, L, V]`` with ``q[b, k, t] = q(. | context_b, X^(k)_{1:t})``, the very tensor each
token ``X^(k)_{t+1}`` was sampled from (ECOSYSTEM.md B2/B3: never report a law other than
the one sampled from), and :meth:`~DraftSource.commit` tells it which draft prefix was
accepted and which token followed, so it can roll its state back to the accepted path.

Implementations: :class:`HFDraftSource` (any Hugging Face causal LM; one batched forward per
draft position, the context's KV cache computed once and expanded to K rows) and
:class:`NGramDraftSource` (an add-``smoothing`` n-gram model counted on an optional corpus
plus each row's own context).

References
----------
Leviathan et al. 2023 (draft model), Sun et al. 2023 (SpecTr: K i.i.d. drafts);
THEORY.md sections 1 and 6.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch

from spectr_gbv.gpu.decoding.cache import RowCache, model_vocab_size
from spectr_gbv.gpu.decoding.guards import eval_mode
from spectr_gbv.gpu.decoding.sampling import SamplingConfig, process_logits, sample_from
from spectr_gbv.gpu.decoding.tree import TokenTree


@runtime_checkable
class DraftSource(Protocol):
    """What the decoder needs from a drafter: four attributes and four methods.

    The decoder reads every attribute below as a plain attribute and refuses (``ValueError``) a
    draft that is neither a causal LM nor has all of them. A source that runs no model inherits
    the last three from :class:`DraftSourceBase` (``model = None``, both counters 0).

    Attributes
    ----------
    vocab_size : int
        V; must equal the target's (checked by the decoder).
    model : torch.nn.Module or None
        The module the source runs, or None. The decoder runs it in eval mode during
        ``generate`` (restoring its mode after), checks the prompt against its context size
        and, for a batch, that it honours custom attention masks. A value that is not a
        ``torch.nn.Module`` counts as None.
    forward_calls : int
        Model forwards made since construction (non-decreasing); the decoder reports its
        increase over :meth:`begin`, :meth:`propose` and :meth:`commit` as
        ``DecodeStats.draft_calls``. 0 for a source without a model.
    positions : int
        Draft positions fed to the model since construction (non-decreasing); the decoder
        reports its increase over a ``generate`` call as ``DecodeStats.draft_positions``. 0 for
        a source without a model.
    """

    vocab_size: int
    model: torch.nn.Module | None
    forward_calls: int
    positions: int

    def begin(self, prompt_ids: torch.Tensor) -> None:
        """Start a generation for prompts ``[B, T]`` (int64, T >= 1, same T for every row)."""
        ...

    def propose(
        self,
        num_drafts: int,
        draft_length: int,
        sampling: SamplingConfig,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K i.i.d. drafts per active row.

        Returns
        -------
        drafts : Tensor [B, K, L], int64
        draft_probs : Tensor [B, K, L, V], float
            ``draft_probs[b, k, t]`` is the law ``drafts[b, k, t]`` was drawn from (after the
            ``sampling`` processing), a function of the row's context and ``drafts[b, k, :t]``.
            The decoder refuses other shapes or dtypes with ``ValueError``
            (:func:`~spectr_gbv.gpu.decoding.guards.check_proposal`). A source built on a
            ``torch.nn.Module`` exposes it as ``model`` so that the decoder runs it in eval mode.
        """
        ...

    def commit(self, draft_index: torch.Tensor, num_accepted: torch.Tensor, next_token: torch.Tensor) -> None:
        """Extend each row by ``drafts[b, draft_index[b], :num_accepted[b]]`` then ``next_token[b]``.

        Parameters
        ----------
        draft_index, num_accepted, next_token : Tensor [B], int64
            Refer to the last :meth:`propose`.
        """
        ...

    def select_rows(self, rows: torch.Tensor) -> None:
        """Keep only the active rows ``rows`` (Tensor [B'], int64, indices into the current rows)."""
        ...


class DraftSourceBase:
    """The defaults of :class:`DraftSource`'s bookkeeping attributes, for sources to inherit.

    A draft source that runs no ``torch.nn.Module`` (or does not count its forwards) subclasses
    this class and implements ``vocab_size``, ``begin``, ``propose``, ``commit`` and
    ``select_rows``; it then satisfies :class:`DraftSource`. An instance may override any
    attribute (e.g. ``self.model = module`` in ``__init__``).

    Attributes
    ----------
    model : torch.nn.Module or None
        None: no module for the decoder to guard.
    forward_calls : int
        0: the decoder reports no draft forwards.
    positions : int
        0: the decoder reports no draft positions.
    """

    model: torch.nn.Module | None = None
    forward_calls: int = 0
    positions: int = 0


def _check_propose_args(num_drafts: int, draft_length: int) -> None:
    if num_drafts < 1 or draft_length < 1:
        raise ValueError(f"propose: K and L must be >= 1, got K={num_drafts}, L={draft_length}")


class HFDraftSource:
    """Draft model = a Hugging Face causal LM with a KV cache shared by the K drafts.

    Per iteration: one forward over each row's not-yet-cached tokens (1, or 2 after a fully
    accepted draft: the last draft token and the following one; the head runs on the last
    only), whose logits give the first-position law; then one forward per further position.

    * Tree drafting (K > 1, a model that honours custom masks: ``tree=None`` probes it with
      :func:`~spectr_gbv.gpu.decoding.tree_support.supports_tree_attention`): the drafts of a
      row that share a prefix share its node (:class:`~spectr_gbv.gpu.decoding.tree.TokenTree`),
      so each position's forward feeds each row's *distinct* prefixes once, as one row of the
      cache with the ancestor mask; the law of a shared prefix is computed and processed
      once. On :meth:`commit` the accepted path's slots are kept (only those are copied).
    * Flat drafting (K = 1, or a model that refuses custom masks): the cache is expanded to K
      rows per row and each position is one batched forward on ``B * K`` rows; on
      :meth:`commit` row ``draft_index`` is kept and cropped to the accepted path.

    Both draw every token from exactly the law they report, i.i.d. across the K drafts.

    Parameters
    ----------
    model : transformers PreTrainedModel
        Causal LM (full attention), already on the decoder's device. Its train/eval mode is
        left to the caller: :meth:`begin` and :meth:`propose` run it in eval mode and restore
        the mode after (warning with
        :class:`~spectr_gbv.gpu.decoding.guards.TrainingModeWarning` when it was training).
    tree : bool or None
        ``None`` (default): tree drafting when K > 1 and the model passes the probe; ``True``:
        tree drafting whenever K > 1 (``ValueError`` at the first :meth:`propose` if the model
        fails the probe); ``False``: flat drafting.

    Attributes
    ----------
    vocab_size : int
        Width of the model's logits (``get_output_embeddings().out_features``, else
        ``config.vocab_size``).
    forward_calls : int
        Model forwards made since construction.
    positions : int
        Draft positions fed to the model in :meth:`propose` since construction (distinct
        prefixes in tree mode, ``K`` per row and position in flat mode; padding excluded).
    """

    def __init__(self, model: torch.nn.Module, tree: bool | None = None) -> None:
        if tree not in (None, True, False):
            raise ValueError(f"tree must be None, True or False, got {tree!r}")
        self.model = model
        self.vocab_size = model_vocab_size(model)
        self.forward_calls = 0
        self.positions = 0
        self.tree = tree
        self._cache: RowCache | None = None

    @property
    def device(self) -> torch.device:
        """The model's device."""
        return next(self.model.parameters()).device

    def uses_tree(self, num_drafts: int) -> bool:
        """Whether :meth:`propose` with K = ``num_drafts`` drafts a token tree (see the class docstring).

        Raises
        ------
        ValueError
            ``tree=True`` and the model fails the tree-attention probe.
        """
        if num_drafts == 1 or self.tree is False:
            return False
        from spectr_gbv.gpu.decoding.tree_support import supports_tree_attention, tree_attention_refusal

        ok = supports_tree_attention(self.model)
        if self.tree and not ok:
            raise ValueError(f"tree=True, but {tree_attention_refusal(self.model, 'draft')}; use tree=None or False")
        return ok

    def begin(self, prompt_ids: torch.Tensor) -> None:
        """Prefill the cache with all prompt tokens but the last (which stays pending)."""
        B, T = prompt_ids.shape
        self._cache = RowCache(B, self.device)
        if T > 1:
            with torch.no_grad(), eval_mode({"draft": self.model}, "HFDraftSource.begin"):
                self._cache.forward(self.model, prompt_ids[:, :-1], logits_to_keep=1)
            self.forward_calls += 1
        # Pending (not yet cached) tokens, left-padded to width 2: [pad, last].
        self._pending = torch.stack([prompt_ids[:, -1], prompt_ids[:, -1]], dim=1)
        self._pending_valid = torch.tensor([[False, True]], device=self.device).expand(B, 2).clone()

    def _sample_position(
        self,
        logits: torch.Tensor,
        sampling: SamplingConfig,
        generator: torch.Generator | None,
        index: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Laws of one position and one token drawn from exactly each.

        Parameters
        ----------
        logits : Tensor [R, V]
            One row per distinct prefix (processed once each).
        index : Tensor [R'], int64, optional
            The row of each draft (default: one draft per row).

        Returns
        -------
        tokens : Tensor [R'], int64
        q : Tensor [R', V]
            ``process_logits(logits)[index]``: the law each token was drawn from.
        """
        q = process_logits(logits, sampling)
        if index is not None:
            q = q[index]
        return sample_from(q, generator), q

    def _root_logits(self) -> torch.Tensor:
        """Feed the pending tokens; logits [B, V] of the first draft position."""
        cache = self._cache
        width = 2 if bool(self._pending_valid[:, 0].any()) else 1  # 1 token pending in every row
        logits = cache.forward(self.model, self._pending[:, -width:], self._pending_valid[:, -width:], logits_to_keep=1)
        self.forward_calls += 1
        self._base_lengths = cache.lengths  # context + pending, per row [B]
        self._tree_start = cache.physical_length
        return logits[:, -1]

    @torch.no_grad()
    def propose(
        self,
        num_drafts: int,
        draft_length: int,
        sampling: SamplingConfig,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """See :meth:`DraftSource.propose`; L forwards (the first on the pending tokens), in eval mode."""
        _check_propose_args(num_drafts, draft_length)
        with eval_mode({"draft": self.model}, "HFDraftSource.propose"):
            return self._propose(num_drafts, draft_length, sampling, generator)

    def _propose(
        self,
        num_drafts: int,
        draft_length: int,
        sampling: SamplingConfig,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`propose` with the model in eval mode."""
        self._tree = self.uses_tree(num_drafts)
        logits = self._root_logits()
        if self._tree:
            return self._propose_tree(logits, num_drafts, draft_length, sampling, generator)
        cache, K, L = self._cache, num_drafts, draft_length
        B = logits.shape[0]
        cache.repeat(K)
        token, q = self._sample_position(logits.repeat_interleave(K, dim=0), sampling, generator)
        tokens, laws = [token], [q]
        for _ in range(1, L):
            logits = cache.forward(self.model, tokens[-1][:, None])[:, -1]
            self.forward_calls += 1
            token, q = self._sample_position(logits, sampling, generator)
            tokens.append(token)
            laws.append(q)
        self.positions += B * K * (L - 1) + B
        self._drafts = torch.stack(tokens, dim=1).view(B, K, L)
        return self._drafts, torch.stack(laws, dim=1).view(B, K, L, -1)

    def _propose_tree(
        self,
        logits: torch.Tensor,
        K: int,
        L: int,
        sampling: SamplingConfig,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Tree drafting: each position's forward feeds the rows' distinct prefixes once."""
        cache, B, dev = self._cache, logits.shape[0], logits.device
        rows = torch.arange(B, device=dev)
        # the root law once per row, K i.i.d. first tokens from it
        token, q = self._sample_position(logits, sampling, generator, rows.repeat_interleave(K))
        tree = TokenTree(B, K, dev)
        tokens, laws = [token.view(B, K)], [q.view(B, K, -1)]
        self.positions += B
        for _ in range(1, L):
            slab = tree.add_level(tokens[-1])
            n = slab.stop - slab.start
            # [B, n] as model_forward documents (a [B, 1] tensor relies on the model broadcasting it)
            positions = (self._base_lengths[:, None] + slab.depth - 1).expand(B, n)
            # the slab attends to the earlier slabs' ancestors (tree slots 1..) and to itself
            attend = tree.ancestors()[:, slab.start : slab.stop, 1:]
            logits = cache.forward_masked(self.model, slab.tokens, slab.valid, positions, attend, self._tree_start)
            self.forward_calls += 1
            self.positions += slab.num_valid
            # one law per distinct prefix; each draft draws from its node's law
            node = rows[:, None] * n + tree.node_index()[:, :, -1] - slab.start  # [B, K]
            token, q = self._sample_position(logits.reshape(B * n, -1), sampling, generator, node.reshape(-1))
            tokens.append(token.view(B, K))
            laws.append(q.view(B, K, -1))
        self._node_index = tree.node_index()  # [B, K, L]: nodes of prefixes 0..L-1 (the cached ones)
        self._drafts = torch.stack(tokens, dim=2)
        return self._drafts, torch.stack(laws, dim=2)

    def commit(self, draft_index: torch.Tensor, num_accepted: torch.Tensor, next_token: torch.Tensor) -> None:
        """Keep context + the accepted tokens (at most L - 1 of them are cached), then set the pending tokens."""
        B, K, L = self._drafts.shape
        rows = torch.arange(B, device=self.device)
        kept = num_accepted.clamp(max=L - 1)
        if self._tree:
            # tree slot of the node of prefix length t (t >= 1) is its id - 1 after the tree start
            path = self._node_index[rows, draft_index, 1:] - 1  # [B, L - 1]
            self._cache.keep_slots(self._tree_start, path, kept)
        else:
            self._cache.select(rows * K + draft_index)
            self._cache.truncate(self._base_lengths + kept)
        last_draft = self._drafts[rows, draft_index, L - 1]
        full = num_accepted == L
        self._pending = torch.stack([torch.where(full, last_draft, next_token), next_token], dim=1)
        self._pending_valid = torch.stack([full, torch.ones_like(full)], dim=1)

    def select_rows(self, rows: torch.Tensor) -> None:
        """Drop finished rows."""
        self._cache.select(rows)
        self._pending = self._pending[rows]
        self._pending_valid = self._pending_valid[rows]


class NGramDraftSource(DraftSourceBase):
    r"""Add-``smoothing`` n-gram draft model over the corpus and each row's own context.

    .. math::
        q(v \mid \ldots, x_{t-n+2..t}) = \frac{c(x_{t-n+2..t}, v) + s}{\sum_u c(x_{t-n+2..t}, u) + s V}

    (shorter contexts at the start of a sequence use what is there), then the decoder's
    :class:`~spectr_gbv.gpu.decoding.sampling.SamplingConfig` applied to :math:`\log q` as logits, so the
    drafts are sampled from, and reported as, the same processed law. Counts ``c`` are the
    corpus counts plus the counts of the row's committed context (prompt and accepted
    tokens); they change only on :meth:`commit`, so within one iteration ``q`` is a function
    of the context and the draft prefix, as verifiers require.

    Parameters
    ----------
    vocab_size : int
        V >= 1.
    order : int
        n >= 1 (1 = unigram).
    smoothing : float
        s > 0 (keeps every token's probability positive before top-k/top-p).
    corpus : sequence of sequences of int, optional
        Token-id sequences to count once at construction.
    device : torch.device or str, optional
        Where the laws are built (default CPU).

    Raises
    ------
    ValueError
        Bad V, n, s, or a corpus id outside ``0..V-1``.
    """

    def __init__(
        self,
        vocab_size: int,
        order: int = 2,
        smoothing: float = 0.5,
        corpus: Sequence[Sequence[int]] | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        if vocab_size < 1 or order < 1 or not smoothing > 0:
            raise ValueError(
                f"NGramDraftSource: need vocab_size >= 1, order >= 1, smoothing > 0; got "
                f"{vocab_size}, {order}, {smoothing}"
            )
        self.vocab_size, self.order, self.smoothing = vocab_size, order, float(smoothing)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self._corpus: dict[tuple[int, ...], torch.Tensor] = defaultdict(self._zeros)
        for seq in corpus or ():
            self._count(self._corpus, [int(v) for v in seq], 0)

    def _zeros(self) -> torch.Tensor:
        return torch.zeros(self.vocab_size, dtype=torch.float64)

    def _count(self, table: dict[tuple[int, ...], torch.Tensor], seq: list[int], start: int) -> None:
        """Count the n-grams of ``seq`` ending at positions >= ``start``."""
        for i in range(start, len(seq)):
            if not 0 <= seq[i] < self.vocab_size:
                raise ValueError(f"NGramDraftSource: token id {seq[i]} outside 0..{self.vocab_size - 1}")
            table[tuple(seq[max(0, i - self.order + 1) : i])][seq[i]] += 1

    def _law(self, row: int, history: list[int]) -> torch.Tensor:
        ctx = tuple(history[max(0, len(history) - self.order + 1) :])
        counts = self._corpus.get(ctx, None)
        own = self._tables[row].get(ctx, None)
        total = self._zeros() + self.smoothing
        if counts is not None:
            total += counts
        if own is not None:
            total += own
        return total / total.sum()

    def begin(self, prompt_ids: torch.Tensor) -> None:
        """Count each row's prompt."""
        self._contexts = [[int(v) for v in row] for row in prompt_ids.tolist()]
        self._tables: list[dict[tuple[int, ...], torch.Tensor]] = []
        for ctx in self._contexts:
            table: dict[tuple[int, ...], torch.Tensor] = defaultdict(self._zeros)
            self._count(table, ctx, 0)
            self._tables.append(table)

    def propose(
        self,
        num_drafts: int,
        draft_length: int,
        sampling: SamplingConfig,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """See :meth:`DraftSource.propose`."""
        _check_propose_args(num_drafts, draft_length)
        B, K, L = len(self._contexts), num_drafts, draft_length
        dev = generator.device if generator is not None else self.device
        drafts = torch.zeros(B, K, L, dtype=torch.int64)
        laws = []
        for t in range(L):
            raw = torch.stack(
                [self._law(b, self._contexts[b] + drafts[b, k, :t].tolist()) for b in range(B) for k in range(K)]
            )
            q = process_logits(raw.log().to(dev), sampling)
            tok = sample_from(q, generator)
            drafts[:, :, t] = tok.view(B, K).cpu()
            laws.append(q.view(B, K, -1))
        self._drafts = drafts
        return drafts.to(dev), torch.stack(laws, dim=2)

    def commit(self, draft_index: torch.Tensor, num_accepted: torch.Tensor, next_token: torch.Tensor) -> None:
        """Append the accepted tokens and the next token to each row's context and counts."""
        idx, tau, nxt = draft_index.tolist(), num_accepted.tolist(), next_token.tolist()
        for b, ctx in enumerate(self._contexts):
            start = len(ctx)
            ctx.extend(self._drafts[b, idx[b], : tau[b]].tolist() + [nxt[b]])
            self._count(self._tables[b], ctx, start)

    def select_rows(self, rows: torch.Tensor) -> None:
        """Drop finished rows."""
        keep = rows.tolist()
        self._contexts = [self._contexts[r] for r in keep]
        self._tables = [self._tables[r] for r in keep]
