"""Root pytest configuration: skip doctest collection of the torch layer when torch is absent.

The test command installs the ``gpu`` extra (CPU torch), so CI collects everything; a user who
installed only ``.[test]`` still gets a clean run of the exact layers.
"""

from __future__ import annotations

import importlib.util

collect_ignore_glob: list[str] = []
if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    collect_ignore_glob.append("spectr_gbv/gpu/*")
    collect_ignore_glob.append("spectr_gbv/cli/fetch_models.py")
