"""Every registered verifier that calls itself lossless has validity defect exactly 0 on 300
seeded random exact instances (dense and sparse, n in 2..3, L in 1..2, K in 1..3).

The lossless flag is the verifier's own class attribute, so a newly registered method joins
this battery automatically; a method found lossy must say ``lossless = False`` (and is then
checked to be lossy somewhere on the same battery, so the flag cannot be set falsely either way).
"""

from __future__ import annotations

import pytest

from spectr_gbv.core.instance import random_instance
from spectr_gbv.reference.registry import available_methods, get_verifier
from spectr_gbv.simulate.exact import simulate_exact

#: (n, L, seed, zero_prob, K): 300 cases.
BATTERY = [
    (2 + seed % 2, 1 + (seed // 2) % 2, seed, 0.3 if seed % 3 == 0 else 0.0, 1 + (seed // 4) % 3) for seed in range(300)
]
LOSSLESS = [m for m in available_methods() if get_verifier(m).lossless]
LOSSY = [m for m in available_methods() if not get_verifier(m).lossless]


@pytest.mark.parametrize("method", LOSSLESS)
def test_lossless_methods_have_zero_defect_on_300_instances(method):
    for n, L, seed, zp, k in BATTERY:
        inst = random_instance(n, L, seed, zero_prob=zp)
        r = simulate_exact(inst, method, k)
        assert r.validity_defect == 0, f"{method}: defect {r.validity_defect} on --random {n},{L},{seed},{zp} K={k}"


@pytest.mark.parametrize("method", LOSSY)
def test_lossy_methods_are_lossy_on_the_battery(method):
    for n, L, seed, zp, k in BATTERY:
        inst = random_instance(n, L, seed, zero_prob=zp)
        if simulate_exact(inst, method, k).validity_defect != 0:
            return
    pytest.fail(f"{method} says lossless = False but has defect 0 on all {len(BATTERY)} battery instances")
