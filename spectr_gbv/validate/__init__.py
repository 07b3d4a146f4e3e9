"""validate layer: a conformance harness for third-party speculative-decoding verifiers.

:func:`validate` runs a verifier given in one of :data:`INTERFACES` (``generic``: the
package's multi-draft interface; ``chain``: the single-draft batched layout of serving
systems; ``hf``: Hugging Face transformers' ``_speculative_sampling``) through structural
probes, an exact or statistical law check on an instance battery, an optional comparison
with a named reference algorithm, and an adversarial search, and returns a
:class:`ValidationReport` of :class:`CheckResult` items (text or JSON); its options can be
given as keywords or as one :class:`ValidateOptions`.
:func:`validate_generation` referees a whole generation loop (drafting, verification, caches)
against the target's exact sequence law, with the same report; :func:`validate_self_drafting` does the same
for a verification kernel that draws its own drafts (interface ``self_drafting``). The torch and
transformers imports happen only for torch verifiers and the hf interface.

Examples
--------
>>> from spectr_gbv.reference import get_verifier
>>> report = validate(get_verifier("mdbv").sample, level="exact", budget="quick")
>>> report.passed, report.level_used
(True, 'exact')
"""

from spectr_gbv.validate.generation import validate_generation, validate_self_drafting
from spectr_gbv.validate.harness.driver import validate
from spectr_gbv.validate.harness.options import ValidateOptions
from spectr_gbv.validate.interfaces.loading import load_verifier
from spectr_gbv.validate.interfaces.names import INTERFACES
from spectr_gbv.validate.report.results import CheckResult
from spectr_gbv.validate.report.validation_report import ValidationReport

__all__ = [
    "INTERFACES",
    "CheckResult",
    "ValidateOptions",
    "ValidationReport",
    "load_verifier",
    "validate",
    "validate_generation",
    "validate_self_drafting",
]
