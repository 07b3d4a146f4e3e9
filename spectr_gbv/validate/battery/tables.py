"""Vectorised sampling on a battery instance: :class:`Tables`.

Float64 tables of an instance, flattened for vectorised gathers: the draft and target rows of
many prefixes at once, inverse-CDF draws of drafts from q and of completions from p.
"""

from __future__ import annotations

import numpy as np

from spectr_gbv.core.instance import Instance


# ---------------------------------------------------------------------------- vectorised sampling
def _sample_rows(cdf: np.ndarray, last: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws: ``cdf`` [N, n] (rows of a float law), ``u`` [N] in [0, 1)."""
    idx = (u[:, None] * cdf[:, -1:] >= cdf).sum(axis=1)
    return np.minimum(idx, last)


class Tables:
    """Float64 tables of an instance, flattened for vectorised gathers and sampling.

    Parameters
    ----------
    instance : Instance
        Any instance (converted to float64).

    Attributes
    ----------
    n, L : int
    p_levels : list of ndarray
        ``p_levels[t]`` has shape [n**t, n]: ``p(. | x^t)`` with ``x^t`` in base-n order.
    q_levels : list of ndarray
        Same for q, t = 0..L-1.
    p_joint : ndarray, shape [n**(L+1)]
        ``p(y)`` for y in V^{L+1}, base-n order.
    """

    def __init__(self, instance: Instance) -> None:
        inst = instance.to_float()
        self.n, self.L = inst.n, inst.L
        n = self.n
        self.p_levels = [np.asarray(inst.target.level(t), dtype=np.float64).reshape(-1, n) for t in range(self.L + 1)]
        self.q_levels = [np.asarray(inst.draft.level(t), dtype=np.float64).reshape(-1, n) for t in range(self.L)]
        self._p_cdf = [np.cumsum(lv, axis=1) for lv in self.p_levels]
        self._q_cdf = [np.cumsum(lv, axis=1) for lv in self.q_levels]
        self._p_last = [_last_positive(lv) for lv in self.p_levels]
        self._q_last = [_last_positive(lv) for lv in self.q_levels]
        self.p_joint = np.asarray(inst.target.joint(self.L + 1), dtype=np.float64).reshape(-1)

    def prefix_index(self, tokens: np.ndarray) -> np.ndarray:
        """Base-n index of each prefix: ``tokens`` [..., t] -> [...] int64 (0 for t = 0)."""
        t = tokens.shape[-1]
        weights = self.n ** np.arange(t - 1, -1, -1, dtype=np.int64)
        return (tokens.astype(np.int64) * weights).sum(axis=-1)

    def sample_drafts(self, num: int, K: int, rng: np.random.Generator) -> np.ndarray:
        """``num`` iterations of K i.i.d. drafts from q: int64 [num, K, L]."""
        out = np.zeros((num * K, self.L), dtype=np.int64)
        u = rng.random((num * K, self.L))
        for t in range(self.L):
            idx = self.prefix_index(out[:, :t])
            out[:, t] = _sample_rows(self._q_cdf[t][idx], self._q_last[t][idx], u[:, t])
        return out.reshape(num, K, self.L)

    def rows(self, drafts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Draft and target rows along drafts [..., L]: (q [..., L, n], p [..., L+1, n]), float64."""
        shape = drafts.shape[:-1]
        flat = drafts.reshape(-1, self.L)
        q = np.stack([self.q_levels[t][self.prefix_index(flat[:, :t])] for t in range(self.L)], axis=1)
        p = np.stack([self.p_levels[t][self.prefix_index(flat[:, :t])] for t in range(self.L + 1)], axis=1)
        return q.reshape(*shape, self.L, self.n), p.reshape(*shape, self.L + 1, self.n)

    def complete(self, outputs: np.ndarray, lengths: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """ "Output, then fresh sampling from p" up to L+1 tokens.

        Parameters
        ----------
        outputs : ndarray, shape [N, L+1], int64
            Emitted tokens left-aligned (entries at and after ``lengths`` are ignored).
        lengths : ndarray, shape [N], int
            Emitted lengths, 1..L+1.
        rng : numpy.random.Generator

        Returns
        -------
        ndarray, shape [N], int64
            Base-n index of the completed sequence in V^{L+1}.
        """
        seq = outputs.copy()
        u = rng.random(seq.shape)
        for t in range(1, self.L + 1):
            fill = lengths <= t
            if fill.any():
                idx = self.prefix_index(seq[fill, :t])
                seq[fill, t] = _sample_rows(self._p_cdf[t][idx], self._p_last[t][idx], u[fill, t])
        return self.prefix_index(seq)


def _last_positive(levels: np.ndarray) -> np.ndarray:
    """Index of the last positive entry of each row (rounding guard of inverse-CDF sampling)."""
    pos = levels > 0
    return levels.shape[1] - 1 - np.argmax(pos[:, ::-1], axis=1)


__all__ = ["Tables"]
