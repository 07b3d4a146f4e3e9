"""A user's own rules in the sweep: grid checks, K = 1 for single-draft rules, rows, a real Ray run, the summary."""

from __future__ import annotations

import json
import textwrap
from fractions import Fraction as F

import pytest

from spectr_gbv.core.instance import random_instance
from spectr_gbv.core.numbers import json_value
from spectr_gbv.reference import registry
from spectr_gbv.simulate.methods import simulate_method
from spectr_gbv.sweep.grid import grid_from_args, load_grid_toml
from spectr_gbv.sweep.schema import COLUMNS
from spectr_gbv.sweep.tasks import run_task
from tests.simulate.own_rules import OwnRuleB

OWN = "tests.simulate.own_rules:"

#: A user's rule module as a researcher writes it, in the folder the sweep is started from.
RULES_MODULE = '''
from spectr_gbv.examples.own_rules import first_draft_sd
from spectr_gbv.reference.rrs import RecursiveRejectionVerifier


class RuleB(RecursiveRejectionVerifier):
    name = "rule_b"
    structure = "draft_tree"


def sd_fn(drafts, q, p, rng):
    """SD on draft 0."""
    return first_draft_sd(drafts, q, p, rng)


sd_fn.lossless = True
sd_fn.drafts = "one"
'''


@pytest.fixture
def rule_b_registered():
    registry.register(OwnRuleB)
    yield "own_rule_b"
    registry._REGISTRY.pop("own_rule_b", None)
    registry._refresh()


def test_a_registered_users_class_is_a_grid_method(rule_b_registered):
    grid = grid_from_args(random=["2,2,0"], methods=f"mdbv,{rule_b_registered}", ks="2")
    (task,) = grid.tasks()
    assert task.rules == (("own_rule_b", OwnRuleB),)
    rows = run_task(task)
    direct = simulate_method(random_instance(2, 2, 0), "rrs", 2)
    assert [(r["method"], r["K"]) for r in rows] == [("mdbv", 2), ("own_rule_b", 2)]
    assert rows[1]["expected_accepted"] == json_value(direct.expected_accepted) and rows[1]["error"] is None


def test_module_attribute_methods_keep_their_names_and_single_draft_rules_run_at_k1():
    grid = grid_from_args(random=["2,2,0"], methods=f"mdbv,sd,ar,{OWN}TreeRRS,{OWN}sd_copy,{OWN}no_claim_sd", ks="2,3")
    assert grid.methods == ("mdbv", "sd", "ar", f"{OWN}TreeRRS", f"{OWN}sd_copy", f"{OWN}no_claim_sd")
    assert [grid.method_ks(m) for m in grid.methods] == [(2, 3), (1,), (1,), (2, 3), (1,), (2, 3)]
    assert grid.num_rows() == 9
    (task,) = grid.tasks()
    rows = {(r["method"], r["K"]): r for r in run_task(task)}
    assert {(task.instance_id, m, k) for m, k in rows} == task.keys() and len(rows) == 9
    for r in rows.values():
        assert set(r) == set(COLUMNS) and r["error"] is None and r["seconds"] >= 0
    inst = random_instance(2, 2, 0)
    for mine, theirs, k in [(f"{OWN}TreeRRS", "rrs", 3), (f"{OWN}sd_copy", "sd", 1), (f"{OWN}no_claim_sd", "sd", 3)]:
        direct = simulate_method(inst, theirs, k)
        assert rows[(mine, k)]["expected_accepted"] == json_value(direct.expected_accepted)
        assert rows[(mine, k)]["validity_defect"] == "0" and rows[(mine, k)]["lossless"] is True
    assert rows[("sd", 1)]["expected_accepted"] == rows[(f"{OWN}sd_copy", 1)]["expected_accepted"] == "2319/1540"


def test_toml_methods_take_module_attribute_names(tmp_path):
    (tmp_path / "grid.toml").write_text(
        f'methods = ["mdbv", "{OWN}TreeRRS"]\nK = [2]\n[[family]]\nrandom = "2,2,0-1"\n'
    )
    grid = load_grid_toml(tmp_path / "grid.toml")
    assert grid.methods == ("mdbv", f"{OWN}TreeRRS") and grid.num_rows() == 4
    assert grid.to_dict()["methods"] == ["mdbv", f"{OWN}TreeRRS"]


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        ("mdbv,nomod_xyz:rule", "methods: method 'nomod_xyz:rule': cannot import module 'nomod_xyz'"),
        (f"mdbv,{OWN}nope", f"methods: method '{OWN}nope': module 'tests.simulate.own_rules' has no attribute"),
        (f"{OWN}NOT_A_RULE", f"methods: method '{OWN}NOT_A_RULE': rule: expected a Verifier"),
        ("mdbv,rule_b", "methods: unknown method 'rule_b'; valid: ar, sd,"),
    ],
)
def test_the_grid_checks_rules_when_it_is_built(methods, message):
    with pytest.raises(ValueError) as info:
        grid_from_args(random=["2,2,0"], methods=methods)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_bad_drafts_declaration_is_refused(tmp_path, monkeypatch):
    (tmp_path / "bad_drafts_rules.py").write_text("def f(d, q, p, rng):\n    return [0]\nf.drafts = 'two'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="drafts must be 'one' or 'many'|drafts must be one of"):
        grid_from_args(random=["2,2,0"], methods="bad_drafts_rules:f")


def test_cli_sweep_refuses_an_unknown_rule_in_one_line(tmp_path, capsys):
    from spectr_gbv.cli.main import main

    argv = ["sweep", "--random", "2,2,0", "--methods", "mdbv,verifiers_nowhere:RuleB", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "spectr-gbv sweep: error: methods: method 'verifiers_nowhere:RuleB': cannot import module 'verifiers_nowhere'"
    )
    assert "\n" not in err and not (tmp_path / "o").exists()


# ---- summarize: a lossy method (registered or a user's rule) is never "best among lossless" ----

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

SGR, MD = "spectr_gbv_released", "mdbv"
HONEST, LIAR, SILENT, GONE = f"{OWN}sd_copy", f"{OWN}accept_all", f"{OWN}no_claim_sd", "gone_module_xyz:rule"
LONG = "12345678901/98765432109"  # too long to read: ~0.125000


def _row(instance_id, method, k, e, defect):
    from spectr_gbv.sweep.schema import COLUMNS

    row = dict.fromkeys(COLUMNS)
    row.update(instance_id=instance_id, family="random", n=2, L=2, K=k, method=method, opt=3.0, seconds=0.0)
    row.update(expected_accepted=e, expected_accepted_float=float(F(e)), validity_defect=defect)
    row.update(validity_defect_float=float(F(defect)), lossless=F(defect) == 0, package_version="0")
    return row


@pytest.fixture(scope="module")
def mixed_summary(tmp_path_factory):
    from spectr_gbv.sweep.schema import arrow_schema
    from spectr_gbv.sweep.summary import summarize

    rows = []
    for inst in ("i1", "i2"):
        rows += [
            _row(inst, MD, 2, "1", "0"),
            _row(inst, SGR, 2, "5/2", "1/4"),  # lossy by the table: the largest lossy E[tau] must not win
            _row(inst, LIAR, 2, "2", LONG if inst == "i2" else "0"),  # claims lossless, defect != 0 on i2
            _row(inst, SILENT, 2, "9/4", "0"),  # defect 0 but no claim
            _row(inst, GONE, 2, "11/4", "0"),  # cannot be imported: no claim known
            _row(inst, HONEST, 2, "3/2" if inst == "i1" else "1", "0"),  # claims lossless, defect 0 everywhere
        ]
    rows.append(_row("i1", MD, 3, "4/3", "0"))
    rows.append(_row("i2", MD, 3, "1", "0"))  # 1 -> 1: no drop
    rows.append(_row("i1", LIAR, 3, "1", "0"))  # E[tau] drops by 1 on i1 from K = 2 to 3
    folder = tmp_path_factory.mktemp("mixed") / "sweep"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema()), folder / "part-0.parquet")
    return summarize(folder)


def _best(summary, method, k=2):
    (cell,) = [c for c in summary.cells if c["method"] == method and c["K"] == k]
    return cell["best"]


def test_lossy_methods_are_never_credited_best(mixed_summary):
    s = mixed_summary
    assert _best(s, HONEST) == {"contested": 2, "wins": 1.5, "share": 0.75}  # i1 alone, i2 tied with mdbv
    assert _best(s, MD) == {"contested": 2, "wins": 0.5, "share": 0.25}
    for method in (SGR, LIAR, SILENT, GONE):  # each would otherwise have won both instances
        assert _best(s, method) is None
    assert s.rules == {
        LIAR: {"origin": "function", "lossless_claimed": True, "rows": 3, "nonzero_defects": 1, "credited": False,
               "note": ""},
        SILENT: {"origin": "function", "lossless_claimed": None, "rows": 2, "nonzero_defects": 0, "credited": False,
                 "note": ""},
        GONE: {"origin": "unknown", "lossless_claimed": None, "rows": 2, "nonzero_defects": 0, "credited": False,
               "note": "method 'gone_module_xyz:rule': cannot import module 'gone_module_xyz' (ModuleNotFoundError: "
                       "No module named 'gone_module_xyz')"},
        HONEST: {"origin": "function", "lossless_claimed": True, "rows": 2, "nonzero_defects": 0, "credited": True,
                 "note": ""},
    }  # fmt: skip
    # a rule claiming lossless is checked for violations; the unclaimed and the lossy are not
    assert s.violations[LIAR] == {
        "count": 1, "worst": {"instance_id": "i2", "K": 2, "defect": LONG, "defect_float": float(F(LONG))}
    }  # fmt: skip
    assert SGR not in s.violations and SILENT not in s.violations and HONEST in s.violations
    assert json.loads(json.dumps(s.to_json()))["rules"][HONEST]["credited"] is True


def test_markdown_shows_claims_and_long_values_as_decimals(mixed_summary):
    md = mixed_summary.to_markdown()
    best = md.split("## Best among lossless")[1].split("##")[0]
    assert f"| {HONEST} | 2 | 2 | 1.5 | 0.750000 |" in best and f"| {MD} | 2 | 2 | 0.5 | 0.250000 |" in best
    assert all(m not in best for m in (SGR, LIAR, SILENT, GONE))
    assert f"| {LIAR} | 2 | 1 | i2 (K=2) | ~0.125000 |" in md  # the long defect, as display_value prints it
    assert LONG not in md
    assert f"| {LIAR} | 1 | 1 | i1 (K=2 -> 3) | 1 |" in md  # an integral exact drop
    rules = md.split("## User rules")[1]
    assert f"| {LIAR} | function | claims lossless | 3 | 1 | no | - |" in rules
    assert f"| {SILENT} | function | no claim | 2 | 0 | no | - |" in rules
    assert f"| {HONEST} | function | claims lossless | 2 | 0 | yes | - |" in rules
    assert f"| {GONE} | unknown | no claim | 2 | 0 | no | method 'gone_module_xyz:rule': cannot import" in rules


def test_summary_show_reuses_display_value():
    from spectr_gbv.sweep.summary import _show

    assert _show(LONG, None) == "~0.125000"
    assert _show("1/8", 0.125) == "1/8 = 0.125000"
    assert _show("3", 3.0) == "3"
    assert _show("2e-09", 2e-9) == "2.000e-09"  # a float64 instance's repr
    assert _show(None, None) == "-"


# ---- a real sweep on Ray, the rule module in the current directory and one on the driver's sys.path ----


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


def test_a_real_sweep_runs_user_rules_in_ray_workers(local_ray, tmp_path, monkeypatch, rule_b_registered, capsys):
    from spectr_gbv.cli.main import main
    from spectr_gbv.sweep.runner import run_sweep, worker_pythonpath
    from spectr_gbv.sweep.store import read_table

    (tmp_path / "my_rules.py").write_text(textwrap.dedent(RULES_MODULE))
    elsewhere = tmp_path / "lib"
    elsewhere.mkdir()
    (elsewhere / "far_rules.py").write_text(textwrap.dedent(RULES_MODULE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(elsewhere))  # importable in the driver only: the workers get it by PYTHONPATH

    methods = "mdbv,sd,my_rules:RuleB,my_rules:sd_fn,far_rules:RuleB,own_rule_b"
    grid = grid_from_args(random=["2,2,0-1"], methods=methods, ks="2")
    path = worker_pythonpath(grid).split(":")
    assert path[0] == str(tmp_path) and str(elsewhere) in path  # the folders the rules came from, cwd first
    result = run_sweep(grid, tmp_path / "out", show_progress=False)
    assert (result.tasks_done, result.tasks_failed, result.rows_written, result.rows_with_errors) == (2, 0, 12, 0)
    rows = {(r["instance_id"], r["method"], r["K"]): r for r in read_table(tmp_path / "out").to_pylist()}
    for seed in (0, 1):
        inst, key = random_instance(2, 2, seed), f"random:2,2,{seed},0"
        rrs, sd = simulate_method(inst, "rrs", 2), simulate_method(inst, "sd", 1)
        for name in ("my_rules:RuleB", "far_rules:RuleB", "own_rule_b"):
            assert rows[(key, name, 2)]["expected_accepted"] == json_value(rrs.expected_accepted)
        assert rows[(key, "my_rules:sd_fn", 1)]["expected_accepted"] == json_value(sd.expected_accepted)
        mine, theirs = rows[(key, "my_rules:RuleB", 2)], rows[(key, "mdbv", 2)]
        assert {c for c in COLUMNS if mine[c] is None} == {c for c in COLUMNS if theirs[c] is None}

    # the CLI form, from the same folder, then its summary: the rules credited (each claims lossless, defect 0)
    argv = ["sweep", "--random", "2,2,0-1", "--methods", "mdbv,my_rules:RuleB", "--K", "2", "--out", "cli", "--quiet"]
    assert main([*argv, "--measures", "tau,opt", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows_written"] == 4
    assert main(["sweep", "summarize", "cli", "--out", "cli-summary", "--no-plots", "--json", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rules"]["my_rules:RuleB"]["credited"] is True
    assert [c["best"]["contested"] for c in data["cells"]] == [2, 2]


def test_the_cli_notes_the_methods_run_at_k_1_only(capsys):
    from spectr_gbv.cli.sweep import _note_single_draft

    grid = grid_from_args(random=["2,2,0-1"], methods="sd,mdbv,ar", ks="2,3", measures="tau")
    _note_single_draft(grid, quiet=False)
    err = capsys.readouterr().err
    assert err.startswith("spectr-gbv sweep: note: sd, ar: run at K = 1 only (a rule that reads draft 0 only")
    _note_single_draft(grid, quiet=True)
    assert capsys.readouterr().err == ""
