"""Bad input at the torch entry points (``spectr_gbv.gpu.kernels.verify``, ``SpeculativeDecoder``), on CPU.

The case machinery and the classes of bad input are in ``tests/bad_input_helpers.py``; the
catalogue of classes is docs/bad_input.md. Cases that need torch (or transformers) are skipped
without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.bad_input_helpers import DP, DQ, INF, NAN, Case, D, check_prefix_of, err, ok, params, run_case


def _torch_inputs(**change: Any) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    base = {
        "drafts": torch.tensor(D[None]),
        "draft_probs": torch.tensor(DQ[None]),
        "target_probs": torch.tensor(DP[None]),
    }
    for key, fn in change.items():
        base[key] = fn(base[key])
    return base


def _kverify(method: str = "mdbv", **change: Any) -> Any:
    import torch

    from spectr_gbv.gpu.kernels import verify

    return verify(method, **_torch_inputs(**change), generator=torch.Generator().manual_seed(0))


def _t(values: list[float]) -> Any:
    import torch

    return torch.tensor(values, dtype=torch.float64)


def _cat_zero_column(t: Any) -> Any:
    import torch

    return torch.cat([t, t[..., :1] * 0], dim=-1)


def _tset(idx: tuple[int, ...], value: Any) -> Callable[[Any], Any]:
    def f(t: Any) -> Any:
        t = t.clone()
        t[idx] = value
        return t

    return f


GPU: list[Case] = [
    Case(
        "gpu.kernels.verify",
        "nan",
        "NaN target entry",
        lambda: _kverify(target_probs=_tset((0, 0, 1, 0), NAN)),
        err("target_probs"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "inf",
        "inf draft entry",
        lambda: _kverify(draft_probs=_tset((0, 1, 0, 1), INF)),
        err("draft_probs"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "negative",
        "negative draft entry",
        lambda: _kverify(draft_probs=_tset((0, 0, 0), _t([-0.5, 1.5]))),
        err("draft_probs"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "unnormalised",
        "target row summing to 1.5",
        lambda: _kverify(target_probs=_tset((0, 0, 0), _t([1.0, 0.5]))),
        err("target_probs"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "wrong_shape",
        "drafts without the batch axis",
        lambda: _kverify(drafts=lambda t: t[0]),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "vocab_mismatch",
        "target over 3 tokens",
        lambda: _kverify(target_probs=lambda t: _cat_zero_column(t)),
        err(("target_probs", "draft_probs"), "shape"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "K_zero",
        "K = 0",
        lambda: _kverify(drafts=lambda t: t[:, :0], draft_probs=lambda t: t[:, :0], target_probs=lambda t: t[:, :0]),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "L_zero",
        "L = 0 for mdbv",
        lambda: _kverify(
            drafts=lambda t: t[:, :, :0], draft_probs=lambda t: t[:, :, :0], target_probs=lambda t: t[:, :, :1]
        ),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "id_out_of_range",
        "draft id 2 with V = 2",
        lambda: _kverify(drafts=_tset((0, 1, 0), 2)),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "id_out_of_range",
        "placeholder -1",
        lambda: _kverify(drafts=_tset((0, 0, 1), -1)),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "fp16",
        "float16 probabilities",
        lambda: _kverify(draft_probs=lambda t: t.half(), target_probs=lambda t: t.half()),
        err("draft_probs"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "wrong_type",
        "numpy drafts",
        lambda: _kverify(drafts=lambda t: t.numpy()),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "K_huge",
        "K = 2000 identical drafts (correct result)",
        lambda: _kverify(
            drafts=lambda t: t[:, :1].repeat(1, 2000, 1),
            draft_probs=lambda t: t[:, :1].repeat(1, 2000, 1, 1),
            target_probs=lambda t: t[:, :1].repeat(1, 2000, 1, 1),
        ),
        ok(lambda out: check_prefix_of(tuple(int(v) for v in out.tokens[0] if v >= 0), (0, 1))),
        needs="torch",
    ),
]


def _tiny_lm(vocab: int, seed: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval()


def _decoder(**kw: Any) -> Any:
    from spectr_gbv.gpu import SpeculativeDecoder

    args = {"method": "mdbv", "num_drafts": 2, "draft_length": 2, "seed": 0, "device": "cpu"}
    args.update(kw)
    draft = args.pop("draft", None) or _tiny_lm(8, 1)
    return SpeculativeDecoder(_tiny_lm(8, 0), draft, **args)


GPU += [
    Case(
        "SpeculativeDecoder",
        "K_zero",
        "num_drafts 0",
        lambda: _decoder(num_drafts=0),
        err("num_drafts"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder",
        "L_zero",
        "draft_length 0",
        lambda: _decoder(draft_length=0),
        err("draft_length"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder",
        "vocab_mismatch",
        "draft with 6 logits, target 8",
        lambda: _decoder(draft=_tiny_lm(6, 1)),
        err("vocabulary mismatch"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder",
        "nan",
        "temperature nan",
        lambda: _decoder(temperature=NAN),
        err("temperature"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder",
        "negative",
        "temperature -1",
        lambda: _decoder(temperature=-1.0),
        err("temperature"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder.generate",
        "id_out_of_range",
        "prompt id 8 with V = 8",
        lambda: _decoder().generate([1, 8], 4),
        err("prompt_ids"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder.generate",
        "negative",
        "max_new_tokens -1",
        lambda: _decoder().generate([1, 2], -1),
        err("max_new_tokens"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder.generate",
        "wrong_shape",
        "prompt of shape [1, 1, 2]",
        lambda: _decoder().generate([[[1, 2]]], 2),
        err("prompt_ids"),
        needs="transformers",
    ),
]



CASES = GPU


@pytest.mark.parametrize("case", params(CASES))
def test_bad_input(case: Case) -> None:
    """One entry point, one bad input: the documented error naming the argument, or the correct result."""
    run_case(case)
