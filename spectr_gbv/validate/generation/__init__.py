"""The referee for whole speculative generation loops: drafting, verification, residuals and caches.

:func:`validate_generation` runs a system's own generation loop (``generate(target, draft,
prompt_ids, max_new_tokens, *, temperature, top_k, top_p, seed)``) on reference models whose
law is known exactly, and tests the first m generated tokens of many seeded calls against the
target's exact sequence law after temperature, top-k and top-p: the joint law, each
position's conditional law, draft invariance, batch invariance (batched interface) and
determinism (advisory). The report is a :class:`~spectr_gbv.validate.ValidationReport`, as
``spectr-gbv validate`` prints it.

* :mod:`~spectr_gbv.validate.generation.interface` - the signature and output contract;
* :mod:`~spectr_gbv.validate.generation.plan` - scenarios, exact laws, sample sizes;
* :mod:`~spectr_gbv.validate.generation.runner` - seeded, isolated, timed calls;
* :mod:`~spectr_gbv.validate.generation.checks` - the law checks;
* :mod:`~spectr_gbv.validate.generation.driver` - :func:`validate_generation`;
* :mod:`~spectr_gbv.validate.generation.self_drafting` - the ``self_drafting`` kernel interface (a
  verification kernel that draws its own drafts, as serving engines do), run as a generation loop;
* :mod:`~spectr_gbv.validate.generation.kernel_driver` - :func:`validate_self_drafting`.

Nothing here imports torch at import time; the reference models do, when a run builds them.
"""

from spectr_gbv.validate.generation.driver import validate_generation
from spectr_gbv.validate.generation.interface import GENERATION_INTERFACES
from spectr_gbv.validate.generation.kernel_driver import validate_self_drafting

__all__ = ["GENERATION_INTERFACES", "validate_generation", "validate_self_drafting"]
