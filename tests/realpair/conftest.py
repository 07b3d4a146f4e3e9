"""Torch tests run single-threaded, as in ``tests/gpu``: the tiny matrix products of these tests are
slower with several threads on a small shared machine."""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("torch") is not None:
    import torch

    torch.set_num_threads(1)
