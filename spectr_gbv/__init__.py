"""spectr_gbv: reference implementation and referee for multi-draft block verification.

Layers (imports go one way): core -> theory -> reference -> simulate -> gpu -> validate -> cli.
"""

from spectr_gbv.core import Instance, TabularAR, default_instance, load_instance, random_instance

__version__ = "0.1.0"

__all__ = ["Instance", "TabularAR", "__version__", "default_instance", "load_instance", "random_instance"]
