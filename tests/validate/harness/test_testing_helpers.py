"""spectr_gbv.testing: hypothesis strategies, assert_lossless, the pytest plugin and the documented example."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from spectr_gbv.core import Instance, random_instance
from spectr_gbv.reference import validate_inputs
from spectr_gbv.testing import assert_lossless, strategies
from spectr_gbv.testing.mutants import correct_bv, correct_sd_chain, zero_coin_accepts

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _rows_ok(inst: Instance) -> None:
    """Every row of p (depth >= L) and q (depth >= L - 1) is a probability law; exact rows sum to 1 exactly."""
    assert inst.target.depth >= inst.L and inst.draft.depth >= inst.L - 1
    for model in (inst.target, inst.draft):
        assert model.n == inst.n
        for prefix, row in model.items():
            values = row.tolist()
            assert all(v >= 0 for v in values) and any(v > 0 for v in values), prefix
            total = sum(values, F(0)) if inst.exact else float(np.sum(row))
            assert total == 1 if inst.exact else abs(total - 1) < 1e-9, (prefix, total)


# ============================================================================ strategies
@FAST
@given(strategies.instances())
def test_instances_default_are_valid(inst: Instance) -> None:
    assert isinstance(inst, Instance) and inst.exact
    assert 2 <= inst.n <= 3 and 1 <= inst.L <= 3 and inst.n**inst.L <= strategies.MAX_CELLS
    _rows_ok(inst)


@FAST
@given(strategies.instances(n=4, L=(1, 2), sparsity=(0.2, 0.6), exact=False, temperature=(0.1, 3.0)))
def test_instances_float_sparse_and_tempered_are_valid(inst: Instance) -> None:
    assert not inst.exact and inst.n == 4 and inst.L in (1, 2)
    _rows_ok(inst)


@FAST
@given(strategies.instances(n=3, L=2, sparsity=0.0, temperature=0.5))
def test_temperature_squares_the_rows(inst: Instance) -> None:
    # exact at T = 1/2: every row is the T = 1 row squared and renormalised
    seed = int(re.search(r"seed=(\d+)", inst.name).group(1))
    base = random_instance(3, 2, seed)
    for tempered, plain in ((inst.target, base.target), (inst.draft, base.draft)):
        for prefix, row in plain.items():
            squared = [v * v for v in row.tolist()]
            assert tempered.cond(prefix).tolist() == [v / sum(squared, F(0)) for v in squared]


def test_sparsity_produces_zeros_and_disjoint_supports() -> None:
    def disjoint(inst: Instance) -> bool:
        p, q = inst.target.cond(()), inst.draft.cond(())
        return any(pv > 0 and qv == 0 for pv, qv in zip(p, q, strict=True)) and any(
            qv > 0 and pv == 0 for pv, qv in zip(p, q, strict=True)
        )

    inst = find(strategies.instances(n=4, L=1, sparsity=0.5), disjoint, settings=settings(database=None))
    assert disjoint(inst)
    # float rows without sparsity have no zeros (exact rows may round a tiny weight to 0)
    with pytest.raises(NoSuchExample):
        find(
            strategies.instances(n=4, L=1, sparsity=0.0, exact=False),
            lambda i: any(v == 0 for v in i.target.cond(()).tolist()),
            settings=settings(database=None, max_examples=30),
        )


@FAST
@given(strategies.verify_inputs(K=(1, 3), n=(2, 4), L=(1, 2), sparsity=(0.0, 0.4)))
def test_verify_inputs_are_consistent(inputs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    drafts, q, p = inputs
    K, L = drafts.shape
    n = q.shape[2]
    assert 1 <= K <= 3 and 1 <= L <= 2 and drafts.dtype == np.int64
    assert q.shape == (K, L, n) and p.shape == (K, L + 1, n)
    # drafted tokens have draft probability > 0 (sampled from q); rows agree on shared prefixes
    assert all(q[k, t, drafts[k, t]] > 0 for k in range(K) for t in range(L))
    batch = validate_inputs(drafts, q, p)  # the reference input checks are the oracle
    assert batch.exact


@FAST
@given(strategies.configs(n=(2, 5), L=(1, 4), K=(1, 3), max_cells=30), strategies.cases(K=2, n=2, L=1))
def test_configs_and_cases(cfg: strategies.Config, case: tuple[Instance, int]) -> None:
    assert 2 <= cfg.n <= 5 and 1 <= cfg.L <= 4 and 1 <= cfg.K <= 3 and cfg.n**cfg.L <= 30
    inst, K = case
    assert K == 2 and (inst.n, inst.L) == (2, 1)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: strategies.instances(n=0), "n"),
        (lambda: strategies.instances(L=(3, 1)), "L"),
        (lambda: strategies.instances(sparsity=1.5), "sparsity"),
        (lambda: strategies.instances(temperature=0.3), "temperature"),  # exact needs an integer 1/T
        (lambda: strategies.instances(temperature=-1.0, exact=False), "temperature"),
        (lambda: strategies.verify_inputs(K=0), "K"),
        (lambda: strategies.configs(n="3"), "n"),
    ],
    ids=["n0", "L-range", "sparsity", "temperature-exact", "temperature-negative", "K0", "n-str"],
)
def test_strategy_arguments_are_checked(make: object, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        find(make(), lambda _: True, settings=settings(database=None, max_examples=5))


# ============================================================================ assert_lossless
SMALL = random_instance(3, 2, 5, zero_prob=0.2)


def test_assert_lossless_passes_a_correct_verifier() -> None:
    report = assert_lossless(correct_bv, reference="bv", instances=[(SMALL, 2)])
    assert report.passed and report.budget == "quick" and report.reference == "bv"
    report = assert_lossless(
        correct_sd_chain, interface="chain", level="exact", instances=[(random_instance(2, 1, 3), 1)]
    )
    assert report.passed and report.level_used == "exact"


def test_assert_lossless_raises_with_the_report_text() -> None:
    with pytest.raises(AssertionError) as info:
        assert_lossless(zero_coin_accepts, instances=[(SMALL, 1)], seed=3)
    text = str(info.value)
    assert text.startswith("Validation of spectr_gbv.testing.mutants:zero_coin_accepts")
    assert "FAILED" in text and "zero_probability_token" in text and "seed 3" in text
    with pytest.raises(ValueError, match="budget"):
        assert_lossless(correct_bv, budget="enormous")


# ============================================================================ plugin
def _entry_point_installed() -> bool:
    """Whether pytest will autoload the plugin: pluggy scans every distribution, duplicates included."""
    return any(
        ep.group == "pytest11" and ep.value == "spectr_gbv.testing.plugin"
        for dist in importlib.metadata.distributions()
        for ep in dist.entry_points
    )


#: Load the plugin explicitly when the installed metadata predates its entry point.
# pytest-benchmark, where installed, warns in every inner run under xdist; these runs use no benchmark.
PLUGIN_ARGS = ["-p", "no:benchmark"] + ([] if _entry_point_installed() else ["-p", "spectr_gbv.testing.plugin"])


def test_entry_point_is_declared() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {"spectr_gbv": "spectr_gbv.testing.plugin"}


def test_entry_point_autoloads_the_plugin(tmp_path: Path) -> None:
    """An installed distribution declaring the entry point makes pytest load the plugin (no -p)."""
    dist = tmp_path / "site" / "spectr_gbv_probe-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: spectr_gbv_probe\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nspectr_gbv = spectr_gbv.testing.plugin\n")
    (tmp_path / "test_probe.py").write_text("def test_probe(spectr_budget):\n    assert spectr_budget == 'standard'\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'site'}:{ROOT}"}
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--spectr-budget=standard", "test_probe.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout + res.stderr


def test_testing_and_validate_do_not_import_torch() -> None:
    code = (
        "import sys, spectr_gbv.testing, spectr_gbv.testing.plugin, spectr_gbv.testing.strategies, "
        "spectr_gbv.validate, spectr_gbv.testing.mutants; "
        "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_plugin_fixtures_and_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fixtures=textwrap.dedent(
            """
            import pytest

            def test_budget_option(spectr_validate, spectr_budget):
                assert spectr_budget == "thorough"
                assert spectr_validate.keywords == {"budget": "thorough"}

            def test_default_instance(spectr_instance):
                assert (spectr_instance.n, spectr_instance.L, spectr_instance.exact) == (2, 2, True)

            @pytest.mark.parametrize("spectr_instance", ["random:3,1,4", {"n": 2, "L": 1,
                "target": {"": ["1/2", "1/2"], "0": [1, 0], "1": [0, 1]}, "draft": {"": ["1/3", "2/3"]}}],
                indirect=True)
            def test_indirect_instance(spectr_instance):
                assert spectr_instance.L == 1 and spectr_instance.n in (2, 3)
            """
        )
    )
    result = pytester.runpytest(*PLUGIN_ARGS, "--spectr-budget=thorough", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    bad = pytester.runpytest(*PLUGIN_ARGS, "--spectr-budget=huge", "-p", "no:cacheprovider")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--spectr-budget*invalid choice*huge*"])


def test_plugin_instance_path_is_found_next_to_the_test_module(pytester: pytest.Pytester) -> None:
    """A relative instance path is looked up next to the test module, whatever the current directory."""
    sub = pytester.mkdir("suite")
    (sub / "mine.json").write_text(
        '{"n": 2, "L": 1, "name": "mine", "target": {"": ["1/2", "1/2"], "0": [1, 0], "1": [0, 1]}, '
        '"draft": {"": ["1/3", "2/3"]}}'
    )
    (sub / "test_paths.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.parametrize("spectr_instance", ["mine.json"], indirect=True)
            def test_next_to_module(spectr_instance):
                assert spectr_instance.name == "mine" and spectr_instance.L == 1
            """
        )
    )
    result = pytester.runpytest(*PLUGIN_ARGS, "-p", "no:cacheprovider", "suite")  # run from the parent directory
    result.assert_outcomes(passed=1)


def test_plugin_validate_fixture_runs_the_harness(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_run=textwrap.dedent(
            """
            from spectr_gbv.testing.mutants import correct_sd, accepts_placeholder

            def test_correct(spectr_validate, spectr_instance):
                report = spectr_validate(correct_sd, level="exact", instances=[(spectr_instance, 1)])
                assert report.passed and report.budget == "quick"

            def test_mutant(spectr_validate, spectr_instance):
                report = spectr_validate(accepts_placeholder, instances=[(spectr_instance, 1)], conventions=("vllm",))
                assert not report.passed
                assert "accepts_placeholder" in {c.diagnosis for c in report.failures}
            """
        )
    )
    pytester.runpytest(*PLUGIN_ARGS, "-p", "no:cacheprovider").assert_outcomes(passed=2)


# ============================================================================ the documented five lines
def five_line_example() -> list[str]:
    """The code block under the heading 'Five-line property test' of docs/validate.md."""
    text = (ROOT / "docs" / "validate.md").read_text()
    section = text.split("## Five-line property test", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "no python block under 'Five-line property test'"
    return block.group(1).rstrip("\n").split("\n")


def test_five_line_example_is_five_lines() -> None:
    lines = five_line_example()
    assert len(lines) == 5 and all(line.strip() for line in lines)
    assert "my_verify" in lines[-1] and lines[-1].startswith("def test_")


@pytest.mark.parametrize(
    "verifier, outcome",
    [("correct_mdbv", {"passed": 1}), ("always_accept", {"failed": 1})],
    ids=["correct-passes", "mutant-fails"],
)
def test_five_line_example_runs(pytester: pytest.Pytester, verifier: str, outcome: dict[str, int]) -> None:
    # the user's import of their verifier, then the five documented lines verbatim
    source = f"from spectr_gbv.testing.mutants import {verifier} as my_verify\n" + "\n".join(five_line_example())
    pytester.makepyfile(test_property=source)
    # no shrinking (each example is a harness run) and no example database in the temporary directory
    pytester.makeconftest(
        "from hypothesis import Phase, settings\n"
        "settings.register_profile('once', database=None, phases=[Phase.explicit, Phase.generate])\n"
    )
    result = pytester.runpytest(*PLUGIN_ARGS, "--hypothesis-profile=once", "-p", "no:cacheprovider")
    result.assert_outcomes(**outcome)
    if "failed" in outcome:
        result.stdout.fnmatch_lines(["*AssertionError: Validation of *always_accept*FAILED*", "*not_lossless*"])


def test_strategies_compose_with_st() -> None:
    # strategies are ordinary hypothesis strategies: they map, filter and combine
    pairs = st.tuples(strategies.instances(n=2, L=1), strategies.num_drafts((1, 2)))
    inst, K = find(pairs, lambda t: t[1] == 2, settings=settings(database=None))
    assert isinstance(inst, Instance) and K == 2


def test_assert_lossless_on_the_given_instances_only():
    """probes=False, search=False: a probe-only bug passes on an instance where it is harmless,
    a law bug still fails there, with the instance as the smallest failing case."""
    from spectr_gbv.testing.mutants import MUTANTS

    case = [(random_instance(3, 1, 2), 1)]
    report = assert_lossless(zero_coin_accepts, instances=case, probes=False, search=False)
    assert report.passed and {c.name for c in report.checks} >= {"end_to_end_law[user0]", "determinism"}
    with pytest.raises(AssertionError, match=r"Smallest failing case: .*\[user0\]"):
        assert_lossless(MUTANTS["target_sample_or_ratio"], instances=case, probes=False, search=False)
