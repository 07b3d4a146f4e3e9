"""Tabular autoregressive models on tiny vocabularies (exact or float64, one API).

A :class:`TabularAR` holds a next-token law ``p(. | x^t)`` for every prefix ``x^t`` of length
``t = 0..depth`` over the vocabulary ``V = {0..n-1}`` (THEORY.md section 1). Laws at a
prefix longer than ``depth`` are available through :meth:`TabularAR.cond` with
``extend=True``, which reads the model as a ``depth``-th order Markov chain (the law after the
last ``depth`` tokens); multi-iteration simulation over long horizons uses this.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from numbers import Real
from typing import Any

import numpy as np

from spectr_gbv.core.numbers import (
    FLOAT_ROW_ATOL,
    Scalar,
    check_seed,
    parse_probability,
    sum_exact,
    to_float_array,
)
from spectr_gbv.core.progress import progress

Prefix = tuple[int, ...]


def parse_prefix(key: str | Sequence[int], n: int, where: str) -> Prefix:
    """Parse a prefix given as ``"0,1"`` (``""`` for the empty prefix) or a sequence of ints.

    Raises
    ------
    ValueError
        If a token is not an integer in ``[0, n)``; the message names ``where``.
    """
    if isinstance(key, str):
        parts = [s.strip() for s in key.split(",")] if key.strip() else []
        try:
            toks = tuple(int(s) for s in parts)
        except ValueError as exc:
            raise ValueError(f"{where}: prefix key {key!r} is not comma-separated token ids") from exc
    else:
        toks = tuple(int(t) for t in key)
    for t in toks:
        if not 0 <= t < n:
            raise ValueError(f"{where}: prefix {key!r} has token {t} outside the vocabulary 0..{n - 1}")
    return toks


def prefix_key(prefix: Prefix) -> str:
    """Inverse of :func:`parse_prefix`: ``(0, 1) -> "0,1"``, ``() -> ""``."""
    return ",".join(str(t) for t in prefix)


#: Largest number of prefixes (rows) :meth:`TabularAR.random` draws (about 1 GB of float rows at n = 10).
MAX_RANDOM_ROWS = 2_000_000

#: Largest number of table entries (probabilities, all rows) :meth:`TabularAR.random` draws per
#: model: about 1 GB as exact Fractions (:data:`ENTRY_BYTES`).
MAX_RANDOM_ENTRIES = 10_000_000

#: Estimated memory of one table entry while a model is built (a Fraction, its list slot and
#: the parsed copy; about 100 bytes), used by the size guards' messages.
ENTRY_BYTES = 100

#: Rows drawn from which :meth:`TabularAR.random` shows a progress bar (on a terminal, unless quiet).
PROGRESS_MIN_ROWS = 50_000


def table_entries(n: int, depth: int, cap: int = 2**62) -> int:
    r"""Entries of a table of laws at every prefix of length ``0..depth``: :math:`\sum_{t=0}^{depth} n^{t+1}`.

    Computed by comparing logarithms first, so a huge ``depth`` (``10**9``) costs nothing.

    Parameters
    ----------
    n : int
        Vocabulary size, ``>= 1``.
    depth : int
        Largest prefix length, ``>= 0``.
    cap : int
        Returned instead of the count when the count exceeds it (default 2^62).

    Returns
    -------
    int
        ``min(count, cap)``.

    Examples
    --------
    >>> table_entries(2, 2)
    14
    >>> table_entries(10**6, 10**9) == 2**62
    True
    """
    n, depth = int(n), int(depth)
    if n == 1:
        return min(depth + 1, cap)
    if (depth + 1) * math.log2(n) > math.log2(cap) + 1:
        return cap
    return min((n ** (depth + 2) - n) // (n - 1), cap)


def format_bytes(num: float) -> str:
    """``"3.6 GB"``-style size (decimal units)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if num < 1000 or unit == "TB":
            return f"{num:.0f} {unit}" if unit == "B" else f"{num:.1f} {unit}"
        num /= 1000
    return f"{num:.1f} TB"  # pragma: no cover


def check_random_size(n: int, depth: int, *, what: str = "depth") -> int:
    """Entries per model of a random table of vocabulary ``n`` and ``depth``, refused when too large.

    Parameters
    ----------
    n, depth : int
        Vocabulary size (>= 1) and table depth (>= 0).
    what : str
        How the depth is named in the message (``"depth"``, or ``"L"``).

    Returns
    -------
    int
        Entries per model (:func:`table_entries`).

    Raises
    ------
    ValueError
        More than :data:`MAX_RANDOM_ROWS` rows or :data:`MAX_RANDOM_ENTRIES` entries; one line
        naming n, the depth, the count and the memory estimate.
    """
    entries = table_entries(n, depth)
    rows = table_entries(n, depth - 1) + 1 if depth else 1
    if rows > MAX_RANDOM_ROWS or entries > MAX_RANDOM_ENTRIES:
        count = str(entries) if entries < 2**62 else "over 4.6e18"
        raise ValueError(
            f"n={n}, {what}={depth}: {count} entries per table (~{format_bytes(entries * ENTRY_BYTES)}), "
            f"above MAX_RANDOM_ENTRIES={MAX_RANDOM_ENTRIES} (or MAX_RANDOM_ROWS={MAX_RANDOM_ROWS} prefixes)"
        )
    return entries


def _short_number(value: Fraction) -> str:
    """``str(value)``, or its size in bits when it is too long to print."""
    if max(abs(value.numerator), value.denominator).bit_length() > 160:
        return f"a fraction of {max(abs(value.numerator), value.denominator).bit_length()} bits"
    return str(value)


def _exact_sum(row: Sequence[Fraction]) -> Fraction:
    """The exact sum of Fractions, numerators added per denominator first (rows share one, mostly)."""
    by_denominator: dict[int, int] = {}
    for v in row:
        by_denominator[v.denominator] = by_denominator.get(v.denominator, 0) + v.numerator
    return sum((Fraction(num, den) for den, num in by_denominator.items()), Fraction(0))


def _plain_float_row(row: np.ndarray) -> bool:
    """True when every entry of a float array is finite and in [0, 1 + FLOAT_ROW_ATOL] (checked at once).

    Such a row parses to the same floats as :func:`parse_probability` entry by entry; any other
    row takes that path, which raises the message naming the bad entry.
    """
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.isfinite(row)) and np.all(row >= 0) and np.all(row <= 1 + FLOAT_ROW_ATOL))


class TabularAR:
    """An autoregressive next-token model given by a table of conditionals.

    Parameters
    ----------
    n : int
        Vocabulary size, ``n >= 1``; tokens are ``0..n-1``.
    laws : Mapping[prefix, Sequence]
        Next-token law for every prefix of length ``0..depth``; a prefix is a tuple of ints or
        a comma-separated string (``""`` is the empty prefix). Each row has ``n`` entries given
        as Fractions, ints, fraction strings (``"3/4"``) or floats.
    depth : int, optional
        Largest prefix length with a law. Default: the longest prefix in ``laws``.
    name : str
        Used in error messages ("target", "draft").
    atol : float
        Tolerance on float rows' sums, default :data:`FLOAT_ROW_ATOL` (1e-9). Exact rows must
        sum to exactly 1.

    Attributes
    ----------
    n, depth : int
    exact : bool
        True when every entry is a Fraction (rows stored in numpy object arrays), False for
        float64 (any float entry makes the whole model float64).

    Raises
    ------
    ValueError
        Missing prefix, extra prefix beyond ``depth``, wrong row length, a NaN/inf/negative
        entry, or a row not summing to 1; the message names the model and the prefix.

    References
    ----------
    THEORY.md section 1 (setting and notation).

    Examples
    --------
    >>> m = TabularAR(2, {"": ["1/2", "1/2"], "0": ["3/4", "1/4"], "1": [1, 0]})
    >>> m.prob((0, 1))
    Fraction(1, 8)
    """

    def __init__(
        self,
        n: int,
        laws: Mapping[Any, Sequence[Any]],
        *,
        depth: int | None = None,
        name: str = "model",
        atol: float = FLOAT_ROW_ATOL,
    ) -> None:
        if not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"{name}: vocabulary size n must be a positive int, got {n!r}")
        self.n = int(n)
        self.name = name
        parsed: dict[Prefix, list[Scalar]] = {}
        for key, row in laws.items():
            prefix = parse_prefix(key, self.n, name)
            if prefix in parsed:
                raise ValueError(f"{name}: prefix {prefix} given twice")
            where = f"{name} prefix {prefix}"
            if isinstance(row, str) or not isinstance(row, Sequence | np.ndarray):
                raise ValueError(f"{where}: row must be a list of {self.n} probabilities")
            if len(row) != self.n:
                raise ValueError(f"{where}: row has {len(row)} entries, expected n = {self.n}")
            if type(row) is np.ndarray and row.ndim == 1 and row.dtype.kind == "f" and _plain_float_row(row):
                parsed[prefix] = row.astype(np.float64).tolist()  # checked at once (the common float case)
            else:
                parsed[prefix] = [parse_probability(v, where) for v in row]
        if not parsed:
            raise ValueError(f"{name}: no laws given (need at least the empty prefix)")
        max_len = max(len(p) for p in parsed)
        self.depth = max_len if depth is None else int(depth)
        if self.depth < 0:
            raise ValueError(f"{name}: depth must be >= 0, got {depth}")
        if max_len > self.depth:
            raise ValueError(f"{name}: prefix of length {max_len} exceeds depth {self.depth}")
        self.exact = all(isinstance(v, Fraction) for row in parsed.values() for v in row)
        self._levels: list[np.ndarray] = []
        for t in range(self.depth + 1):
            shape = (self.n,) * t + (self.n,)
            level = np.empty(shape, dtype=object if self.exact else np.float64)
            for prefix in itertools.product(range(self.n), repeat=t):
                if prefix not in parsed:
                    deepest = max(parsed, key=len)
                    why = (
                        f"the longest prefix given, {prefix_key(deepest)!r}, has length {self.depth}"
                        if depth is None
                        else f"depth={self.depth}"
                    )
                    raise ValueError(
                        f"{name}: missing law for prefix {prefix} ({why}, so every prefix of length "
                        f"0..{self.depth} is needed)"
                    )
                row = parsed[prefix]
                self._check_row(row, f"{name} prefix {prefix}", atol)
                level[prefix] = row if self.exact else [float(v) for v in row]
            self._levels.append(level)
        self._joint_cache: dict[int, np.ndarray] = {}

    # ------------------------------------------------------------------ validation
    def _check_row(self, row: Sequence[Scalar], where: str, atol: float) -> None:
        total = _exact_sum(row) if self.exact else math.fsum(float(v) for v in row)
        if self.exact:
            if total != 1:
                raise ValueError(f"{where}: row sums to {_short_number(total)}, not exactly 1")
        elif not abs(total - 1.0) <= atol:
            raise ValueError(f"{where}: row sums to {total!r}, not 1 within atol={atol:g}")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_levels(cls, levels: Sequence[np.ndarray], *, name: str = "model") -> TabularAR:
        """Build from dense arrays: ``levels[t]`` has shape ``(n,)*t + (n,)`` (object or float64).

        Raises
        ------
        ValueError
            As the constructor.
        """
        levels = [np.asarray(lv) for lv in levels]
        if not levels:
            raise ValueError(f"{name}: levels is empty")
        n = levels[0].shape[-1]
        laws: dict[Prefix, Sequence[Any]] = {}
        for t, lv in enumerate(levels):
            if lv.shape != (n,) * (t + 1):
                raise ValueError(f"{name}: levels[{t}] has shape {lv.shape}, expected {(n,) * (t + 1)}")
            for prefix in itertools.product(range(n), repeat=t):
                laws[prefix] = list(lv[prefix])
        return cls(n, laws, depth=len(levels) - 1, name=name)

    @classmethod
    def context_free(cls, row: Sequence[Any], depth: int, *, name: str = "model") -> TabularAR:
        """The same next-token law ``row`` after every prefix of length ``0..depth``.

        Examples
        --------
        >>> TabularAR.context_free(["1/3", "2/3"], depth=2).prob((1, 1))
        Fraction(4, 9)
        """
        n = len(row)
        laws = {p: list(row) for t in range(depth + 1) for p in itertools.product(range(n), repeat=t)}
        return cls(n, laws, depth=depth, name=name)

    @classmethod
    def random(
        cls,
        n: int,
        depth: int,
        seed: int | np.random.Generator | None = None,
        *,
        exact: bool = False,
        zero_prob: float = 0.0,
        concentration: float = 1.0,
        denominator: int = 12,
        name: str = "model",
    ) -> TabularAR:
        """A random model: every row Dirichlet(``concentration``), some entries zeroed.

        Parameters
        ----------
        n, depth : int
            Vocabulary size and largest prefix length.
        seed : int or numpy.random.Generator, optional
            Seed for :func:`numpy.random.default_rng` (reproducible).
        exact : bool
            If True, rows are rational: Dirichlet weights rounded to integers in
            ``0..denominator`` then normalised (small denominators keep exact arithmetic fast).
        zero_prob : float
            Each entry is set to 0 with this probability (at least one entry per row stays > 0).
        concentration : float
            Dirichlet parameter; small values give peaked rows.
        denominator : int
            Integer weight scale of exact rows.

        Returns
        -------
        TabularAR

        Raises
        ------
        ValueError
            ``n`` < 1, ``depth`` < 0, more than :data:`MAX_RANDOM_ROWS` prefixes or
            :data:`MAX_RANDOM_ENTRIES` entries (checked before drawing), a negative or non-int
            ``seed``, ``zero_prob`` outside [0, 1] (NaN included), ``concentration`` not finite
            and > 0, or ``denominator`` < 1; the message names the argument.
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"n (vocabulary size) must be an int >= 1, got {n!r}")
        if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 0:
            raise ValueError(f"depth must be an int >= 0, got {depth!r}")
        check_random_size(n, depth)
        seed = check_seed(seed, "seed", allow_generator=True)
        if isinstance(zero_prob, bool) or not isinstance(zero_prob, Real) or not 0 <= zero_prob <= 1:
            raise ValueError(f"zero_prob must be a number in [0, 1], got {zero_prob!r}")
        if isinstance(concentration, bool) or not isinstance(concentration, Real) or not 0 < concentration < math.inf:
            raise ValueError(f"concentration must be a finite number > 0, got {concentration!r}")
        if isinstance(denominator, bool) or not isinstance(denominator, int | np.integer) or denominator < 1:
            raise ValueError(f"denominator must be an int >= 1, got {denominator!r}")
        n, depth = int(n), int(depth)
        rows = sum(n**t for t in range(depth + 1))
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        laws: dict[Prefix, list[Any]] = {}
        quiet = True if rows < PROGRESS_MIN_ROWS else None
        bar = progress(rows, f"drawing {name} (n={n}, depth={depth})", quiet=quiet, unit="row")
        done = 0
        for t in range(depth + 1):
            for prefix in itertools.product(range(n), repeat=t):
                done += 1
                if done % 4096 == 0:
                    bar.update(4096)
                w = rng.dirichlet(np.full(n, concentration))
                mask = rng.random(n) < zero_prob
                if mask.all():
                    mask[rng.integers(n)] = False
                w = np.where(mask | ~np.isfinite(w), 0.0, w)
                if w.sum() <= 0:
                    # tiny concentrations underflow the gamma draws: fall back to a point mass
                    w[rng.choice(np.flatnonzero(~mask))] = 1.0
                if exact:
                    # the largest weight maps to `denominator`, so every row has mass
                    ints = np.rint(w / w.max() * denominator).astype(int)
                    total = int(ints.sum())
                    laws[prefix] = [Fraction(int(i), total) for i in ints]
                else:
                    laws[prefix] = w / w.sum()
        bar.close()
        return cls(n, laws, depth=depth, name=name)

    # ------------------------------------------------------------------ access
    def level(self, t: int) -> np.ndarray:
        """Conditional laws at all prefixes of length ``t``.

        Returns
        -------
        ndarray, shape ``(n,)*t + (n,)``, object (Fractions) or float64
            ``out[x_1, .., x_t, v] = p(v | x^t)``. A read-only view.

        Raises
        ------
        ValueError
            If ``t`` is outside ``0..depth``.
        """
        if not 0 <= t <= self.depth:
            raise ValueError(f"{self.name}: level t={t} outside 0..depth={self.depth}")
        view = self._levels[t].view()
        view.flags.writeable = False
        return view

    def cond(self, prefix: Sequence[int], *, extend: bool = False) -> np.ndarray:
        """Next-token law ``p(. | prefix)``, shape ``(n,)``.

        Parameters
        ----------
        prefix : sequence of int
        extend : bool
            If True, a prefix longer than ``depth`` uses its last ``depth`` tokens (the model
            read as a ``depth``-th order Markov chain). If False such a prefix raises.

        Raises
        ------
        ValueError
            Prefix too long (without ``extend``) or a token outside the vocabulary.
        """
        prefix = tuple(int(t) for t in prefix)
        if len(prefix) > self.depth:
            if not extend:
                raise ValueError(f"{self.name}: prefix of length {len(prefix)} exceeds depth {self.depth}")
            prefix = prefix[len(prefix) - self.depth :] if self.depth else ()
        for t in prefix:
            if not 0 <= t < self.n:
                raise ValueError(f"{self.name}: token {t} outside the vocabulary 0..{self.n - 1}")
        return self._levels[len(prefix)][prefix]

    def joint(self, t: int) -> np.ndarray:
        """Joint prefix probabilities ``p(x^t) = prod_{s<=t} p(x_s | x^{s-1})``.

        Returns
        -------
        ndarray, shape ``(n,)*t`` (a 0-d array for ``t = 0``), object or float64. Cached.

        Raises
        ------
        ValueError
            If ``t`` is outside ``0..depth+1``.
        """
        if not 0 <= t <= self.depth + 1:
            raise ValueError(f"{self.name}: joint length t={t} outside 0..depth+1={self.depth + 1}")
        if t not in self._joint_cache:
            if t == 0:
                out = np.array(Fraction(1) if self.exact else 1.0, dtype=self._levels[0].dtype)
            else:
                out = self.joint(t - 1)[..., None] * self._levels[t - 1]
            out.flags.writeable = False
            self._joint_cache[t] = out
        return self._joint_cache[t]

    def prob(self, seq: Sequence[int], *, given: Sequence[int] = (), extend: bool = False) -> Scalar:
        """Probability of ``seq`` following ``given``: ``prod_s p(seq_s | given, seq_{<s})``."""
        ctx = list(given)
        out: Any = Fraction(1) if self.exact else 1.0
        for tok in seq:
            out = out * self.cond(ctx, extend=extend)[int(tok)]
            ctx.append(int(tok))
        return out

    def items(self) -> Iterator[tuple[Prefix, np.ndarray]]:
        """Iterate ``(prefix, law)`` over every prefix of length ``0..depth``."""
        for t in range(self.depth + 1):
            for prefix in itertools.product(range(self.n), repeat=t):
                yield prefix, self._levels[t][prefix]

    # ------------------------------------------------------------------ conversion
    def to_float(self) -> TabularAR:
        """The same model in float64 (self if already float)."""
        if not self.exact:
            return self
        return TabularAR.from_levels([to_float_array(lv) for lv in self._levels], name=self.name)

    def shifted(self, context: Sequence[int], depth: int) -> TabularAR:
        """The model seen after ``context``: laws ``p(. | context, z)`` for ``|z| = 0..depth``.

        Prefixes longer than this model's depth use the Markov reading of :meth:`cond`
        (``extend=True``). Multi-iteration simulation uses this to verify the next block.

        Parameters
        ----------
        context : sequence of int
            Tokens generated so far.
        depth : int
            Depth of the returned table (>= 0).

        Returns
        -------
        TabularAR, same number kind and vocabulary.
        """
        ctx = tuple(int(t) for t in context)
        laws = {
            z: list(self.cond(ctx + z, extend=True))
            for t in range(depth + 1)
            for z in itertools.product(range(self.n), repeat=t)
        }
        return TabularAR(self.n, laws, depth=depth, name=self.name)

    def truncate(self, depth: int) -> TabularAR:
        """The model restricted to prefixes of length ``0..depth`` (``depth <= self.depth``)."""
        if not 0 <= depth <= self.depth:
            raise ValueError(f"{self.name}: cannot truncate to depth {depth} (have {self.depth})")
        return TabularAR.from_levels(self._levels[: depth + 1], name=self.name)

    def to_mapping(self) -> dict[str, list[str] | list[float]]:
        """JSON-ready mapping ``{"0,1": ["1/2", "1/2"], ...}`` (strings when exact)."""
        out: dict[str, Any] = {}
        for prefix, row in self.items():
            if self.exact:
                out[prefix_key(prefix)] = [f"{v.numerator}/{v.denominator}" for v in row]
            else:
                out[prefix_key(prefix)] = [float(v) for v in row]
        return out

    def row_sum(self, prefix: Sequence[int]) -> Scalar:
        """Sum of the law at ``prefix`` (1, or within tolerance of 1)."""
        return sum_exact(self.cond(prefix))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TabularAR):
            return NotImplemented
        return (
            self.n == other.n
            and self.depth == other.depth
            and self.exact == other.exact
            and all(np.array_equal(a, b) for a, b in zip(self._levels, other._levels, strict=True))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        kind = "exact" if self.exact else "float64"
        return f"TabularAR(name={self.name!r}, n={self.n}, depth={self.depth}, {kind})"
