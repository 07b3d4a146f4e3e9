"""Synthetic pairs of real models' shapes (:mod:`spectr_gbv.gpu.models.synthetic`) at tiny shapes."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.gpu.models.synthetic import SHAPES, llama_config, synthetic_pair  # noqa: E402


def alpha(target, draft, T=0.7):
    x = torch.randint(0, 512, (1, 48), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        p = torch.softmax(target(input_ids=x).logits[0] / T, -1)
        q = torch.softmax(draft(input_ids=x).logits[0] / T, -1)
    return float(torch.minimum(p, q).sum(-1).mean())


def test_closeness_zero_gives_one_bigram_model_and_acceptance_falls_with_closeness():
    t, d = synthetic_pair("tiny-target", "tiny-draft", closeness=0.0)
    assert t.config.hidden_size == 64 and d.config.hidden_size == 32 and t.config.num_hidden_layers == 4
    x = torch.tensor([[5, 17, 3, 400]])
    with torch.no_grad():
        torch.testing.assert_close(t(input_ids=x).logits, d(input_ids=x).logits, atol=1e-4, rtol=0)
    values = [alpha(*synthetic_pair("tiny-target", "tiny-draft", closeness=c, head_std=1.0)) for c in (0.0, 0.3, 1.0)]
    assert values[0] > 0.999 and values[0] > values[1] > values[2]


def test_weights_are_a_function_of_the_seed_and_dtype_is_applied():
    a, _ = synthetic_pair("tiny-target", "tiny-draft", seed=3)
    b, _ = synthetic_pair("tiny-target", "tiny-draft", seed=3)
    c, d = synthetic_pair("tiny-target", "tiny-draft", seed=4, dtype=torch.bfloat16)
    assert torch.equal(a.lm_head.weight, b.lm_head.weight) and not torch.equal(
        a.lm_head.weight, c.lm_head.weight.float()
    )
    assert c.dtype == d.dtype == torch.bfloat16


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(target_shape="tiny-draft", draft_shape="tiny-target"), "at least as wide"),
        (dict(target_shape="smollm2-135m", draft_shape="tiny-draft"), "one vocabulary"),
        (dict(target_shape="nope"), "shape must be one of"),
        (dict(closeness=1.5), "closeness"),
        (dict(head_std=0.0), "head_std"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    args = dict(target_shape="tiny-target", draft_shape="tiny-draft") | kwargs
    with pytest.raises(ValueError, match=match):
        synthetic_pair(**args)


def test_real_shapes_are_smollm2s():
    cfg = llama_config("smollm2-135m")
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.vocab_size) == (576, 30, 3, 49152)
    assert SHAPES["smollm2-1.7b"]["hidden_size"] == 2048 and SHAPES["smollm2-1.7b"]["num_hidden_layers"] == 24
