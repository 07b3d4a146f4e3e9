"""A verification instance (target p, draft q, draft length L) and its JSON format.

Instance JSON (stable; the CLI's input)::

    {"n": 2, "L": 2, "name": "optional label",
     "target": {"": ["1/2","1/2"], "0": ["3/4","1/4"], "0,1": [...], ...},
     "draft":  {...}}

Keys are comma-separated prefixes (``""`` is the empty prefix); values are probability rows
of length ``n`` given as fraction strings (``"3/4"``, ``"0.25"``), ints, or JSON numbers.
The target needs a law at every prefix of length ``0..L`` (length ``L`` is the bonus
position); the draft needs every prefix of length ``0..L-1`` and may also give length ``L``.
Deeper tables are allowed (multi-iteration simulation uses them). The instance is exact
(Fractions throughout) when no entry is a JSON float; otherwise both models are float64.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from spectr_gbv.core.tabular import MAX_RANDOM_ROWS, TabularAR

#: Most table rows (prefixes, all depths) :func:`parse_instance` accepts per model (tables grow as n^L).
MAX_TABLE_ROWS = 2_000_000


@dataclass(frozen=True)
class Instance:
    """Target model p, draft model q and draft length L (THEORY.md section 1).

    Attributes
    ----------
    target : TabularAR
        p, laws at every prefix of length ``0..L`` (at least).
    draft : TabularAR
        q, laws at every prefix of length ``0..L-1`` (at least), same vocabulary as p.
    L : int
        Draft length (gamma), ``L >= 1``.
    name : str
        Label used in reports.

    Raises
    ------
    ValueError
        Vocabulary mismatch, ``L < 1``, or tables too shallow for ``L``.
    """

    target: TabularAR
    draft: TabularAR
    L: int
    name: str = "instance"

    def __post_init__(self) -> None:
        for name in ("target", "draft"):
            if not isinstance(getattr(self, name), TabularAR):
                raise TypeError(f"{name} must be a TabularAR, got {type(getattr(self, name)).__name__}")
        if not isinstance(self.L, int | np.integer) or self.L < 1:
            raise ValueError(f"L (draft length) must be an int >= 1, got {self.L!r}")
        if self.target.n != self.draft.n:
            raise ValueError(f"vocabulary mismatch: target has n={self.target.n}, draft has n={self.draft.n}")
        if self.target.depth < self.L:
            raise ValueError(
                f"target needs laws at prefixes of length 0..L={self.L} (bonus position); "
                f"it has depth {self.target.depth}"
            )
        if self.draft.depth < self.L - 1:
            raise ValueError(
                f"draft needs laws at prefixes of length 0..L-1={self.L - 1}; it has depth {self.draft.depth}"
            )
        if self.target.exact != self.draft.exact:
            # one float model makes the instance float64
            object.__setattr__(self, "target", self.target.to_float())
            object.__setattr__(self, "draft", self.draft.to_float())

    def __iter__(self):  # noqa: ANN204 - unpacking support: ``p, q = instance``
        """Unpack as ``(target, draft)`` so ``f(*instance, ...)`` works."""
        return iter((self.target, self.draft))

    @property
    def n(self) -> int:
        """Vocabulary size."""
        return self.target.n

    @property
    def exact(self) -> bool:
        """True when both models hold Fractions."""
        return self.target.exact

    def to_float(self) -> Instance:
        """The same instance in float64."""
        return Instance(self.target.to_float(), self.draft.to_float(), self.L, self.name)

    def with_L(self, L: int) -> Instance:
        """The same models with another draft length (tables must be deep enough)."""
        return Instance(self.target, self.draft, L, self.name)

    def to_dict(self) -> dict[str, Any]:
        """The instance JSON object (see module docstring)."""
        return {
            "name": self.name,
            "n": self.n,
            "L": self.L,
            "target": self.target.to_mapping(),
            "draft": self.draft.to_mapping(),
        }


def parse_instance(data: dict[str, Any], *, name: str | None = None) -> Instance:
    """Build an :class:`Instance` from the instance JSON object.

    Raises
    ------
    ValueError
        Missing or malformed field (``n``, ``L``, ``target``, ``draft``), a bad row or prefix
        (message names the model and prefix), or a table over :data:`MAX_TABLE_ROWS` rows.
    """
    if not isinstance(data, dict):
        raise ValueError("instance: top level must be a JSON object")
    for field in ("n", "L", "target", "draft"):
        if field not in data:
            raise ValueError(f"instance: missing field {field!r}")
    n, L = data["n"], data["L"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"instance: n must be a positive int, got {n!r}")
    if not isinstance(L, int) or isinstance(L, bool) or L < 1:
        raise ValueError(f"instance: L must be an int >= 1, got {L!r}")
    rows = sum(n**t for t in range(L + 1))
    if rows > MAX_TABLE_ROWS:
        raise ValueError(f"instance: n={n}, L={L} needs {rows} rows per model (limit {MAX_TABLE_ROWS})")
    models = {}
    for role in ("target", "draft"):
        laws = data[role]
        if not isinstance(laws, dict):
            raise ValueError(f"instance: {role} must be an object mapping prefixes to rows")
        models[role] = TabularAR(n, laws, name=role)
    label = name or str(data.get("name", "instance"))
    return Instance(models["target"], models["draft"], L, label)


def load_instance(path: str | Path) -> Instance:
    """Read an instance JSON file.

    Raises
    ------
    ValueError
        Unreadable file, invalid JSON, or an invalid instance (message names the problem).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"instance: cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"instance: {path} is not valid JSON ({exc})") from exc
    return parse_instance(data, name=str(data.get("name", path.stem)) if isinstance(data, dict) else None)


def default_instance() -> Instance:
    """The embedded default instance: THEORY.md section 7 (n = 2, L = 2, exact).

    Examples
    --------
    >>> inst = default_instance()
    >>> inst.n, inst.L, inst.exact
    (2, 2, True)
    """
    text = resources.files("spectr_gbv.data").joinpath("default_instance.json").read_text()
    return parse_instance(json.loads(text))


def random_instance(
    n: int,
    L: int,
    seed: int | None = None,
    *,
    exact: bool = True,
    zero_prob: float = 0.0,
    concentration: float = 1.0,
    depth: int | None = None,
) -> Instance:
    """A random instance: target and draft rows Dirichlet(``concentration``), seeded.

    Parameters
    ----------
    n, L : int
        Vocabulary size and draft length.
    seed : int, optional
    exact : bool
        Rational rows (small denominators) when True, float64 otherwise.
    zero_prob : float
        Probability that an entry is zeroed (exercises disjoint supports).
    concentration : float
        Dirichlet parameter.
    depth : int, optional
        Table depth, default ``L`` (deeper for multi-iteration simulation).

    Raises
    ------
    ValueError
        ``n`` < 1, ``L`` < 1, or tables larger than :data:`~spectr_gbv.core.tabular.MAX_RANDOM_ROWS` rows.
    """
    d = L if depth is None else depth
    if isinstance(L, bool) or not isinstance(L, int | np.integer) or L < 1:
        raise ValueError(f"L (draft length) must be an int >= 1, got {L!r}")
    if isinstance(n, int | np.integer) and not isinstance(n, bool) and n >= 1 and isinstance(d, int | np.integer):
        rows = sum(int(n) ** t for t in range(int(d) + 1))
        if rows > MAX_RANDOM_ROWS:
            raise ValueError(f"n={n}, L={L}: {rows} prefixes per table, above MAX_RANDOM_ROWS={MAX_RANDOM_ROWS}")
    rng = np.random.default_rng(seed)
    kw = dict(exact=exact, zero_prob=zero_prob, concentration=concentration)
    target = TabularAR.random(n, d, rng, name="target", **kw)
    draft = TabularAR.random(n, d, rng, name="draft", **kw)
    extra = f", zero_prob={zero_prob:g}" if zero_prob else ""
    extra += f", concentration={concentration:g}" if concentration != 1.0 else ""
    extra += ", float64" if not exact else ""
    return Instance(target, draft, L, f"random(n={n}, L={L}, seed={seed}{extra})")
