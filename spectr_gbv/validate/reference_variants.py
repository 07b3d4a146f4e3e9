"""``NAME:VARIANT`` reference names: a registered algorithm under a documented convention.

``validate(verify, reference="rrs:random_order")`` (CLI ``--reference rrs:random_order``)
compares the verifier's law given the drafts with the named variant's exact law. A bare name
(``"rrs"``) is the registered verifier, which is also its *default* variant
(``"rrs:draft_order"``). Variants are names of the validation layer only, never registry
names (:data:`~spectr_gbv.reference.registry.STABLE_METHOD_NAMES` is a public contract);
their verifiers live in :mod:`spectr_gbv.reference.variants`, each lossless (proved by exact
enumeration in the tests). :data:`VARIANTS` lists them with one line on the convention.

A reference may also be a user's own rule, ``"module:attribute"`` whose ``module`` is not a
registered method name (:func:`~spectr_gbv.reference.user_rules.resolve_rule`: a Verifier
class or instance, or a plain generic function whose law is enumerated over its draws); it has
no variants.
"""

from __future__ import annotations

from spectr_gbv.core.methods import method_hint
from spectr_gbv.reference.base import Verifier
from spectr_gbv.reference.registry import available_methods, get_verifier
from spectr_gbv.reference.user_rules import resolve_rule
from spectr_gbv.reference.variants import VARIANT_CLASSES

#: name -> {variant: one-line convention}; the first variant is the registered verifier.
VARIANTS: dict[str, dict[str, str]] = {
    "sd": {
        "first_draft": "token-level SD on draft 0 (the registered sd)",
        "random_draft": "token-level SD on a uniformly random one of the K drafts",
    },
    "bv": {
        "first_draft": "block verification of draft 0 (the registered bv)",
        "random_draft": "block verification of a uniformly random one of the K drafts",
    },
    "spectr": {
        "draft_order": "K-SEQ tries the drafts through a node in index order (the registered spectr)",
        "random_order": "K-SEQ tries the drafts in a uniformly random order (a random permutation of the K drafts)",
    },
    "rrs": {
        "draft_order": "the children of a node are tried in draft index order (the registered rrs)",
        "random_order": (
            "SpecInfer's uniformly random child order: the average of rrs's law over the K! permutations of the drafts"
        ),
    },
    "gbv_multipath": {
        "tie_high_id": "tokens of equal ratio min(1, p/q) rank by token id, the larger wins (registered gbv_multipath)",
        "tie_low_id": "tokens of equal ratio min(1, p/q) rank by token id, the smaller wins",
    },
    "mdbv": {
        "draft_order": "the drafts are scanned in index order (the registered mdbv)",
        "random_order": "the drafts are scanned in a uniformly random order (a random permutation of the K drafts)",
    },
}


def variants(name: str) -> dict[str, str]:
    """The documented variants of a registered method, ``{variant: convention}`` (default first).

    Parameters
    ----------
    name : str
        A registered method name (no ``":VARIANT"``).

    Returns
    -------
    dict of str to str
        Empty for a method without documented variants (``ar``, the lossy references).

    Raises
    ------
    ValueError
        ``name`` is not registered (the message lists the valid names).
    """
    if _is_user(name):
        return {}
    get_verifier(name)  # raises ValueError naming the valid names
    return dict(VARIANTS.get(name, {}))


def _is_user(spec: str) -> bool:
    """True for ``"module:attribute"`` whose module part is not a registered method name."""
    return ":" in spec and spec.partition(":")[0] not in available_methods()


def _valid_text() -> str:
    names = ", ".join(available_methods())
    specs = ", ".join(f"{n}:{v}" for n, vs in VARIANTS.items() if n in available_methods() for v in vs)
    return f"valid: {names}; variants: {specs}; or 'module:attribute' naming your own rule"


def parse_reference(spec: str) -> tuple[str, str | None]:
    """Split a reference name ``"NAME"`` or ``"NAME:VARIANT"`` and check both parts.

    Parameters
    ----------
    spec : str
        ``"rrs"``, ``"rrs:random_order"``, ...

    Returns
    -------
    (name, variant)
        ``variant`` is the default variant for a bare name with documented variants
        (``("rrs", "draft_order")``), None for a method without any (``("ar", None)``).

    Raises
    ------
    ValueError
        Not a string, an unknown method, or a variant the method does not document; the
        message lists the valid names and variants. For a user's rule ``"module:attribute"``
        (returned as ``(spec, None)``): the import fails or the object is not a rule.

    Examples
    --------
    >>> parse_reference("rrs:random_order")
    ('rrs', 'random_order')
    >>> parse_reference("rrs")
    ('rrs', 'draft_order')
    """
    if not isinstance(spec, str):
        raise ValueError(f"reference: expected a method name, got {type(spec).__name__}")
    if _is_user(spec):
        try:
            resolve_rule(spec)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"reference: {exc}") from None
        return spec, None
    name, sep, variant = spec.partition(":")
    try:
        known = variants(name)
    except ValueError:
        raise ValueError(f"reference: unknown method {name!r}{method_hint(name)}; {_valid_text()}") from None
    if not sep:
        return name, next(iter(known), None)
    if variant not in known:
        have = f"its variants: {', '.join(f'{name}:{v}' for v in known)}" if known else f"{name!r} has no variants"
        raise ValueError(f"reference: unknown variant {variant!r} of {name!r} ({have}); {_valid_text()}")
    return name, variant


def reference_verifier(spec: str) -> Verifier:
    """A fresh verifier (with an exact ``outcome_law``) for ``"NAME"`` or ``"NAME:VARIANT"``.

    Raises
    ------
    ValueError
        As :func:`parse_reference`.
    """
    name, variant = parse_reference(spec)
    if _is_user(spec):
        verifier = resolve_rule(spec)[1]
        assert verifier is not None  # a user's rule always resolves to a verifier
        return verifier
    if variant is None or variant == next(iter(VARIANTS[name])):
        return get_verifier(name)
    return VARIANT_CLASSES[f"{name}:{variant}"]()


def describe(spec: str) -> str:
    """One line: the reference and, for a variant, its convention (e.g. for report details)."""
    name, variant = parse_reference(spec)
    if _is_user(spec):
        return resolve_rule(spec)[0].describe()
    return f"{spec} ({VARIANTS[name][variant]})" if variant is not None else spec


__all__ = ["VARIANTS", "describe", "parse_reference", "reference_verifier", "variants"]
