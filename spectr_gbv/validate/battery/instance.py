"""A battery instance: an instance of the law, with its number of drafts K.

:class:`BatteryInstance` (the kind, the :class:`~spectr_gbv.core.instance.Instance` and K,
with its JSON spec for the report) and :func:`instance_from_spec`, which rebuilds the instance
of a printed spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spectr_gbv.core.instance import Instance, parse_instance


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


__all__ = ["BatteryInstance", "instance_from_spec"]
