"""Deprecated import path ``spectr_gbv.gpu.bench_extras`` (issue 15), kept for one release.

Moved to :mod:`spectr_gbv.gpu.bench.extras`. This module re-exports the public names of its new home
and warns on import; it is removed in the next release. Import from the new module instead.
"""

import warnings

from spectr_gbv.gpu._deprecated import reexport

warnings.warn(
    "spectr_gbv.gpu.bench_extras is deprecated (moved in issue 15, removed in the next release);"
    " import spectr_gbv.gpu.bench.extras instead",
    DeprecationWarning,
    stacklevel=2,
)
__all__ = reexport(globals(), ["spectr_gbv.gpu.bench.extras"])
