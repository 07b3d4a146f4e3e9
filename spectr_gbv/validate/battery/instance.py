"""A battery instance: an instance of the law, with its number of drafts K.

:class:`BatteryInstance` (the kind, the :class:`~spectr_gbv.core.instance.Instance` and K,
optionally seen through a wide vocabulary, with its JSON spec for the report),
:func:`instance_from_spec`, which rebuilds the instance of a printed spec, and
:func:`battery_instance_from_spec`, which also rebuilds its vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spectr_gbv.core.instance import Instance, parse_instance
from spectr_gbv.validate.battery.wide import VocabEmbedding


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
    vocab : VocabEmbedding or None
        When set, the verifier sees token ``i`` of ``instance`` as id ``vocab.ids[i]`` of a
        vocabulary of ``vocab.size`` tokens (:mod:`~spectr_gbv.validate.battery.wide`); the
        laws are tested on ``instance``.
    """

    kind: str
    instance: Instance
    K: int
    vocab: VocabEmbedding | None = None
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

    @property
    def V(self) -> int:
        """Vocabulary size the verifier sees (``vocab.size``, else the instance's n)."""
        return self.vocab.size if self.vocab is not None else self.instance.n

    def spec(self, **extra: Any) -> dict[str, Any]:
        """JSON spec that rebuilds the instance (:func:`battery_instance_from_spec`), plus ``extra`` keys.

        Returns
        -------
        dict
            ``{"kind", "name", "n", "L", "K", "instance": <instance JSON>}`` and ``extra``
            (e.g. ``drafts``, in the ids the verifier saw); ``n`` is the vocabulary the verifier
            sees, and a wide instance adds ``vocab_ids`` and ``vocab_size``.
        """
        inst = self.instance
        out: dict[str, Any] = {"kind": self.kind, "name": inst.name, "n": self.V, "L": inst.L, "K": self.K}
        if self.vocab is not None:
            out["vocab_ids"] = list(self.vocab.ids)
            out["vocab_size"] = self.vocab.size
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
    if "vocab_ids" in spec:
        raise ValueError(
            f"spec: the instance {spec.get('kind')!r} is seen through a vocabulary of {spec.get('vocab_size')} ids "
            "(vocab_ids); an (instance, K) pair would drop it: rebuild it with "
            "spectr_gbv.validate.battery.battery_instance_from_spec(spec) and pass that to validate(instances=...)"
        )
    return parse_instance(spec["instance"]), int(spec["K"])


def battery_instance_from_spec(spec: dict[str, Any]) -> BatteryInstance:
    """Rebuild the :class:`BatteryInstance` of a check's ``instance`` spec, its wide vocabulary included.

    Parameters
    ----------
    spec : dict
        A check's ``instance`` (``{"kind", "K", "instance", ...}``, plus ``vocab_ids`` and
        ``vocab_size`` for an instance seen through a wide vocabulary).

    Returns
    -------
    BatteryInstance
        What :func:`~spectr_gbv.validate.validate` takes in ``instances=`` to rerun the check.

    Raises
    ------
    ValueError
        As :func:`instance_from_spec`, or bad ``vocab_ids`` / ``vocab_size``.
    """
    if isinstance(spec, dict) and "vocab_ids" in spec:
        base = {k: v for k, v in spec.items() if k not in ("vocab_ids", "vocab_size")}
        inst, K = instance_from_spec(base)
        try:
            vocab = VocabEmbedding(tuple(int(i) for i in spec["vocab_ids"]), int(spec["vocab_size"]))
        except (KeyError, TypeError) as exc:
            raise ValueError("spec: 'vocab_ids' needs a list of ids and 'vocab_size' an int") from exc
        if len(vocab.ids) != inst.n:
            raise ValueError(f"spec: {len(vocab.ids)} vocab_ids for an instance of {inst.n} tokens")
        return BatteryInstance(str(spec.get("kind", "user")), inst, K, vocab)
    inst, K = instance_from_spec(spec)
    return BatteryInstance(str(spec.get("kind", "user")), inst, K)


__all__ = ["BatteryInstance", "battery_instance_from_spec", "instance_from_spec"]
