"""The instance battery of the conformance harness, and vectorised sampling on an instance.

Every battery instance is small enough that its laws can be enumerated (vocabulary 2-5, draft
length 1-5) and is built in exact rationals (its float64 copy is what the verifier sees at the
statistical level). The kinds, each aimed at a class of public bug (ECOSYSTEM.md, shipped as docs/project/ECOSYSTEM.md):

========================  ====  ====  ==  =================================================
kind                       n     L    K   what it exercises
========================  ====  ====  ==  =================================================
``dense``                  3     2    2   generic case, every token possible
``sparse_disjoint``        4     2    3   p and q with partly disjoint supports (q = 0 < p,
                                          p = 0 < q): residuals, zero-probability tokens
``p_equals_q``             3     2    2   q = p: everything accepted, residuals all zero
``low_temperature``        4     2    2   near one-hot rows (softmax at T = 0.15)
``tiny_probabilities``     5     1    2   entries of 1e-6 next to large ones (ratios ~1e5)
``long_block``             2     5    2   long blocks, late rejections and bonus tokens
``tied_ratios``            3     2    3   p >= q on several children (ratios tie at 1, and
                                          tie exactly before clamping) and a p = q row
``wide_tree``              4     1    4   four drafts; the root row puts its draft mass on
                                          tokens the target dislikes, so the root sees three
                                          or four sibling rejections and the residual
                                          changes at each (multi-draft interfaces only)
========================  ====  ====  ==  =================================================

Chain and Hugging Face verifiers are single-draft: their battery uses K = 1 and leaves out the
kinds of :data:`MULTI_DRAFT_KINDS` (``wide_tree`` tests sibling rejections, which need K > 1).
The battery is fixed (seeded per kind, exact rationals), independent of the harness seed.

"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.core.instance import Instance, parse_instance
from spectr_gbv.core.tabular import TabularAR

#: Battery kinds in run order.
KINDS: tuple[str, ...] = (
    "dense",
    "sparse_disjoint",
    "p_equals_q",
    "low_temperature",
    "tiny_probabilities",
    "long_block",
    "tied_ratios",
    "wide_tree",
)
#: Number of drafts K of each kind for multi-draft (generic) interfaces.
KIND_K: dict[str, int] = {
    "dense": 2,
    "sparse_disjoint": 3,
    "p_equals_q": 2,
    "low_temperature": 2,
    "tiny_probabilities": 2,
    "long_block": 2,
    "tied_ratios": 3,
    "wide_tree": 4,
}
#: Kinds left out of single-draft batteries (chain, hf): they test what only K > 1 shows.
MULTI_DRAFT_KINDS: tuple[str, ...] = ("wide_tree",)

#: Root row of ``wide_tree``: q puts 4/5 of its mass on tokens 2, 3 (p = 1/20 each), so most
#: drafts are rejected; token 0 (q = 1/5) keeps a share of each residual, which changes at
#: every rejection: R_1 = (3/7, 4/7, 0, 0), R_2 = (2/7, 5/7, 0, 0), R_3 = (3/28, 25/28, 0, 0).
DEEP_RESIDUAL_ROW: tuple[tuple[Fraction, ...], tuple[Fraction, ...]] = (
    (Fraction(1, 2), Fraction(2, 5), Fraction(1, 20), Fraction(1, 20)),
    (Fraction(1, 5), Fraction(0), Fraction(3, 10), Fraction(1, 2)),
)


@dataclass(frozen=True)
class BatteryInstance:
    """One instance of the battery with its number of drafts.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`, or ``"user"`` / ``"adversarial"``.
    instance : Instance
        p, q and L (exact rationals for the built-in kinds; float64 allowed).
    K : int
        Number of i.i.d. drafts per iteration (1 for chain and HF verifiers).
    """

    kind: str
    instance: Instance
    K: int
    _float: list[Instance] = field(default_factory=list, repr=False, compare=False)

    @property
    def float_instance(self) -> Instance:
        """The float64 copy the verifier is fed at the statistical level (cached)."""
        if not self._float:
            self._float.append(self.instance.to_float())
        return self._float[0]

    @property
    def label(self) -> str:
        """Short name used in check names (the kind)."""
        return self.kind

    def spec(self, **extra: Any) -> dict[str, Any]:
        """JSON spec that rebuilds the instance (:func:`instance_from_spec`), plus ``extra`` keys.

        Returns
        -------
        dict
            ``{"kind", "name", "n", "L", "K", "instance": <instance JSON>}`` and ``extra``
            (e.g. ``drafts``).
        """
        inst = self.instance
        out: dict[str, Any] = {"kind": self.kind, "name": inst.name, "n": inst.n, "L": inst.L, "K": self.K}
        out.update(extra)
        out["instance"] = inst.to_dict()
        return out


def instance_from_spec(spec: dict[str, Any]) -> tuple[Instance, int]:
    """Rebuild ``(instance, K)`` from a check's ``instance`` spec.

    Raises
    ------
    ValueError
        The spec lacks ``instance`` or ``K`` (a probe's spec: the message says how to replay
        it), or the instance JSON is invalid.
    """
    if isinstance(spec, dict) and spec.get("kind") == "probe":
        raise ValueError(
            f"spec: the probe {spec.get('name')!r} has no instance to rebuild; replay it by calling the verifier "
            "on the arrays its spec holds ('drafts' of the failing row, 'draft_probs', 'target_probs') with the "
            "coins its detail states"
        )
    if not isinstance(spec, dict) or "instance" not in spec or "K" not in spec:
        raise ValueError("spec: expected a dict with keys 'instance' (instance JSON) and 'K'")
    return parse_instance(spec["instance"]), int(spec["K"])


# ---------------------------------------------------------------------------- construction
def _fractions(weights: np.ndarray, denominator: int) -> list[Fraction]:
    """Round non-negative weights to a rational row summing to exactly 1.

    Positive weights stay positive (at least 1/denominator before normalising), zeros stay 0.
    """
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    ints = np.rint(w * denominator).astype(np.int64)
    ints[(w > 0) & (ints == 0)] = 1
    total = int(ints.sum())
    return [Fraction(int(i), total) for i in ints]


def _model(n: int, depth: int, row: Callable[[tuple[int, ...]], np.ndarray], denominator: int, name: str) -> TabularAR:
    laws = {
        prefix: _fractions(row(prefix), denominator)
        for t in range(depth + 1)
        for prefix in itertools.product(range(n), repeat=t)
    }
    return TabularAR(n, laws, depth=depth, name=name)


def _dirichlet(rng: np.random.Generator, n: int, conc: float = 1.0) -> np.ndarray:
    return rng.dirichlet(np.full(n, conc))


def _softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    z = logits / temperature
    z = np.exp(z - z.max())
    return z / z.sum()


Rows = dict[tuple[int, ...], list[Fraction]]


def _tilted(q_row: list[Fraction], loser: int, share: Fraction) -> list[Fraction]:
    """p = q with ``share`` of token ``loser``'s mass moved to the others in proportion to q.

    Every other token then has the same ratio p/q > 1 (a tie before and after clamping at 1).
    """
    moved = q_row[loser] * share
    rest = 1 - q_row[loser]
    return [q_row[v] - moved if v == loser else q_row[v] * (1 + moved / rest) for v in range(len(q_row))]


def _tied_rows(rng: np.random.Generator, n: int, L: int) -> tuple[Rows, Rows]:
    """``tied_ratios``: tilted rows (ties at ratio > 1), one p = q row, Dirichlet rows at the bonus depth."""
    p_rows: Rows = {}
    q_rows: Rows = {}
    for t in range(L):
        for pre in itertools.product(range(n), repeat=t):
            q_row = _fractions(_dirichlet(rng, n, 2.0), 60)
            if pre == (0,) * t and t > 0:
                p_rows[pre] = list(q_row)  # p = q: every ratio is 1, the residual is zero
            else:
                p_rows[pre] = _tilted(q_row, int(rng.integers(n)), Fraction(1, 2))
            q_rows[pre] = q_row
    for pre in itertools.product(range(n), repeat=L):
        p_rows[pre] = _fractions(_dirichlet(rng, n), 240)
    return p_rows, q_rows


def _deep_rows(rng: np.random.Generator, n: int, L: int) -> tuple[Rows, Rows]:
    """``wide_tree``: :data:`DEEP_RESIDUAL_ROW` at the root, token-permuted copies below it."""
    base_p, base_q = DEEP_RESIDUAL_ROW
    p_rows: Rows = {}
    q_rows: Rows = {}
    for t in range(L):
        for pre in itertools.product(range(n), repeat=t):
            perm = np.arange(n) if t == 0 else rng.permutation(n)
            p_rows[pre] = [base_p[int(perm[v])] for v in range(n)]
            q_rows[pre] = [base_q[int(perm[v])] for v in range(n)]
    for pre in itertools.product(range(n), repeat=L):
        p_rows[pre] = _fractions(_dirichlet(rng, n), 240)
    return p_rows, q_rows


def _build(kind: str, K: int) -> BatteryInstance:
    """The instance of one battery kind (fixed seed per kind)."""
    seed = 1000 + KINDS.index(kind)
    rng = np.random.default_rng(seed)
    den = 240
    if kind == "dense":
        n, L = 3, 2
        p = _model(n, L, lambda _: _dirichlet(rng, n), den, "target")
        q = _model(n, L - 1, lambda _: _dirichlet(rng, n), den, "draft")
    elif kind == "sparse_disjoint":
        n, L = 4, 2

        def supports(_: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
            # p on {a, b, c}, q on {b, c, d} in a random order: shared, p-only and q-only tokens
            perm = rng.permutation(n)
            wp = np.zeros(n)
            wq = np.zeros(n)
            wp[perm[:3]] = _dirichlet(rng, 3) + 0.05
            wq[perm[1:]] = _dirichlet(rng, 3) + 0.05
            return wp, wq

        rows = {pre: supports(pre) for t in range(L + 1) for pre in itertools.product(range(n), repeat=t)}
        p = _model(n, L, lambda pre: rows[pre][0], den, "target")
        q = _model(n, L - 1, lambda pre: rows[pre][1], den, "draft")
    elif kind == "p_equals_q":
        n, L = 3, 2
        p = _model(n, L, lambda _: _dirichlet(rng, n), den, "target")
        q = p.truncate(L - 1)
        q = TabularAR(n, dict(q.items()), depth=L - 1, name="draft")
    elif kind == "low_temperature":
        n, L, temp = 4, 2, 0.15
        logits = {pre: rng.normal(size=n) for t in range(L + 1) for pre in itertools.product(range(n), repeat=t)}
        noise = {pre: rng.normal(scale=0.5, size=n) for pre in logits}
        p = _model(n, L, lambda pre: _softmax(logits[pre], temp), 10**6, "target")
        q = _model(n, L - 1, lambda pre: _softmax(logits[pre] + noise[pre], temp), 10**6, "draft")
    elif kind == "tiny_probabilities":
        n, L = 5, 1
        # p: large on 0..2, 1e-6 on 3, 1e-4 on 4; q: large on 3 (p-tiny), 1e-6 on 0 (p-large)
        p_rows = [np.array([0.5, 0.3, 0.1998 - 1e-6, 1e-6, 2e-4]), np.array([0.4, 0.4, 0.2 - 2e-6, 1e-6, 1e-6])]
        q_row = np.array([1e-6, 0.3, 0.2, 0.5 - 1e-6 - 1e-4, 1e-4])
        p = _model(n, L, lambda pre: p_rows[min(len(pre), 1)], 10**7, "target")
        q = _model(n, L - 1, lambda _: q_row, 10**7, "draft")
    elif kind == "long_block":
        n, L = 2, 5
        p = _model(n, L, lambda _: _dirichlet(rng, n, 2.0), den, "target")
        q = _model(n, L - 1, lambda _: _dirichlet(rng, n, 2.0), den, "draft")
    elif kind == "tied_ratios":
        n, L = 3, 2
        p_rows, q_rows = _tied_rows(rng, n, L)
        p = TabularAR(n, p_rows, depth=L, name="target")
        q = TabularAR(n, q_rows, depth=L - 1, name="draft")
    elif kind == "wide_tree":
        n, L = 4, 1
        p_rows, q_rows = _deep_rows(rng, n, L)
        p = TabularAR(n, p_rows, depth=L, name="target")
        q = TabularAR(n, q_rows, depth=L - 1, name="draft")
    else:
        raise ValueError(f"kind: unknown battery kind {kind!r}; valid: {', '.join(KINDS)}")
    inst = Instance(p, q, L, name=f"battery:{kind}")
    return BatteryInstance(kind, inst, K)


def default_battery(max_drafts: int | None = None, kinds: Sequence[str] | None = None) -> list[BatteryInstance]:
    """The built-in battery.

    Parameters
    ----------
    max_drafts : int or None
        1 for single-draft interfaces (chain, hf): every instance gets K = 1, and the kinds of
        :data:`MULTI_DRAFT_KINDS` are left out unless named in ``kinds``. None: each kind's K
        of :data:`KIND_K` (2; 3 for ``sparse_disjoint`` and ``tied_ratios``; 4 for
        ``wide_tree``). Another int caps every K at it.
    kinds : sequence of str, optional
        Subset of :data:`KINDS` (default all), in battery order.

    Returns
    -------
    list of BatteryInstance

    Raises
    ------
    ValueError
        An unknown kind.
    """
    if kinds is None:
        chosen = [k for k in KINDS if not (max_drafts == 1 and k in MULTI_DRAFT_KINDS)]
    else:
        chosen = list(kinds)
    out = []
    for kind in chosen:
        if kind not in KINDS:
            raise ValueError(f"kinds: unknown battery kind {kind!r}; valid: {', '.join(KINDS)}")
        K = KIND_K[kind] if max_drafts is None else min(KIND_K[kind], max_drafts)
        out.append(_build(kind, K))
    return out


def user_battery(instances: Any, max_drafts: int | None) -> list[BatteryInstance]:
    """Normalise the ``instances=`` argument of :func:`~spectr_gbv.validate.validate`.

    Parameters
    ----------
    instances : Instance, (Instance, K), BatteryInstance, or a list of them
        An Instance alone gets K = 2 (generic) or 1 (single-draft interfaces).
    max_drafts : int or None
        1 for chain / hf.

    Returns
    -------
    list of BatteryInstance (kind ``"user<i>"`` unless given as BatteryInstance)

    Raises
    ------
    ValueError
        An item of another type, K < 1, K > 1 for a single-draft interface, or an empty list.
    """
    items = [instances] if isinstance(instances, Instance | BatteryInstance | tuple) else list(instances)
    if not items:
        raise ValueError("instances: expected at least one instance")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, BatteryInstance):
            bi = item
        elif isinstance(item, Instance):
            bi = BatteryInstance(f"user{i}", item, 1 if max_drafts == 1 else 2)
        elif (
            isinstance(item, tuple)
            and len(item) == 2
            and isinstance(item[0], Instance)
            and isinstance(item[1], int | np.integer)
        ):
            bi = BatteryInstance(f"user{i}", item[0], int(item[1]))
        else:
            raise ValueError(
                f"instances[{i}]: expected an Instance, an (Instance, K) pair or a BatteryInstance, "
                f"got {type(item).__name__}"
            )
        if bi.K < 1 or (max_drafts is not None and bi.K > max_drafts):
            allowed = f"1..{max_drafts}" if max_drafts is not None else ">= 1"
            raise ValueError(f"instances[{i}]: K = {bi.K} must be {allowed} for this interface")
        out.append(bi)
    return out


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


__all__ = [
    "DEEP_RESIDUAL_ROW",
    "KINDS",
    "KIND_K",
    "MULTI_DRAFT_KINDS",
    "BatteryInstance",
    "Tables",
    "default_battery",
    "instance_from_spec",
    "user_battery",
]
