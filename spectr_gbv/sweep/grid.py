"""The sweep's declared grid: instance families x methods x K x measures, and its split into tasks.

A grid is given as a TOML file (:func:`load_grid_toml`) or as the CLI's flags
(:func:`grid_from_args`)::

    methods = ["mdbv", "optimal_multidraft", "my_rules:RuleB"]   # registered or module:attribute
    K = [2, 3]                      # or "2-4", or "1,2,5"
    measures = ["tau", "bounds", "opt"]

    [[family]]
    random = "3,2,0-99,0.3"         # n, L, seed range (inclusive), optional zero_prob
    [[family]]
    dir = "instances/"              # every *.json instance file of the folder (relative to the TOML)
    [[family]]
    battery = true                  # the validate battery (spectr_gbv.validate.battery.KINDS)

:meth:`SweepGrid.tasks` gives one :class:`Task` per instance, carrying what a worker needs to
rebuild the instance (never the instance itself) and every (method, K) of it. Every check
raises a one-line ``ValueError`` that names the field and the value.

Methods are registered names (:data:`~spectr_gbv.core.methods.METHOD_TABLE`, or a class added
with :func:`~spectr_gbv.reference.registry.register`) or ``"module:attribute"`` naming a
user's rule (:func:`~spectr_gbv.reference.user_rules.resolve_rule`), imported once when the
grid is built, so a typo stops the sweep before anything runs; rows are labelled with the
names as given. How many K a method runs at follows
:meth:`~spectr_gbv.core.methods.MethodSpec.grid_shape`: a single-draft method (the table's
``drafts = "one"``, e.g. ``sd``, ``bv``) and ``ar`` (``"none"``) run at K = 1 only, whatever
K the grid names; a multi-draft method at every K of the grid. A user's rule reads all K
drafts unless it declares ``drafts = "one"`` (a class attribute of a Verifier, or an
attribute of a function: ``my_rule.drafts = "one"``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from spectr_gbv.core.methods import DraftArity, grid_shape, is_registered, method_spec
from spectr_gbv.sweep.schema import KEY, MEASURES

#: Methods of a grid that names none: the grid's choice, each a name of the method table.
DEFAULT_METHODS: tuple[str, ...] = tuple(method_spec(m).name for m in ("sd", "bv", "mdbv"))
#: Values a user's rule may declare as its ``drafts`` attribute (as :class:`~spectr_gbv.core.methods.MethodSpec`'s).
DRAFT_ARITIES: tuple[str, ...] = get_args(DraftArity)
#: K values of a grid that names none.
DEFAULT_KS: tuple[int, ...] = (1, 2)
#: Measures of a grid that names none (``tau`` is always measured).
DEFAULT_MEASURES: tuple[str, ...] = ("tau", "bounds")
#: Largest K a sweep accepts (the exact simulators enumerate K-tuples of drafts).
MAX_SWEEP_K = 8
#: Most instances (tasks) one grid may expand to.
MAX_TASKS = 100_000
#: Keys a grid TOML file may hold at its top level.
TOML_KEYS: tuple[str, ...] = ("methods", "K", "measures", "family")
#: Keys of one ``[[family]]`` table (exactly one of them per table).
FAMILY_KEYS: tuple[str, ...] = ("random", "dir", "battery")


def _number_text(value: float) -> str:
    """Shortest text that reads back as ``value`` (``0.3`` -> ``"0.3"``, ``0.0`` -> ``"0"``)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def check_instance_files(directory: str | Path, *, shown: str | None = None) -> None:
    """Load every ``*.json`` instance file of a folder; refuse the folder when any fails.

    A progress bar on stderr (:func:`~spectr_gbv.core.progress.progress`) counts the files.

    Parameters
    ----------
    directory : str or Path
        A folder of instance JSON files (:func:`~spectr_gbv.core.instance.load_instance`).
    shown : str, optional
        How the folder is named in the message (default ``str(directory)``).

    Raises
    ------
    ValueError
        One line: ``dir: 2 of 5 instance files in 'DIR' fail to load: a.json (REASON); b.json
        (REASON)`` (the first three named, then a count).
    """
    from spectr_gbv.core.instance import load_instance
    from spectr_gbv.core.progress import progress

    files = sorted(Path(directory).glob("*.json"))
    broken: list[str] = []
    with progress(len(files), "dir: loading instance files", unit="file") as bar:
        for f in files:
            try:
                load_instance(f)
            except (OSError, ValueError) as exc:
                reason = " ".join(str(exc).split()).replace(str(f), f.name)
                broken.append(f"{f.name} ({reason if len(reason) <= 160 else reason[:157] + '...'})")
            bar.update(1)
    if broken:
        more = f"; and {len(broken) - 3} more" if len(broken) > 3 else ""
        raise ValueError(
            f"dir: {len(broken)} of {len(files)} instance files in {shown or str(directory)!r} fail to load: "
            + "; ".join(broken[:3])
            + more
        )


@dataclass(frozen=True)
class FamilySpec:
    """One instance family of a grid.

    Attributes
    ----------
    kind : str
        ``"random"``, ``"dir"`` or ``"battery"``.
    n, L : int or None
        Vocabulary size and draft length (``random`` only).
    seeds : tuple of int or None
        ``(first, last)``, inclusive (``random`` only).
    zero_prob : float
        Share of zeroed entries of the random instances (``random`` only).
    path : str or None
        The folder of instance JSON files, absolute (``dir`` only).
    """

    kind: str
    n: int | None = None
    L: int | None = None
    seeds: tuple[int, int] | None = None
    zero_prob: float = 0.0
    path: str | None = None

    @classmethod
    def random(cls, text: str) -> FamilySpec:
        """Parse ``"n,L,seeds[,zero_prob]"``, seeds ``"7"`` or ``"0-99"`` (inclusive).

        Raises
        ------
        ValueError
            Malformed text, n or L < 1, an empty or negative seed range, zero_prob outside
            ``[0, 1)``, tables too large to draw (:func:`~spectr_gbv.core.tabular.check_random_size`).
        """
        usage = f"random: expected n,L,seeds[,zero_prob] (e.g. 3,2,0-99,0.3), got {text!r}"
        parts = [p.strip() for p in str(text).split(",")]
        if len(parts) not in (3, 4):
            raise ValueError(usage)
        try:
            n, L = int(parts[0]), int(parts[1])
            zero_prob = float(parts[3]) if len(parts) == 4 else 0.0
        except ValueError as exc:
            raise ValueError(usage) from exc
        lo_text, sep, hi_text = parts[2].partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if sep else lo
        except ValueError as exc:
            raise ValueError(f"random: bad seed range {parts[2]!r} in {text!r} (expected 7 or 0-99)") from exc
        if lo < 0 or hi < lo:
            raise ValueError(f"random: bad seed range {parts[2]!r} in {text!r} (need 0 <= first <= last)")
        if n < 1 or L < 1:
            raise ValueError(f"random: need n >= 1 and L >= 1, got {text!r}")
        if not 0 <= zero_prob < 1:
            raise ValueError(f"random: zero_prob must lie in [0, 1), got {text!r}")
        from spectr_gbv.core.tabular import check_random_size

        check_random_size(n, L, what="L")  # raises a one-line ValueError naming n and L
        return cls("random", n=n, L=L, seeds=(lo, hi), zero_prob=zero_prob)

    @classmethod
    def directory(cls, path: str | Path, *, base: str | Path | None = None) -> FamilySpec:
        """A folder of instance JSON files (``base``: the folder a relative path is read from).

        Every ``*.json`` file is loaded once here (:func:`check_instance_files`), so a broken one
        stops the sweep before anything runs.

        Raises
        ------
        ValueError
            The folder does not exist, holds no ``*.json`` file, or holds files that do not load
            as instances (bad JSON, invalid rows; the files are named).
        """
        where = Path(path)
        if base is not None and not where.is_absolute():
            where = Path(base) / where
        if not where.is_dir():
            raise ValueError(f"dir: no such directory {str(path)!r}")
        if not any(where.glob("*.json")):
            raise ValueError(f"dir: {str(path)!r} holds no *.json instance file")
        check_instance_files(where, shown=str(path))
        return cls("dir", path=str(where.resolve()))

    @classmethod
    def battery(cls) -> FamilySpec:
        """The validate battery (:data:`spectr_gbv.validate.battery.KINDS`)."""
        return cls("battery")

    def instances(self) -> list[tuple[str, dict[str, Any]]]:
        """``(instance_id, spec)`` of every instance, the spec being what :func:`build_instance` reads."""
        if self.kind == "random":
            assert self.seeds is not None and self.n is not None and self.L is not None
            zp = _number_text(self.zero_prob)
            return [
                (
                    f"random:{self.n},{self.L},{seed},{zp}",
                    {"kind": "random", "n": self.n, "L": self.L, "seed": seed, "zero_prob": self.zero_prob},
                )
                for seed in range(self.seeds[0], self.seeds[1] + 1)
            ]
        if self.kind == "dir":
            assert self.path is not None
            files = sorted(Path(self.path).glob("*.json"))
            return [(f"file:{f.stem}", {"kind": "dir", "path": str(f)}) for f in files]
        from spectr_gbv.validate.battery import KINDS

        return [(f"battery:{kind}", {"kind": "battery", "name": kind}) for kind in KINDS]

    def count(self) -> int:
        """Number of instances, without listing them."""
        if self.kind == "random":
            assert self.seeds is not None
            return self.seeds[1] - self.seeds[0] + 1
        return len(self.instances())

    def to_dict(self) -> dict[str, Any]:
        """The family as in a grid TOML file (``{"random": "3,2,0-99,0.3"}``, ``{"dir": ...}``, ...)."""
        if self.kind == "random":
            assert self.seeds is not None
            return {"random": f"{self.n},{self.L},{self.seeds[0]}-{self.seeds[1]},{_number_text(self.zero_prob)}"}
        if self.kind == "dir":
            return {"dir": self.path}
        return {"battery": True}


@dataclass(frozen=True)
class Task:
    """One instance of a sweep with every (method, K) to compute on it: the unit a worker runs.

    Attributes
    ----------
    instance_id : str
        The row key's instance part: ``"random:n,L,seed,zero_prob"``, ``"file:STEM"`` or
        ``"battery:KIND"`` (see :data:`~spectr_gbv.sweep.schema.COLUMNS`).
    family : str
        ``"random"``, ``"dir"`` or ``"battery"``.
    spec : dict
        What rebuilds the instance in the worker (:func:`build_instance`).
    methods : tuple of str
    ks : tuple of int
        The grid's K values.
    measures : tuple of str
        Subset of :data:`~spectr_gbv.sweep.schema.MEASURES`, always with ``"tau"``.
    drafts : tuple of str
        Each method's draft arity (``"none"``, ``"one"``, ``"many"``), aligned with
        ``methods``; empty: every method reads all K drafts.
    rules : tuple of (str, type)
        ``(name, class)`` of each method added with
        :func:`~spectr_gbv.reference.registry.register` in the driver, which a worker
        registers before it runs (``module:attribute`` names are imported by the worker).
    """

    instance_id: str
    family: str
    spec: dict[str, Any] = field(hash=False)
    methods: tuple[str, ...]
    ks: tuple[int, ...]
    measures: tuple[str, ...]
    drafts: tuple[str, ...] = ()
    rules: tuple[tuple[str, Any], ...] = field(default=(), hash=False, compare=False)

    def method_ks(self, method: str) -> tuple[int, ...]:
        """The K values ``method`` runs at: K = 1 only for a single-draft method or ``ar``.

        The rule of :meth:`~spectr_gbv.core.methods.MethodSpec.grid_shape`, read from
        ``drafts``.
        """
        arity = self.drafts[self.methods.index(method)] if self.drafts else "many"
        return _grid_ks(arity, self.ks)

    def keys(self) -> set[tuple[str, str, int]]:
        """The :data:`~spectr_gbv.sweep.schema.KEY` of every row this task produces."""
        return {(self.instance_id, m, k) for m in self.methods for k in self.method_ks(m)}


def _grid_ks(arity: str, ks: tuple[int, ...]) -> tuple[int, ...]:
    """The distinct K of :func:`~spectr_gbv.core.methods.grid_shape` over the grid's ``ks``, in order."""
    return tuple(dict.fromkeys(grid_shape(arity, k, 1)[0] for k in ks))  # type: ignore[arg-type]


def method_drafts(name: str) -> DraftArity:
    """The draft arity of a grid method: the table's ``drafts``, else the rule's ``drafts`` attribute.

    Parameters
    ----------
    name : str
        A registered name or ``"module:attribute"``.

    Returns
    -------
    {"none", "one", "many"}
        ``"many"`` for a user's rule that declares nothing.

    Raises
    ------
    ValueError
        An unknown name, a rule that cannot be loaded, or a ``drafts`` attribute outside
        :data:`DRAFT_ARITIES` (one line naming the method).
    """
    if is_registered(name):
        return method_spec(name).drafts
    from spectr_gbv.reference.registry import check_method
    from spectr_gbv.reference.user_rules import resolve_rule

    if ":" not in name:
        check_method(name)  # the registry's one line for an unknown name

    info, verifier = resolve_rule(name)
    declared = getattr(verifier, "drafts", info.drafts) if verifier is not None else info.drafts
    if declared not in DRAFT_ARITIES:
        raise ValueError(f"method {name!r}: drafts must be one of {', '.join(DRAFT_ARITIES)}, got {declared!r}")
    return declared  # type: ignore[no-any-return]


def build_instance(spec: dict[str, Any]) -> Any:
    """Rebuild the :class:`~spectr_gbv.core.instance.Instance` a ``Task.spec`` names.

    Raises
    ------
    ValueError
        An unreadable or invalid instance file, or an unknown spec kind.
    """
    kind = spec.get("kind")
    if kind == "random":
        from spectr_gbv.core.instance import random_instance

        return random_instance(spec["n"], spec["L"], spec["seed"], exact=True, zero_prob=spec["zero_prob"])
    if kind == "dir":
        from spectr_gbv.core.instance import load_instance

        return load_instance(spec["path"])
    if kind == "battery":
        from spectr_gbv.validate.battery import default_battery

        return default_battery(kinds=[spec["name"]])[0].instance
    raise ValueError(f"spec: unknown instance kind {kind!r}")


@dataclass(frozen=True)
class SweepGrid:
    """A declared sweep: instance families x methods x K, and the measures of each row.

    Attributes
    ----------
    families : tuple of FamilySpec
    methods : tuple of str
        Registered names (:func:`~spectr_gbv.reference.registry.check_method`) or
        ``"module:attribute"`` names of user rules (imported here, once).
    ks : tuple of int
        K values in ``1..MAX_SWEEP_K``.
    measures : tuple of str
        Subset of :data:`~spectr_gbv.sweep.schema.MEASURES` in its order, always with ``"tau"``.

    Raises
    ------
    ValueError
        No family, no method, an unknown method or measure, a K outside ``1..MAX_SWEEP_K``,
        or more than :data:`MAX_TASKS` instances; one line naming the field and the value.
    """

    families: tuple[FamilySpec, ...]
    methods: tuple[str, ...] = DEFAULT_METHODS
    ks: tuple[int, ...] = DEFAULT_KS
    measures: tuple[str, ...] = DEFAULT_MEASURES
    _drafts: dict[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not self.families:
            raise ValueError("family: the grid names no instance family (give random, dir or battery)")
        if not self.methods:
            raise ValueError("methods: the grid names no method")
        drafts = []
        for m in self.methods:
            try:
                if not isinstance(m, str):
                    raise TypeError(f"method must be a method name (a str), got {type(m).__name__} {m!r:.60}")
                drafts.append(method_drafts(m))
            except (TypeError, ValueError) as exc:
                msg = " ".join(str(exc).split())
                raise ValueError(f"methods: {msg if repr(m) in msg else f'method {m!r}: {msg}'}") from exc
        object.__setattr__(self, "_drafts", dict(zip(self.methods, drafts, strict=True)))  # read by tasks()
        if not self.ks:
            raise ValueError("K: the grid names no K value")
        for k in self.ks:
            if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SWEEP_K:
                raise ValueError(f"K: values must be ints in 1..{MAX_SWEEP_K}, got {k!r}")
        for name in self.measures:
            if name not in MEASURES:
                raise ValueError(f"measures: unknown measure {name!r}; valid: {', '.join(MEASURES)}")
        object.__setattr__(self, "methods", tuple(dict.fromkeys(self.methods)))
        object.__setattr__(self, "ks", tuple(dict.fromkeys(self.ks)))
        chosen = set(self.measures) | {"tau"}
        object.__setattr__(self, "measures", tuple(m for m in MEASURES if m in chosen))
        total = sum(f.count() for f in self.families)
        if total > MAX_TASKS:
            raise ValueError(f"family: the grid expands to {total} instances, above MAX_TASKS={MAX_TASKS}")

    def tasks(self) -> list[Task]:
        """One :class:`Task` per distinct instance, in family order.

        Raises
        ------
        ValueError
            Two different sources give the same instance id (e.g. two folders holding
            ``a.json``).
        """
        from spectr_gbv.reference.registry import get_verifier

        drafts = tuple(self._drafts[m] for m in self.methods)
        rules = tuple((m, type(get_verifier(m))) for m in self.methods if ":" not in m and not is_registered(m))
        out: dict[str, Task] = {}
        for fam in self.families:
            for instance_id, spec in fam.instances():
                task = Task(instance_id, fam.kind, spec, self.methods, self.ks, self.measures, drafts, rules)
                seen = out.get(instance_id)
                if seen is not None and seen.spec != spec:
                    raise ValueError(f"family: two instances share the id {instance_id!r} ({seen.spec} and {spec})")
                out.setdefault(instance_id, task)
        return list(out.values())

    def method_ks(self, method: str) -> tuple[int, ...]:
        """The K values ``method`` runs at (K = 1 only for a single-draft method or ``ar``)."""
        return _grid_ks(self._drafts[method], self.ks)

    def num_rows(self) -> int:
        """Rows of the complete sweep (tasks x the (method, K) pairs each method runs at)."""
        return len(self.tasks()) * sum(len(self.method_ks(m)) for m in self.methods)

    def to_dict(self) -> dict[str, Any]:
        """The grid as JSON (the TOML layout), for the folder's provenance (``_sweep.parquet``)."""
        return {
            "methods": list(self.methods),
            "K": list(self.ks),
            "measures": list(self.measures),
            "family": [f.to_dict() for f in self.families],
            "key": list(KEY),
        }


def parse_k_values(value: Any) -> tuple[int, ...]:
    """K values from a TOML/flag value: a list of ints, an int, or a string ``"2,3"`` / ``"2-4"``.

    Raises
    ------
    ValueError
        Not of those forms, an empty range, or a value outside ``1..MAX_SWEEP_K``.
    """
    if isinstance(value, bool):
        raise ValueError(f'K: expected ints (e.g. [2, 3] or "2-4"), got {value!r}')
    if isinstance(value, int):
        value = [value]
    if isinstance(value, list):
        if not all(isinstance(k, int) and not isinstance(k, bool) for k in value):
            raise ValueError(f'K: expected ints (e.g. [2, 3] or "2-4"), got {value!r}')
        ks = list(value)
    elif isinstance(value, str):
        ks = []
        for part in value.split(","):
            lo_text, sep, hi_text = part.strip().partition("-")
            try:
                lo = int(lo_text)
                hi = int(hi_text) if sep else lo
            except ValueError as exc:
                raise ValueError(
                    f"K: expected comma-separated ints or a range (e.g. 2,3 or 2-4), got {value!r}"
                ) from exc
            if hi < lo:
                raise ValueError(f"K: range {part.strip()!r} is empty (write it low-high), got {value!r}")
            if not 1 <= lo <= MAX_SWEEP_K or not 1 <= hi <= MAX_SWEEP_K:
                raise ValueError(f"K: values must be ints in 1..{MAX_SWEEP_K}, got {value!r}")
            ks.extend(range(lo, hi + 1))
    else:
        raise ValueError(f'K: expected ints (e.g. [2, 3] or "2-4"), got {value!r}')
    for k in ks:
        if not 1 <= k <= MAX_SWEEP_K:
            raise ValueError(f"K: values must be ints in 1..{MAX_SWEEP_K}, got {value!r}")
    return tuple(ks)


def _names(value: Any, what: str) -> tuple[str, ...]:
    """Names from a list of str or a comma-separated str."""
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value)
    raise ValueError(f"{what}: expected a list of names or a comma-separated string, got {value!r}")


def load_grid_toml(path: str | Path) -> SweepGrid:
    """Read a grid TOML file (layout in the module docstring; stdlib ``tomllib``).

    Parameters
    ----------
    path : str or Path
        The TOML file. A family's relative ``dir`` is read from the file's folder.

    Returns
    -------
    SweepGrid

    Raises
    ------
    ValueError
        Unreadable file, invalid TOML, an unknown key, a family with none or several of
        ``random`` / ``dir`` / ``battery``, or any check of :class:`SweepGrid` and
        :class:`FamilySpec`; one line, prefixed with the file name.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"grid {path}: cannot read it ({exc.strerror or exc})") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"grid {path}: not valid TOML ({exc})") from exc
    try:
        return _grid_from_mapping(data, base=path.parent)
    except ValueError as exc:
        raise ValueError(f"grid {path}: {exc}") from exc


def _grid_from_mapping(data: dict[str, Any], *, base: Path) -> SweepGrid:
    for key in data:
        if key not in TOML_KEYS:
            raise ValueError(f"unknown key {key!r}; valid: {', '.join(TOML_KEYS)}")
    raw_families = data.get("family", [])
    if not isinstance(raw_families, list):
        raise ValueError("family: write each family as a [[family]] table")
    families = []
    for entry in raw_families:
        if not isinstance(entry, dict):
            raise ValueError("family: write each family as a [[family]] table")
        for key in entry:
            if key not in FAMILY_KEYS:
                raise ValueError(f"family: unknown key {key!r}; valid: {', '.join(FAMILY_KEYS)}")
        if len(entry) != 1:
            raise ValueError(f"family: each [[family]] gives exactly one of random, dir, battery; got {entry!r}")
        (key, value), *_ = entry.items()
        if key == "random":
            if not isinstance(value, str):
                raise ValueError(f'random: expected a string such as "3,2,0-99,0.3", got {value!r}')
            families.append(FamilySpec.random(value))
        elif key == "dir":
            if not isinstance(value, str):
                raise ValueError(f"dir: expected a path string, got {value!r}")
            families.append(FamilySpec.directory(value, base=base))
        else:
            if value is not True:
                raise ValueError(f"battery: expected true, got {value!r}")
            families.append(FamilySpec.battery())
    return SweepGrid(
        families=tuple(families),
        methods=_names(data["methods"], "methods") if "methods" in data else DEFAULT_METHODS,
        ks=parse_k_values(data["K"]) if "K" in data else DEFAULT_KS,
        measures=_names(data["measures"], "measures") if "measures" in data else DEFAULT_MEASURES,
    )


def grid_from_args(
    *,
    random: Iterable[str] = (),
    instances: str | Path | None = None,
    battery: bool = False,
    methods: str | Sequence[str] | None = None,
    ks: str | Sequence[int] | None = None,
    measures: str | Sequence[str] | None = None,
    base: SweepGrid | None = None,
) -> SweepGrid:
    """A grid from the CLI's flags (``--random``, ``--instances``, ``--battery``, ...).

    Parameters
    ----------
    random : iterable of str
        ``"n,L,seeds[,zero_prob]"`` families (``--random``, repeatable).
    instances : str or Path, optional
        A folder of instance JSON files (``--instances``).
    battery : bool
        Add the validate battery (``--battery``).
    methods : str or sequence of str, optional
        ``"sd,mdbv"`` or a list; default :data:`DEFAULT_METHODS` (or ``base``'s).
    ks : str or sequence of int, optional
        ``"2,3"``, ``"2-4"`` or a list; default :data:`DEFAULT_KS` (or ``base``'s).
    measures : str or sequence of str, optional
        ``"tau,bounds,opt,ot"`` or a list; default :data:`DEFAULT_MEASURES` (or ``base``'s).
    base : SweepGrid, optional
        A grid read from TOML: its families are kept, the flags given replace its fields.

    Returns
    -------
    SweepGrid

    Raises
    ------
    ValueError
        Any check of :class:`SweepGrid` and :class:`FamilySpec` (one line naming the field).
    """
    families = list(base.families) if base is not None else []
    families += [FamilySpec.random(text) for text in random]
    if instances is not None:
        families.append(FamilySpec.directory(instances))
    if battery:
        families.append(FamilySpec.battery())
    return SweepGrid(
        families=tuple(families),
        methods=(
            _names(methods if isinstance(methods, str) else list(methods), "methods")
            if methods is not None
            else (base.methods if base is not None else DEFAULT_METHODS)
        ),
        ks=(
            parse_k_values(ks if isinstance(ks, str) else list(ks))
            if ks is not None
            else (base.ks if base is not None else DEFAULT_KS)
        ),
        measures=(
            _names(measures if isinstance(measures, str) else list(measures), "measures")
            if measures is not None
            else (base.measures if base is not None else DEFAULT_MEASURES)
        ),
    )


__all__ = [
    "DEFAULT_KS",
    "DEFAULT_MEASURES",
    "DEFAULT_METHODS",
    "DRAFT_ARITIES",
    "FAMILY_KEYS",
    "MAX_SWEEP_K",
    "MAX_TASKS",
    "TOML_KEYS",
    "FamilySpec",
    "SweepGrid",
    "Task",
    "build_instance",
    "check_instance_files",
    "grid_from_args",
    "load_grid_toml",
    "method_drafts",
    "parse_k_values",
]
