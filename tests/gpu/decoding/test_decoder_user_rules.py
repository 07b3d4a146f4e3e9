"""A user's rule in the decoder and in ``verify``: torch rules, reference rules, claims, refusals, ``ar``'s L = 0.

Rules live in tests/gpu/own_kernels.py. ``copy_sd`` is ``verify_sd`` behind a user's name, so
with one seed the decoder must emit token for token what ``method="sd"`` emits.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.gpu import SpeculativeDecoder  # noqa: E402
from spectr_gbv.gpu.kernels import KernelRule, UnverifiedRuleWarning, resolve_kernel_rule, verify  # noqa: E402
from spectr_gbv.gpu.kernels.rules import LAW_TEST  # noqa: E402
from spectr_gbv.reference import registry  # noqa: E402
from tests.gpu import own_kernels  # noqa: E402
from tests.gpu.tiny_models import perturbed_copy, tiny_llama  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::spectr_gbv.gpu.kernels.rules.UnverifiedRuleWarning")

V = 8
MOD = "tests.gpu.own_kernels"
PROMPTS = [[1, 2, 3], [4, 0, 2]]


@pytest.fixture(scope="module")
def pair():
    target = tiny_llama(V, 0)
    return target, perturbed_copy(target, 1, 0.3)


def decode(pair, method, *, K=1, L=3, seed=11, n=12, prompts=PROMPTS, **kw):
    dec = SpeculativeDecoder(*pair, method=method, num_drafts=K, draft_length=L, seed=seed, device="cpu", **kw)
    return dec.generate(prompts, n)


def unverified(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, UnverifiedRuleWarning)]


@pytest.mark.parametrize("method", [f"{MOD}:copy_sd", own_kernels.copy_sd])
def test_a_copy_of_verify_sd_emits_what_sd_emits(pair, method):
    want, want_stats = decode(pair, "sd")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got, stats = decode(pair, method)
    assert torch.equal(got, want)
    assert stats.accepted_hist == want_stats.accepted_hist and stats.iterations == want_stats.iterations
    assert stats.method == f"{MOD}:copy_sd"
    (note,) = unverified(record)  # one warning, naming the law test
    assert note.startswith(f"method '{MOD}:copy_sd': the rule's losslessness is unverified") and LAW_TEST in note


def test_a_rule_claiming_lossless_runs_without_a_warning(pair):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got, _ = decode(pair, f"{MOD}:claimed_sd")
        wide, _ = decode(pair, f"{MOD}:claimed_sd", K=3)  # a user's rule is not held to K = 1
    assert unverified(record) == []
    assert torch.equal(got, decode(pair, "sd")[0]) and wide.shape == (2, 3 + 12)


@pytest.mark.parametrize("method", [f"{MOD}:OwnSD", own_kernels.OwnSD(), f"{MOD}:sd_fn"])
def test_reference_rules_run_row_by_row_and_are_reproducible(pair, method):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        a, stats = decode(pair, method, K=2, L=2, n=8)
    b, _ = decode(pair, method, K=2, L=2, n=8)
    assert torch.equal(a, b) and a.shape == (2, 3 + 8)
    assert bool(((a >= 0) & (a < V)).all()) and stats.tokens_generated == 16
    assert len(unverified(record)) == (1 if method == f"{MOD}:sd_fn" else 0)  # the Verifier claims lossless


def test_a_name_added_with_register_runs_in_the_decoder(pair, monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "METHODS", registry.METHODS)
    registry.register(own_kernels.OwnSD)
    rule = resolve_kernel_rule("own_sd")
    assert (rule.name, rule.origin, rule.lossless_claimed) == ("own_sd", "reference", True)
    out, stats = decode(pair, "own_sd", n=5)
    assert out.shape == (2, 8) and stats.method == "own_sd"


def test_a_rule_declared_lossy_needs_allow_lossy(pair):
    with pytest.raises(ValueError) as err:
        decode(pair, f"{MOD}:lossy_rule")
    assert str(err.value) == (
        f"method '{MOD}:lossy_rule' is lossy (its output does not follow the target law; it declares "
        "lossless = False); pass allow_lossy=True to run it anyway"
    )
    assert torch.equal(decode(pair, f"{MOD}:lossy_rule", allow_lossy=True)[0], decode(pair, "sd")[0])


@pytest.mark.parametrize(
    "method, message",
    [
        (f"{MOD}:three_args", f"method '{MOD}:three_args': a rule takes (inputs, uniforms) -> VerifyOutput"),
        (lambda inputs: None, "a rule takes (inputs, uniforms) -> VerifyOutput (a torch rule) or (drafts, "),
        (f"{MOD}:NotARule", f"method '{MOD}:NotARule': rule NotARule: a class that is not a Verifier subclass"),
        (f"{MOD}:NOT_CALLABLE", f"method '{MOD}:NOT_CALLABLE': expected a torch rule, a Verifier or a function"),
        (f"{MOD}:missing", f"method '{MOD}:missing': module '{MOD}' has no attribute 'missing'"),
        ("no_such_module_xyz:rule", "method 'no_such_module_xyz:rule': cannot import module 'no_such_module_xyz'"),
        ("khisti_is", "unknown method 'khisti_is' (registered without a torch kernel); valid: ar, sd,"),
        ("nope", "unknown method 'nope'; valid: ar, sd, bv"),
        (3, "method must be a str naming one kernel method, got int 3"),
    ],
)
def test_bad_rules_are_one_clear_line_naming_method(pair, method, message):
    with pytest.raises(ValueError) as err:
        decode(pair, method)
    text = str(err.value)
    assert message in text and "\n" not in text


def test_a_rules_output_is_checked_not_emitted(pair):
    with pytest.raises(RuntimeError, match=rf"verify\('{MOD}:wrong_output'\) emitted a token id outside 0..{V - 1}"):
        decode(pair, f"{MOD}:wrong_output", allow_lossy=False)


def test_ar_takes_draft_length_0_and_only_ar(pair):
    target = pair[0]
    zero, stats = SpeculativeDecoder(target, None, method="ar", draft_length=0, seed=3, device="cpu").generate(
        PROMPTS, 6
    )
    three, _ = SpeculativeDecoder(target, None, method="ar", draft_length=3, seed=3, device="cpu").generate(PROMPTS, 6)
    assert torch.equal(zero, three) and stats.draft_length == 0 and stats.row_iterations == 12
    for method in ("mdbv", f"{MOD}:copy_sd"):
        with pytest.raises(ValueError, match=r"^draft_length must be an int >= 1, got 0$"):
            SpeculativeDecoder(*pair, method=method, num_drafts=1, draft_length=0)
    with pytest.raises(ValueError, match=r"^draft_length must be an int >= 0, got -1$"):
        SpeculativeDecoder(target, None, method="ar", draft_length=-1)
    with pytest.raises(ValueError, match=r"^method 'sd' verifies a single draft; use num_drafts=1 \(got 2\)$"):
        SpeculativeDecoder(*pair, method="sd", num_drafts=2)


def _batch(seed=0, B=64, K=2, L=3):
    g = torch.Generator().manual_seed(seed)
    q = torch.softmax(2 * torch.randn(B, K, L, V, generator=g, dtype=torch.float64), -1)
    p = torch.softmax(2 * torch.randn(B, K, L + 1, V, generator=g, dtype=torch.float64), -1)
    p[:, 1:] = p[:, :1]  # every draft is draft 0 (below): their rows agree
    q[:, 1:] = q[:, :1]
    drafts = torch.multinomial(q[:, 0].reshape(-1, V), 1, generator=g).reshape(B, 1, L).expand(B, K, L).clone()
    return drafts, q, p


def test_verify_accepts_a_torch_rule_and_refuses_a_lossy_one():
    d, q, p = _batch()
    want = verify("sd", d, q, p, generator=torch.Generator().manual_seed(4))
    for rule in (own_kernels.copy_sd, f"{MOD}:copy_sd", resolve_kernel_rule(own_kernels.copy_sd)):
        got = verify(rule, d, q, p, generator=torch.Generator().manual_seed(4))
        assert torch.equal(got.tokens, want.tokens) and torch.equal(got.num_accepted, want.num_accepted)
    with pytest.raises(ValueError, match="is lossy"):
        verify(own_kernels.lossy_rule, d, q, p)
    with pytest.raises(ValueError, match="unknown kernel method 'greedy_bv'"):
        verify("greedy_bv", d, q, p)


def test_a_reference_rule_through_verify_is_the_reference_sampler():
    """The reference SD rule through verify: with identical drafts, the mean tau equals the kernel's closely."""
    d, q, p = _batch(1, B=400, K=1)
    rule = resolve_kernel_rule(own_kernels.OwnSD)
    assert isinstance(rule, KernelRule) and rule.describe() == (
        "tests.gpu.own_kernels:OwnSD: reference rule (CPU loop per batch row: slow), claims lossless"
    )
    ref = verify(rule, d, q, p, generator=torch.Generator().manual_seed(0))
    again = verify(rule, d, q, p, generator=torch.Generator().manual_seed(0))
    assert torch.equal(ref.tokens, again.tokens)
    from spectr_gbv.gpu.kernels.expected import expected_accepted

    exact = float(expected_accepted("sd", d, q, p).mean())
    assert abs(float(ref.num_accepted.double().mean()) - exact) < 4 * 1.5 / 400**0.5  # 4 s.e. (tau <= 3)
    prefix_ok = all(
        ref.tokens[b, : int(ref.num_accepted[b])].tolist() == d[b, 0, : int(ref.num_accepted[b])].tolist()
        for b in range(400)
    )
    assert prefix_ok and bool((ref.draft_index == 0).all())
