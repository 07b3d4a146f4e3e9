r"""Token trees of K drafts: every distinct draft prefix is one node, scored once.

Verifying K drafts of L tokens needs the target law ``p(. | context, x_{1:t})`` at every
prefix ``x_{1:t}`` (t = 0..L) of every draft, and drafting them needs the draft law ``q`` at
every prefix of length < L: one law per *distinct* prefix, not per draft. The K drafts of a
row always share the empty prefix (the pending token) and, where the draft is confident,
longer ones. A :class:`TokenTree` numbers the distinct prefixes of each row and gives a single
forward over all of them what it needs (SpecInfer's token-tree attention; Medusa and EAGLE
score their candidate trees the same way):

* the token of each node, and its depth (the node's position is the row's length + depth);
* the ancestor mask ``[B, N, N]``: node i attends to the context, its ancestors and itself
  (the 4-D attention mask handed to the model, with explicit ``position_ids``);
* :meth:`TokenTree.node_index` ``[B, K, T+1]``: the node holding the prefix of length t of draft
  k, to gather the per-draft laws ``[B, K, L(+1), V]`` the kernels take.

Layout. Node 0 is the empty prefix (the root). The nodes of depth t form one *slab* of
``n_t = max_b n_t(b)`` consecutive ids (a row with fewer distinct prefixes at depth t pads its
slab with invalid nodes), slabs in depth order, so a parent's id is always below its
children's, and a node id is also the node's offset in a cache that holds the tree's slots
in id order. Within a slab the nodes of a row are in order of the first draft that reaches
them. Building a slab compares the K keys (parent id, token) of a row pairwise: O(B K^2) per
depth, no sort, one host sync (the slab width).

References
----------
Miao et al., SpecInfer: Accelerating Large Language Model Serving with Tree-based
Speculative Inference and Verification, ASPLOS 2024 (token tree, tree attention); Cai et al.,
Medusa, ICML 2024; Li et al., EAGLE, ICML 2024; THEORY.md section 1 (one target call over
every draft prefix).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TreeSlab:
    """The nodes one :meth:`TokenTree.add_level` call created (one depth).

    Attributes
    ----------
    start, stop : int
        Node ids ``start .. stop - 1`` (``stop - start`` = the slab width n).
    tokens : Tensor [B, n], int64
        Token of each node (0 on padding).
    valid : Tensor [B, n], bool
        False on padding.
    depth : int
        Depth of every node of the slab (prefix length, >= 1).
    num_valid : int
        Valid nodes of the slab over all rows.
    """

    start: int
    stop: int
    tokens: torch.Tensor
    valid: torch.Tensor
    depth: int
    num_valid: int


class TokenTree:
    """The distinct prefixes of K drafts per row, built depth by depth.

    Parameters
    ----------
    batch_size : int
        B >= 1 rows.
    num_drafts : int
        K >= 1 drafts per row.
    device : torch.device or str
    root_tokens : Tensor [B], int64, optional
        Token of the root node (the pending token a target forward feeds first); default 0.

    Raises
    ------
    ValueError
        B or K < 1, or ``root_tokens`` of the wrong shape.

    Examples
    --------
    >>> import torch
    >>> tree = TokenTree.from_drafts(torch.tensor([[[5, 6], [5, 7], [5, 6]]]), root_tokens=torch.tensor([9]))
    >>> tree.size, tree.tokens().tolist(), tree.depths().tolist()
    (4, [[9, 5, 6, 7]], [[0, 1, 2, 2]])
    >>> tree.node_index().tolist()   # node of the prefix of length t of draft k
    [[[0, 1, 2], [0, 1, 3], [0, 1, 2]]]
    >>> tree.ancestors()[0].int().tolist()
    [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 0, 1]]
    """

    def __init__(
        self,
        batch_size: int,
        num_drafts: int,
        device: torch.device | str,
        root_tokens: torch.Tensor | None = None,
    ) -> None:
        if batch_size < 1 or num_drafts < 1:
            raise ValueError(f"TokenTree: batch_size and num_drafts must be >= 1, got {batch_size}, {num_drafts}")
        dev = torch.device(device)
        B, K = batch_size, num_drafts
        if root_tokens is None:
            root_tokens = torch.zeros(B, dtype=torch.int64, device=dev)
        if tuple(root_tokens.shape) != (B,):
            raise ValueError(f"TokenTree: root_tokens must have shape [{B}], got {tuple(root_tokens.shape)}")
        self.batch_size, self.num_drafts, self.device = B, K, dev
        self._node_of = [torch.zeros(B, K, dtype=torch.int64, device=dev)]
        self._tokens = [root_tokens.to(device=dev, dtype=torch.int64)[:, None]]
        self._valid = [torch.ones(B, 1, dtype=torch.bool, device=dev)]
        self._depth = [torch.zeros(B, 1, dtype=torch.int64, device=dev)]
        self._anc = torch.ones(B, 1, 1, dtype=torch.bool, device=dev)
        self._arange_k = torch.arange(K, device=dev)
        #: Valid nodes over all rows, the roots included (a host int, kept without a sync).
        self.num_valid = B

    @classmethod
    def from_drafts(cls, drafts: torch.Tensor, root_tokens: torch.Tensor | None = None) -> TokenTree:
        """The tree of complete drafts.

        Parameters
        ----------
        drafts : Tensor [B, K, L], int64
        root_tokens : Tensor [B], int64, optional

        Returns
        -------
        TokenTree
            With L levels.

        Raises
        ------
        ValueError
            ``drafts`` is not 3-d.
        """
        if drafts.ndim != 3:
            raise ValueError(f"TokenTree.from_drafts: drafts must have shape [B, K, L], got {tuple(drafts.shape)}")
        B, K, L = drafts.shape
        tree = cls(B, K, drafts.device, root_tokens)
        for t in range(L):
            tree.add_level(drafts[:, :, t])
        return tree

    @property
    def size(self) -> int:
        """N: the number of node ids (padding included)."""
        return int(self._anc.shape[-1])

    @property
    def num_levels(self) -> int:
        """Depth of the deepest slab (levels added so far)."""
        return len(self._node_of) - 1

    def add_level(self, tokens: torch.Tensor) -> TreeSlab:
        """Extend every draft by one token; the distinct (parent, token) pairs become new nodes.

        Parameters
        ----------
        tokens : Tensor [B, K], int64
            Token t + 1 of each draft, t = :attr:`num_levels`.

        Returns
        -------
        TreeSlab
            The new nodes (one slab).

        Raises
        ------
        ValueError
            ``tokens`` of the wrong shape.
        """
        B, K = self.batch_size, self.num_drafts
        if tuple(tokens.shape) != (B, K):
            raise ValueError(f"TokenTree.add_level: tokens must have shape [{B}, {K}], got {tuple(tokens.shape)}")
        tokens = tokens.to(torch.int64)
        parent = self._node_of[-1]
        same = (parent[:, :, None] == parent[:, None, :]) & (tokens[:, :, None] == tokens[:, None, :])
        first = same.to(torch.uint8).argmax(dim=-1)  # lowest draft with the same key (argmax: first maximum)
        is_first = first == self._arange_k
        rank = is_first.cumsum(dim=-1) - 1  # rank of each first occurrence within its row
        count = is_first.sum(dim=-1)  # [B] distinct prefixes of this depth per row
        n, added = torch.stack([count.max(), count.sum()]).tolist()  # the one host sync: the slab width
        start = self.size
        self._node_of.append(start + rank.gather(1, first))
        slot = torch.where(is_first, rank, n)  # padding scatters into a dropped extra column
        slab_tokens = torch.zeros(B, n + 1, dtype=torch.int64, device=self.device).scatter_(1, slot, tokens)[:, :n]
        slab_parent = torch.zeros(B, n + 1, dtype=torch.int64, device=self.device).scatter_(1, slot, parent)[:, :n]
        valid = torch.arange(n, device=self.device)[None] < count[:, None]
        depth = self.num_levels
        self._tokens.append(slab_tokens)
        self._valid.append(valid)
        self._depth.append(torch.full((B, n), depth, dtype=torch.int64, device=self.device))
        # ancestors of a new node: its parent's ancestors and itself (padding: itself only)
        rows = self._anc.gather(1, slab_parent[:, :, None].expand(B, n, start)) & valid[:, :, None]
        old = torch.cat([self._anc, self._anc.new_zeros(B, start, n)], dim=2)
        eye = torch.eye(n, dtype=torch.bool, device=self.device).expand(B, n, n)
        self._anc = torch.cat([old, torch.cat([rows, eye], dim=2)], dim=1)
        self.num_valid += added
        return TreeSlab(start, start + n, slab_tokens, valid, depth, added)

    def tokens(self) -> torch.Tensor:
        """Tensor [B, N], int64: the token of every node (root first; 0 on padding)."""
        return torch.cat(self._tokens, dim=1)

    def valid(self) -> torch.Tensor:
        """Tensor [B, N], bool: False on padding nodes."""
        return torch.cat(self._valid, dim=1)

    def depths(self) -> torch.Tensor:
        """Tensor [B, N], int64: depth (prefix length) of every node."""
        return torch.cat(self._depth, dim=1)

    def ancestors(self) -> torch.Tensor:
        """Tensor [B, N, N], bool: ``[b, i, j]`` is True iff node j is node i or one of its ancestors.

        A padding node's row holds itself only; no valid node has a padding ancestor.
        """
        return self._anc

    def node_index(self) -> torch.Tensor:
        """Tensor [B, K, T + 1], int64: the node of the prefix of length t of draft k (t = 0: the root)."""
        return torch.stack(self._node_of, dim=2)

    def num_nodes(self) -> torch.Tensor:
        """Tensor [B], int64: distinct prefixes per row, the root included (padding excluded)."""
        return self.valid().sum(dim=1)
