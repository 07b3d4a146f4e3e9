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

from spectr_gbv.core.numbers import check_seed, printable
from spectr_gbv.core.tabular import TabularAR, check_random_size, table_entries

#: Most table rows (prefixes, all depths) :func:`parse_instance` accepts per model (tables grow as n^L).
MAX_TABLE_ROWS = 2_000_000

#: Largest instance file :func:`load_instance` reads (64 MiB); larger files and endless
#: streams (``/dev/zero``) raise :class:`InstanceTooLargeError` before any JSON parsing.
MAX_INSTANCE_BYTES = 64 * 2**20


class InstanceTooLargeError(ValueError):
    """An instance file over :data:`MAX_INSTANCE_BYTES`, refused before it is parsed."""


class DuplicateKeyError(ValueError):
    """A JSON object of an instance file gives the same key twice (the second would silently win)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of :func:`json.loads`: a dict, or DuplicateKeyError naming the key."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"duplicate key {printable(json.dumps(key))}")
        out[key] = value
    return out


def _read_limited(path: Path, limit: int) -> bytes:
    """The file's bytes, refusing more than ``limit`` (checked on the size, then while reading)."""
    shown = printable(path)
    try:
        if path.is_dir():
            raise ValueError(f"instance: cannot read {shown}: it is a directory")
        size = path.stat().st_size
        if size > limit:
            raise InstanceTooLargeError(f"instance: {shown} has {size} bytes, above MAX_INSTANCE_BYTES={limit}")
        with path.open("rb") as fh:
            data = fh.read(limit + 1)  # devices and pipes report size 0: read at most limit + 1
    except OSError as exc:
        raise ValueError(f"instance: cannot read {shown}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        if str(exc).startswith("instance:"):
            raise
        raise ValueError(f"instance: cannot read {shown}: {exc}") from exc  # e.g. an embedded NUL byte
    if len(data) > limit:
        raise InstanceTooLargeError(f"instance: {shown} has over {limit} bytes, above MAX_INSTANCE_BYTES={limit}")
    return data


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

    The label (``name``, else the object's ``"name"``) is kept with its control characters
    written as escapes (:func:`~spectr_gbv.core.numbers.printable`), so printing it cannot
    drive the terminal.

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
        raise ValueError(f"instance: n must be a positive int, got {_short(n)}")
    if not isinstance(L, int) or isinstance(L, bool) or L < 1:
        raise ValueError(f"instance: L must be an int >= 1, got {_short(L)}")
    rows = table_entries(n, L - 1) + 1  # prefixes of length 0..L
    if rows > MAX_TABLE_ROWS:
        count = str(rows) if rows < 2**62 else "over 4.6e18"
        raise ValueError(f"instance: n={n}, L={L} needs {count} rows per model (limit {MAX_TABLE_ROWS})")
    models = {}
    for role in ("target", "draft"):
        laws = data[role]
        if not isinstance(laws, dict):
            raise ValueError(f"instance: {role} must be an object mapping prefixes to rows")
        models[role] = TabularAR(n, laws, name=role)
    label = name or str(data.get("name", "instance"))
    return Instance(models["target"], models["draft"], L, printable(label))


def _short(value: Any) -> str:
    """``repr(value)`` cut to 60 characters (a huge int's repr can fail or flood the terminal)."""
    if isinstance(value, int) and abs(value).bit_length() > 160:
        return f"an int of {abs(value).bit_length()} bits"
    text = printable(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."


def load_instance(path: str | Path) -> Instance:
    """Read an instance JSON file.

    Raises
    ------
    InstanceTooLargeError
        A file over :data:`MAX_INSTANCE_BYTES` (checked on its size and while reading, so
        ``/dev/zero`` is refused too), before any parsing.
    DuplicateKeyError
        A JSON object giving a key twice (JSON's "last one wins" would change the instance
        silently); the message names the key and the file.
    ValueError
        Unreadable file or directory, a file that is not UTF-8 text, invalid JSON, or an
        invalid instance (the message names the file and the problem).
    """
    path = Path(path)
    shown = printable(path)
    raw = _read_limited(path, MAX_INSTANCE_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"instance: {shown} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from exc
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except DuplicateKeyError as exc:
        raise DuplicateKeyError(f"instance: {shown}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"instance: {shown} is not valid JSON ({exc})") from exc
    except (ValueError, RecursionError) as exc:  # e.g. an int over sys.get_int_max_str_digits()
        raise ValueError(f"instance: {shown} is not a usable JSON instance ({printable(exc)})") from exc
    label = data.get("name", path.stem) if isinstance(data, dict) else None
    try:
        return parse_instance(data, name=None if label is None else str(label))
    except ValueError as exc:
        raise ValueError(f"{exc} (in {shown})") from exc


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
        ``n`` < 1, ``L`` < 1, ``depth`` < L, tables larger than
        :data:`~spectr_gbv.core.tabular.MAX_RANDOM_ROWS` rows or
        :data:`~spectr_gbv.core.tabular.MAX_RANDOM_ENTRIES` entries (checked before drawing),
        or a bad ``seed``, ``zero_prob`` or ``concentration`` (see
        :meth:`~spectr_gbv.core.tabular.TabularAR.random`); the message names the argument.
    """
    d = L if depth is None else depth
    if isinstance(L, bool) or not isinstance(L, int | np.integer) or L < 1:
        raise ValueError(f"L (draft length) must be an int >= 1, got {L!r}")
    if depth is not None and (isinstance(d, bool) or not isinstance(d, int | np.integer) or d < L):
        raise ValueError(f"depth must be an int >= L = {L}, got {depth!r}")
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n (vocabulary size) must be an int >= 1, got {n!r}")
    check_random_size(n, d, what="L" if depth is None else "depth")
    seed = check_seed(seed, "seed")
    rng = np.random.default_rng(seed)
    kw = dict(exact=exact, zero_prob=zero_prob, concentration=concentration)
    target = TabularAR.random(n, d, rng, name="target", **kw)
    draft = TabularAR.random(n, d, rng, name="draft", **kw)
    extra = f", zero_prob={zero_prob:g}" if zero_prob else ""
    extra += f", concentration={concentration:g}" if concentration != 1.0 else ""
    extra += ", float64" if not exact else ""
    return Instance(target, draft, L, f"random(n={n}, L={L}, seed={seed}{extra})")
