"""Tiny generate loops for the referee's own tests: a correct one, wrong ones and failing ones.

Plain ancestral sampling from the target is a correct "loop" (its law is the target's by
definition); the others plant one defect each.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

from spectr_gbv.gpu.models.sequence_law import SamplingSettings, conditional_law


def ancestral(
    target: Any,
    draft: Any,
    prompt_ids: list[int],
    max_new_tokens: int,
    *,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int,
) -> list[int]:
    """Correct: token by token from the target's processed law, all randomness from ``seed``."""
    rng = np.random.default_rng(seed)
    settings = SamplingSettings(temperature, top_k, top_p)
    ctx, out = list(prompt_ids), []
    for _ in range(max_new_tokens):
        p = conditional_law(target, ctx, settings)
        tok = int(rng.choice(len(p), p=p))
        ctx.append(tok)
        out.append(tok)
    return out


def ancestral_batched(target: Any, draft: Any, prompt_ids: list[list[int]], max_new_tokens: int, **kw: Any) -> list:
    """Correct batched form: each row on its own, seeds derived from the call's seed."""
    seed = kw.pop("seed")
    return [ancestral(target, draft, p, max_new_tokens, **kw, seed=seed * 1000 + b) for b, p in enumerate(prompt_ids)]


def leaky_batched(target: Any, draft: Any, prompt_ids: list[list[int]], max_new_tokens: int, **kw: Any) -> list:
    """Wrong: row 0 reads the last token of row 1's prompt as if it were its own context (a leaking row)."""
    seed = kw.pop("seed")
    rows = []
    for b, p in enumerate(prompt_ids):
        ctx = [*p, prompt_ids[1][-1]] if b == 0 and len(prompt_ids) > 1 else p
        rows.append(ancestral(target, draft, ctx, max_new_tokens, **kw, seed=seed * 1000 + b))
    return rows


def wrong_temperature(target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, **kw: Any) -> list[int]:
    """Wrong: samples at temperature 1 and no top-k whatever is asked."""
    kw.update(temperature=1.0, top_k=0)
    return ancestral(target, draft, prompt_ids, max_new_tokens, **kw)


def draft_only(target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, **kw: Any) -> list[int]:
    """Wrong: samples the draft's law (the output depends on which draft it is given)."""
    return ancestral(draft, draft, prompt_ids, max_new_tokens, **kw)


def unseeded(target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, **kw: Any) -> list[int]:
    """Correct law, but ignores ``seed`` (not reproducible): determinism is an advisory note."""
    kw["seed"] = int.from_bytes(os.urandom(4), "little")
    return ancestral(target, draft, prompt_ids, max_new_tokens, **kw)


def raises(target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, **kw: Any) -> list[int]:
    """Fails: raises on every call."""
    raise RuntimeError("cache exploded")


def hangs(target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, **kw: Any) -> list[int]:
    """Fails: never returns."""
    while True:
        time.sleep(0.05)


def exits(target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, **kw: Any) -> list[int]:
    """Fails: calls sys.exit."""
    sys.exit(3)


def hard_exits(target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, **kw: Any) -> list[int]:
    """Fails: calls os._exit."""
    os._exit(4)


def too_long(target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, **kw: Any) -> list[int]:
    """Bad output: returns the prompt and the new tokens."""
    return [*prompt_ids, *ancestral(target, draft, prompt_ids, max_new_tokens, **kw)]


def out_of_vocab(target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, **kw: Any) -> list[int]:
    """Bad output: the last id is V (one past the vocabulary)."""
    out = ancestral(target, draft, prompt_ids, max_new_tokens, **kw)
    return [*out[:-1], int(target.config.vocab_size)]


def float_ids(target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, **kw: Any) -> Any:
    """Bad output: probabilities instead of ids."""
    return np.full(max_new_tokens, 0.5)


def no_seed(
    target: Any, draft: Any, prompt_ids: list[int], max_new_tokens: int, *, temperature: float, top_k: int, top_p: float
) -> list[int]:
    """Wrong signature: no ``seed`` keyword."""
    return []


def custom_pair() -> Any:
    """A user's own pair: the close pair's models under another name (its exact law is known)."""
    import dataclasses  # noqa: PLC0415

    from spectr_gbv.gpu.models.reference_pairs import reference_pair  # noqa: PLC0415

    return dataclasses.replace(reference_pair("close"), name="mine")


def mismatched_pair() -> Any:
    """A user's pair whose draft has another vocabulary than its target (bad input)."""
    import dataclasses  # noqa: PLC0415

    from spectr_gbv.gpu.models.reference_pairs import reference_pair  # noqa: PLC0415

    return dataclasses.replace(reference_pair("close"), name="bad", draft=reference_pair("wide").draft)
