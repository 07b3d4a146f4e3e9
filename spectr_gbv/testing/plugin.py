"""pytest plugin of spectr_gbv (entry point ``spectr_gbv`` in the group ``pytest11``).

Installed with the package, it adds to every pytest run:

* the option ``--spectr-budget {quick,standard,thorough}`` (default ``quick``), the sample
  budget of the fixtures below;
* ``spectr_budget`` - the chosen budget (str);
* ``spectr_validate`` - :func:`spectr_gbv.validate.validate` with ``budget`` defaulting to
  the chosen budget (any keyword can still be passed);
* ``spectr_instance`` - an :class:`~spectr_gbv.core.Instance`: the default instance (THEORY.md
  section 7), or, with ``@pytest.mark.parametrize("spectr_instance", [...], indirect=True)``,
  built from each parameter: an Instance, the instance JSON object (a dict), a path to an
  instance JSON file (a relative path is looked up next to the test module first, then in
  the current directory), ``"default"``, or ``"random:n,L,seed"``.

The plugin never imports torch, and imports the harness only when a fixture is used.

Examples
--------
A test module of another project::

    def test_my_verifier(spectr_validate):
        assert spectr_validate(my_verify, reference="sd").passed
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

#: Sample budgets of the harness, smallest first.
BUDGETS: tuple[str, ...] = ("quick", "standard", "thorough")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--spectr-budget``."""
    group = parser.getgroup("spectr_gbv", "speculative-decoding verifier conformance (spectr_gbv)")
    group.addoption(
        "--spectr-budget",
        action="store",
        choices=BUDGETS,
        default="quick",
        help="sample budget of the spectr_validate fixture (default: quick)",
    )


@pytest.fixture
def spectr_budget(request: pytest.FixtureRequest) -> str:
    """The ``--spectr-budget`` of this run (``"quick"`` unless given).

    Returns
    -------
    str
        One of :data:`BUDGETS`.
    """
    return str(request.config.getoption("--spectr-budget"))


@pytest.fixture
def spectr_validate(spectr_budget: str) -> Callable[..., Any]:
    """:func:`spectr_gbv.validate.validate` with ``budget`` defaulting to ``--spectr-budget``.

    Returns
    -------
    callable
        ``validate(verify, *, interface=..., level=..., reference=..., seed=..., budget=...,
        time_limit_s=..., instances=...) -> ValidationReport``.
    """
    from spectr_gbv.validate import validate

    return functools.partial(validate, budget=spectr_budget)


def build_instance(spec: Any, base_dir: str | os.PathLike[str] | None = None) -> Any:
    """Build an :class:`~spectr_gbv.core.Instance` from a fixture parameter.

    Parameters
    ----------
    spec : Instance, dict, str or os.PathLike
        An Instance (returned as is); the instance JSON object; ``"default"``;
        ``"random:n,L,seed"`` (exact :func:`~spectr_gbv.core.random_instance`); or a path to an
        instance JSON file.
    base_dir : str or os.PathLike, optional
        Where a relative path is looked up first (the fixture passes the test module's
        directory); then the current directory.

    Returns
    -------
    Instance

    Raises
    ------
    ValueError
        An unusable ``spec`` (the message quotes it).
    """
    from spectr_gbv.core import Instance, default_instance, load_instance, parse_instance, random_instance

    if isinstance(spec, Instance):
        return spec
    if isinstance(spec, dict):
        return parse_instance(spec)
    if spec == "default":
        return default_instance()
    if isinstance(spec, str) and spec.startswith("random:"):
        try:
            n, L, seed = (int(v) for v in spec.removeprefix("random:").split(","))
        except ValueError as exc:
            raise ValueError(f"spectr_instance: expected 'random:n,L,seed', got {spec!r}") from exc
        return random_instance(n, L, seed)
    if isinstance(spec, str) or hasattr(spec, "__fspath__"):
        path = Path(spec)
        if base_dir is not None and not path.is_absolute() and (Path(base_dir) / path).exists():
            path = Path(base_dir) / path
        return load_instance(path)
    raise ValueError(f"spectr_instance: cannot build an instance from {spec!r}")


@pytest.fixture
def spectr_instance(request: pytest.FixtureRequest) -> Any:
    """An instance: the default one, or built from the indirect parameter (see the module docstring).

    Returns
    -------
    Instance
    """
    return build_instance(getattr(request, "param", "default"), base_dir=request.path.parent)
