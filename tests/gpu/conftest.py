"""Torch tests run single-threaded: on small shared CI machines two threads make the tiny
matrix products of these tests several times slower (measured 112 s vs 27 s)."""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("torch") is not None:
    import torch

    torch.set_num_threads(1)
