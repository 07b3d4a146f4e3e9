"""A user's own rule: the method table, plain functions enumerated over their draws, Verifier classes."""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spectr_gbv.core import Instance, TabularAR, default_instance, random_instance
from spectr_gbv.core.methods import METHOD_NAMES, METHOD_TABLE, method_spec, methods_where
from spectr_gbv.examples.own_rules import first_draft_sd
from spectr_gbv.reference import get_verifier
from spectr_gbv.reference.registry import STABLE_METHOD_NAMES, available_methods
from spectr_gbv.reference.rrs import RecursiveRejectionVerifier
from spectr_gbv.reference.user_rules import (
    FunctionVerifier,
    NotEnumerableError,
    RuleRaisedError,
    as_verifier,
    resolve_rule,
)
from spectr_gbv.simulate.exact import simulate_exact
from spectr_gbv.simulate.methods import simulate_method
from spectr_gbv.validate.reference_variants import reference_verifier

RRS = get_verifier("rrs")


# ---------------------------------------------------------------------------- rules written by a user
def sd_function(drafts: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> list[int]:
    """Speculative sampling of draft 0, declaring nothing (so every draft tuple is enumerated)."""
    return first_draft_sd(drafts, q, p, rng)


def bv_vectorised(drafts: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> list[int]:
    """Block verification of draft 0 with its L uniforms drawn at once (``rng.random(L)``): object arrays."""
    verifier = get_verifier("bv")
    return list(verifier.sample(drafts, q, p, rng))


def random_order_rrs(drafts: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> list[int]:
    """SpecInfer's random child order: a uniformly random permutation of the drafts, then rrs's own sampler."""
    perm = rng.permutation(drafts.shape[0])
    return list(RRS.sample(drafts[perm], q[perm], p[perm], rng))


def first_token_of_a_random_draft(drafts: np.ndarray, q: np.ndarray, p: np.ndarray, rng: Any) -> list[int]:
    """Lossy on purpose: emits (tau = 0) the first token of a uniformly random draft."""
    return [int(drafts[rng.integers(drafts.shape[0]), 0])]


first_token_of_a_random_draft.lossless = False  # type: ignore[attr-defined]


def gumbel_argmax(drafts: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> list[int]:
    """Samples Z ~ p(.|root) by the Gumbel-max trick: lossless, but its draws are not comparisons."""
    logits = np.log(np.asarray(p[0, 0], dtype=np.float64))
    return [int(np.argmax(logits + rng.gumbel(size=logits.shape[0])))]


class TreeRule(RecursiveRejectionVerifier):
    """A user's copy of rrs that declares its reading shape."""

    name = "tree_rule"
    lossless = True
    symmetric = False
    structure = "draft_tree"
    citation = "a copy of rrs"


class UndeclaredTreeRule(RecursiveRejectionVerifier):
    """The same rule without ``structure``: simulated tuple by tuple, and told so."""

    name = "undeclared_tree_rule"
    lossless = True
    symmetric = False
    citation = "a copy of rrs"


# ---------------------------------------------------------------------------- the table
def test_the_table_is_the_registry_and_the_classes_read_their_facts_from_it() -> None:
    assert METHOD_NAMES == STABLE_METHOD_NAMES and len(set(METHOD_NAMES)) == len(METHOD_TABLE) == 19
    assert set(available_methods()) == {m.name for m in METHOD_TABLE if m.reference and not m.needs_instance}
    for spec in METHOD_TABLE:
        if spec.name in available_methods():
            cls = type(get_verifier(spec.name))
            assert (cls.lossless, cls.citation, cls.__dict__.get("structure")) == (
                spec.lossless,
                spec.citation,
                spec.structure,
            ), spec.name
    assert methods_where(lossless=False) == ("spectr_gbv_released", "independent_bv", "hsd_released")
    assert methods_where(drafts="one") == ("sd", "bv", "greedy_bv", "hsd", "hsd_released")
    assert methods_where(tau_law=True) == ("sd", "bv", "gbv_multipath", "mdbv", "near_opt_bv")
    assert method_spec("ar").grid_shape(3, 8) == (1, 0) and method_spec("bv").grid_shape(3, 8) == (1, 8)
    assert method_spec("mdbv").grid_shape(3, 8) == (3, 8)
    with pytest.raises(ValueError, match="unknown method 'nope'; valid: ar, sd"):
        method_spec("nope")
    with pytest.raises(TypeError, match="method must be a method name"):
        method_spec(["sd"])  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- plain functions, exactly
@pytest.mark.parametrize("K", [1, 2])
def test_a_plain_function_copy_of_sd_has_sd_s_exact_law(K: int) -> None:
    for inst in (default_instance(), random_instance(3, 2, 4)):
        mine, ref = simulate_exact(inst, sd_function, K), simulate_method(inst, "sd", K)
        assert mine.output_law == ref.output_law and mine.expected_accepted == ref.expected_accepted
        assert mine.exact and mine.validity_defect == 0
    assert simulate_exact(default_instance(), sd_function, 1).expected_accepted == Fraction(107, 72)


def test_vectorised_uniforms_and_a_package_sampler_inside_a_function_are_enumerated() -> None:
    inst = random_instance(3, 3, 2)
    assert simulate_exact(inst, bv_vectorised, 1).output_law == simulate_method(inst, "bv", 1).output_law


def test_a_random_permutation_is_enumerated_over_its_k_factorial_orders() -> None:
    inst = random_instance(3, 2, 1)
    mine = simulate_exact(inst, random_order_rrs, 2)
    assert mine.output_law == simulate_exact(inst, reference_verifier("rrs:random_order"), 2).output_law
    assert mine.expected_accepted == Fraction(24983312213, 15336363000) and mine.validity_defect == 0


def test_a_lossy_function_gets_its_exact_nonzero_defect_and_its_claim_is_read() -> None:
    info, verifier = resolve_rule(first_token_of_a_random_draft)
    assert isinstance(verifier, FunctionVerifier) and info.lossless_claimed is False and info.origin == "function"
    res = simulate_exact(default_instance(), first_token_of_a_random_draft, 1)
    # emits X_1 ~ q(.|root) instead of p: the defect is TV(p, q) of the root rows, exactly
    inst = default_instance()
    root_p, root_q = inst.target.cond(()), inst.draft.cond(())
    assert res.validity_defect == sum(abs(a - b) for a, b in zip(root_p, root_q, strict=True)) / 2 > 0


def test_draws_that_are_not_comparisons_are_refused_by_name() -> None:
    with pytest.raises(NotEnumerableError, match=r"rng\.gumbel"):
        simulate_exact(default_instance(), gumbel_argmax, 1)

    def adds(drafts: Any, q: Any, p: Any, rng: Any) -> list[int]:
        return [0] if rng.random() + 0.5 < 1 else [1]

    with pytest.raises(NotEnumerableError, match="arithmetic on a random draw"):
        simulate_exact(default_instance(), adds, 1)

    def loops(drafts: Any, q: Any, p: Any, rng: Any) -> list[int]:
        while rng.random() < 0.5:
            pass
        return [0]

    with pytest.raises(NotEnumerableError, match="more than 10,000 random draws in one run"):
        simulate_exact(default_instance(), loops, 1)


def test_a_function_that_cannot_be_enumerated_is_still_sampled_with_the_real_rng() -> None:
    verifier = as_verifier(gumbel_argmax)
    inst = default_instance().to_float()
    from spectr_gbv.simulate.exact import DraftTable

    table = DraftTable.from_instance(inst)
    d, q, p = table.tokens[:1], table.draft_rows[:1], table.target_rows[:1]
    rng = np.random.default_rng(0)
    counts = np.bincount([verifier.sample(d, q, p, rng)[0] for _ in range(4000)], minlength=inst.n)
    # 0.03 is 3.8 standard errors at worst (n = 4000)
    assert np.abs(counts / 4000 - np.asarray(inst.target.cond(()), dtype=float)).max() < 0.03


@pytest.mark.parametrize(
    "out, message",
    [
        ([0, 0, 0, 0, 0], r"returned 5 tokens .* expected 1\.\.L\+1"),
        ([7], r"outside the vocabulary"),
        ("x", r"not a sequence of token ids"),
    ],
)
def test_bad_outputs_of_a_function_are_named(out: Any, message: str) -> None:
    def bad(drafts: Any, q: Any, p: Any, rng: Any) -> Any:
        return out

    with pytest.raises(ValueError, match=message):
        simulate_exact(default_instance(), bad, 1)


def test_an_accepted_prefix_that_is_no_draft_is_refused() -> None:
    def wrong_prefix(drafts: Any, q: Any, p: Any, rng: Any) -> list[int]:
        return [int(1 - drafts[0, 0]), 0]

    with pytest.raises(ValueError, match="first 1 tokens are no draft's prefix"):
        simulate_exact(default_instance(), wrong_prefix, 1)


def max_ratio_sd(drafts: np.ndarray, q: np.ndarray, p: np.ndarray, rng: Any) -> list[int]:
    """SD on the draft whose first token has the largest p/q, falsely declaring that it reads draft 0 only."""
    k = max(range(drafts.shape[0]), key=lambda i: p[i, 0, drafts[i, 0]] / q[i, 0, drafts[i, 0]])
    return first_draft_sd(drafts[k : k + 1], q[k : k + 1], p[k : k + 1], rng)


max_ratio_sd.lossless = True  # type: ignore[attr-defined]
max_ratio_sd.drafts = "one"  # type: ignore[attr-defined]


def test_a_false_drafts_one_declaration_cannot_hide_a_defect() -> None:
    """p = (3/4, 1/4), q = (1/2, 1/2), L = 1, K = 2: P(Z = 0) = 3/4 + 1/8, so the defect is exactly 1/8."""
    inst = Instance(TabularAR.context_free(["3/4", "1/4"], depth=1), TabularAR.context_free(["1/2", "1/2"], depth=0), 1)
    assert resolve_rule(max_ratio_sd)[0].drafts == "one"
    res = simulate_exact(inst, max_ratio_sd, 2)
    assert res.validity_defect == Fraction(1, 8) and res.expected_accepted == Fraction(7, 8)
    assert simulate_exact(inst, max_ratio_sd, 1).validity_defect == 0


# ---------------------------------------------------------------------------- Verifier classes
def test_a_user_class_declaring_draft_tree_takes_the_structured_path_with_rrs_s_exact_law() -> None:
    inst = random_instance(3, 3, 7)
    mine, ref = simulate_exact(inst, TreeRule, 3), simulate_method(inst, "rrs", 3)
    assert mine.output_law == ref.output_law and mine.enumeration == ref.enumeration == "draft_tree"
    slow = simulate_exact(inst, UndeclaredTreeRule, 3)
    assert slow.output_law == ref.output_law and slow.enumeration != "draft_tree"
    info, _ = resolve_rule(UndeclaredTreeRule)
    assert "defines node_step but declares no structure" in info.note
    assert resolve_rule(TreeRule)[0].describe().endswith("verifier, claims lossless, structure draft_tree")


# ---------------------------------------------------------------------------- names
def test_module_attribute_names_load_from_the_current_directory(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "my_rules_mod.py").write_text(
        "from spectr_gbv.reference.rrs import RecursiveRejectionVerifier\n"
        "class Mine(RecursiveRejectionVerifier):\n"
        "    name = 'mine'\n    lossless = True\n    symmetric = False\n    structure = 'draft_tree'\n"
        "    citation = 'copy'\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        res = simulate_method(default_instance(), "my_rules_mod:Mine", 2)
        assert res.expected_accepted == simulate_method(default_instance(), "rrs", 2).expected_accepted
        assert resolve_rule("my_rules_mod:Mine")[0].name == "my_rules_mod:Mine"
    finally:
        sys.modules.pop("my_rules_mod", None)


@pytest.mark.parametrize(
    "name, error, message",
    [
        ("rulez", ValueError, r"unknown method 'rulez'; valid: ar, .* or 'module:attribute' naming your own rule"),
        ("no_such_module_xyz:f", ValueError, r"cannot import module 'no_such_module_xyz' \(ModuleNotFoundError"),
        ("numpy:no_such_attr", ValueError, r"module 'numpy' has no attribute 'no_such_attr'"),
        ("a:b:c", ValueError, r"expected a registered name or 'module:attribute'"),
        ("fractions:Fraction", ValueError, r"a class that is not a Verifier subclass"),
        ("math:pi", ValueError, r"expected a Verifier, a Verifier subclass or a function, got float"),
    ],
)
def test_bad_rule_names_get_one_clear_line(name: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        simulate_method(default_instance(), name, 1)
    with pytest.raises(ValueError, match="method: expected a method name or a rule, got list"):
        resolve_rule(["sd"])


def test_a_registered_user_class_is_accepted_by_name(monkeypatch: Any) -> None:
    from spectr_gbv.reference import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "METHODS", registry.METHODS)
    registry.register(TreeRule)
    assert registry.check_method("tree_rule") == "tree_rule"
    inst = random_instance(3, 2, 3)
    assert simulate_method(inst, "tree_rule", 2).output_law == simulate_method(inst, "rrs", 2).output_law


def test_a_wrong_signature_and_a_raising_rule_are_one_line() -> None:
    def two_args(a: Any, b: Any) -> list[int]:
        return [0]

    expected = r"a function rule takes \(drafts, draft_probs, target_probs, rng\); its signature is \(a"
    with pytest.raises(ValueError, match=expected):
        simulate_method(default_instance(), two_args, 1)

    def raises(drafts: Any, q: Any, p: Any, rng: Any) -> list[int]:
        raise RuntimeError("boom")

    with pytest.raises(RuleRaisedError, match=r"^rule .*raises raised RuntimeError: boom$"):
        simulate_method(default_instance(), raises, 1)


@pytest.mark.parametrize("name", ["spectr_gbv", "SpecTr-GBV", "gbv"])
def test_the_paper_s_name_gets_a_hint_to_its_two_readings(name: str) -> None:
    from spectr_gbv.reference.registry import check_method

    hint = r"\(the paper's SpecTr-GBV rule is 'mdbv', this package's lossless reading of it, or 'spectr_gbv_released'"
    for call in (lambda: simulate_method(default_instance(), name, 2), lambda: check_method(name)):
        with pytest.raises(ValueError, match=rf"^unknown method '{name}' {hint}"):
            call()
    with pytest.raises(ValueError, match=r"^unknown method 'nope'; valid"):
        check_method("nope")
