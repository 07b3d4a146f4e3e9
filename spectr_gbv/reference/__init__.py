"""reference layer: every verifier as an exact kernel (outcome law) and a sampler.

Each verifier (:class:`Verifier`) takes one iteration's ``drafts`` [K, L], ``draft_probs``
[K, L, n] and ``target_probs`` [K, L+1, n] (Fractions or float64) and gives its exact output
law (:meth:`Verifier.outcome_law`) or one sample (:meth:`Verifier.sample`); both run the same
chooser-driven code. Look verifiers up by stable name with :func:`get_verifier`.
"""

from spectr_gbv.reference import registry
from spectr_gbv.reference.ar import AutoregressiveVerifier
from spectr_gbv.reference.base import Verifier, VerifyInput, iteration_inputs, validate_inputs
from spectr_gbv.reference.bv import BlockVerifier
from spectr_gbv.reference.choosers import (
    Chooser,
    Diagnostics,
    Emission,
    SamplingChooser,
    enumerate_law,
)
from spectr_gbv.reference.gbv_multipath import MultiPathGreedyVerifier
from spectr_gbv.reference.hsd import (
    HierarchicalVerifier,
    MultiDraftHierarchicalVerifier,
    ReleasedHierarchicalVerifier,
)
from spectr_gbv.reference.independent_bv import IndependentBlockVerifier
from spectr_gbv.reference.khisti_is import ImportanceSamplingVerifier
from spectr_gbv.reference.mdbv import MultiDraftBlockVerifier
from spectr_gbv.reference.near_opt_bv import NearOptBlockVerifier
from spectr_gbv.reference.optimal_multidraft import OptimalMultiDraftVerifier
from spectr_gbv.reference.registry import (
    STABLE_METHOD_NAMES,
    available_methods,
    get_verifier,
    register,
)
from spectr_gbv.reference.rrs import RecursiveRejectionVerifier
from spectr_gbv.reference.rrs_random import RandomOrderRecursiveRejectionVerifier
from spectr_gbv.reference.sd import SpeculativeDecodingVerifier
from spectr_gbv.reference.spectr import SpecTrVerifier
from spectr_gbv.reference.spectr_gbv_released import ReleasedSpecTrGBVVerifier
from spectr_gbv.reference.traversal import TraversalVerifier


def __getattr__(name: str) -> tuple[str, ...]:
    """``METHODS``: the registered method names, live (reflects later :func:`register` calls)."""
    if name == "METHODS":
        return registry.METHODS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "METHODS",
    "STABLE_METHOD_NAMES",
    "AutoregressiveVerifier",
    "BlockVerifier",
    "Chooser",
    "Diagnostics",
    "Emission",
    "HierarchicalVerifier",
    "ImportanceSamplingVerifier",
    "IndependentBlockVerifier",
    "MultiDraftBlockVerifier",
    "MultiDraftHierarchicalVerifier",
    "MultiPathGreedyVerifier",
    "NearOptBlockVerifier",
    "OptimalMultiDraftVerifier",
    "RandomOrderRecursiveRejectionVerifier",
    "RecursiveRejectionVerifier",
    "ReleasedHierarchicalVerifier",
    "ReleasedSpecTrGBVVerifier",
    "SamplingChooser",
    "SpecTrVerifier",
    "SpeculativeDecodingVerifier",
    "TraversalVerifier",
    "Verifier",
    "VerifyInput",
    "available_methods",
    "enumerate_law",
    "get_verifier",
    "iteration_inputs",
    "register",
    "validate_inputs",
]
