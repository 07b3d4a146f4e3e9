"""`spectr-gbv report` fits a terminal: 100 columns, about 80 lines by default, every column defined, a summary.

The default report is built once (module fixture); the other instances run with the SpecTr-GBV
ledger only (the field ledger's batteries are what take time).
"""

from __future__ import annotations

import json
import re
from fractions import Fraction as F
from pathlib import Path

import pytest

from spectr_gbv.cli.main import main
from spectr_gbv.cli.report_text import WIDTH, render
from spectr_gbv.core.instance import default_instance, random_instance
from spectr_gbv.core.methods import METHOD_TABLE, SUMMARY_MAX_LEN, method_spec
from spectr_gbv.ledger.claims import Claim
from spectr_gbv.ledger.report import build_report
from spectr_gbv.simulate.methods import simulate_method
from spectr_gbv.theory.lp import optimal_lossless

#: `spectr-gbv report --json` on the default instance before the report was reworked (its keys and values
#: are a contract: the new JSON may only add keys; the claims' prose may change wording).
OLD_JSON = Path(__file__).parent / "data" / "report_default_v1.json"


@pytest.fixture(scope="module")
def default_report():
    return build_report(default_instance(), (1, 2, 3))


def _fits(text: str) -> list[str]:
    lines = text.split("\n")
    too_wide = [line for line in lines if len(line) > WIDTH]
    assert not too_wide, too_wide[:3]
    return lines


def test_default_view_fits_a_terminal(default_report):
    lines = _fits(render(default_report))
    assert 75 <= len(lines) <= 92, len(lines)
    text = "\n".join(lines)
    assert "docs/verifiers.md" in text and "docs/findings.md" in text
    for spec in METHOD_TABLE:  # one legend phrase per method, on its table row
        row = next(line for line in lines if line.split()[:1] == [spec.name])
        assert row.rstrip().endswith(spec.summary), row
    # every column and marker is defined under the table
    for needle in ("E[tau]: expected accepted", "defect: validity defect", "* = a lossy rule", "E[calls]: "):
        assert needle in text, needle
    for label in ("B ", "B_BV ", "OPT ", "OT "):
        assert any(line.startswith(label) for line in lines), label
    # one number format: lp_oracle's K = 3 value (exactly 2) prints as the others do
    assert re.search(r"^lp_oracle +1\.569444 +1\.972222 +2\.000000 ", text, re.M)
    assert re.search(r"^spectr_gbv_released \* +1\.625000 +1\.568056 +1\.616861 ", text, re.M)
    assert re.search(r"^  defect +0\.055556 +0\.059012 +0\.045307$", text, re.M)
    assert re.search(r"^  defect +0 +0\.097222 +0\.117091$", text, re.M)  # independent_bv
    assert "E[tokens]" not in text.split("Multi-iteration")[1].split("\n")[1]  # the E[tokens] columns: --detail


def test_no_internal_language_and_no_contradicting_note(default_report):
    for text in (render(default_report), render(default_report, detail=True), json.dumps(default_report.to_json())):
        assert not re.search(r"issue \d", text)
    k1 = next(c for c in default_report.claims if c.key == "k1_reduction")
    assert k1.verdict == "holds" and not any(e.startswith("but") for e in k1.evidence)
    note = "note: B(1) needs carried state; the best stateless lossless verifier reaches BV = OPT(1) = 113/72"
    assert any(e.startswith(note) for e in k1.key_lines())
    assert k1.key_lines()[0].startswith("B(1) = greedy (stateful) BV's value = 13/8")
    never = next(c for c in default_report.field_claims if c.key == "never_below")
    assert never.key_lines()[0].startswith("on two small instances A and B built for this check (not this one)")
    assert any("rebuilt by spectr_gbv.ledger.deployable.mirrored_pair()" in e for e in never.evidence)


def test_detail_view_prints_every_evidence_line(default_report):
    lines = _fits(render(default_report, detail=True))
    flat = " ".join(" ".join(lines).split())
    for c in default_report.claims + default_report.field_claims:
        assert " ".join(c.statement.split()) in flat, c.key
        for e in c.evidence:
            assert " ".join(e.split()) in flat, e
    for needle in ("mdbv: E[tau] K=1 113/72, K=2 61/36, K=3 577/324; defect 0 at every K", "E[tokens] m=4"):
        assert needle in flat, needle
    assert "spectr_gbv_released: E[tau] K=1 13/8, K=2 418023763/266587200, K=3 ~1.616861; defect K=1 1/18" in flat


def test_summary_names_the_best_lossless_verifier_exactly(default_report):
    inst = default_instance()
    p, q, L = inst.target, inst.draft, inst.L
    opt = {k: optimal_lossless(p, q, k, L).value for k in (1, 2, 3)}
    # independently: the best registered-lossless, not instance-solved row of the table at each K
    for k in (1, 2, 3):
        rows = {
            m: r.expected_accepted
            for (m, kk), r in default_report.results.items()
            if kk == k and method_spec(m).lossless and not method_spec(m).needs_instance and r.validity_defect == 0
        }
        top = max(rows.values())
        assert [m for m, v in rows.items() if v == top][0] == {1: "greedy_bv", 2: "near_opt_bv", 3: "near_opt_bv"}[k]
    assert simulate_method(inst, "greedy_bv", 1).expected_accepted == F(13, 8)
    assert simulate_method(inst, "near_opt_bv", 2).expected_accepted == F(881, 448)
    assert simulate_method(inst, "near_opt_bv", 3).expected_accepted == 2

    s1, s2, s3 = default_report.summary()
    assert (s1.best_deployable.method, s1.best_deployable.expected_accepted, s1.best_deployable.stateless) == (
        "greedy_bv",
        F(13, 8),
        False,
    )
    assert (s1.best_stateless.method, s1.best_stateless.expected_accepted) == ("bv", F(113, 72))
    assert set(s1.best_stateless.ties) == {"gbv_multipath", "mdbv", "traversal", "hsd", "hsd_multidraft", "near_opt_bv"}
    assert s1.best_stateless.at_opt and not s2.best_deployable.at_opt and s3.best_deployable.at_opt
    assert (s2.best.method, s2.best.expected_accepted) == ("lp_oracle", F(71, 36))
    assert (s2.best_deployable.method, s2.best_deployable.expected_accepted) == ("near_opt_bv", F(881, 448))
    assert s2.best_deployable.gap == pytest.approx(opt[2] - 881 / 448, abs=1e-9)
    assert s2.best_deployable.fraction == pytest.approx(881 / 448 / opt[2], abs=1e-9)
    assert (s3.best_deployable.method, s3.best_deployable.expected_accepted) == ("near_opt_bv", 2)
    assert s1.oracles == ("lp_oracle",) and s1.excluded == ("spectr_gbv_released", "independent_bv", "hsd_released")

    text = render(default_report)
    flat = " ".join(text.split())
    assert "lp_oracle solves this instance's LP (OPT(K) at every K); without it:" in flat
    assert (
        f"K=1: greedy_bv 1.625000 (stateful) > OPT(1) = {opt[1]:.6f}; stateless: bv {113 / 72:.6f} = OPT(1) "
        "(tied: gbv_multipath, mdbv, traversal, hsd, hsd_multidraft, near_opt_bv)"
    ) in flat
    assert (
        f"  K=2: near_opt_bv {881 / 448:.6f}, {opt[2] - 881 / 448:.6f} below OPT(2) = {opt[2]:.6f} "
        f"({881 / 448 / opt[2]:.2%} of it)"
    ) in text
    assert "  K=3: near_opt_bv 2.000000 = OPT(3)" in text


def test_json_only_adds_keys(default_report):
    old = json.loads(OLD_JSON.read_text())
    new = json.loads(json.dumps(default_report.to_json()))
    assert list(new) == [*old, "summary"]

    def same(a, b):  # LP optima are float64: equal within 1e-9, everything else exactly
        if isinstance(a, float) or isinstance(b, float):
            return isinstance(a, int | float) and isinstance(b, int | float) and abs(a - b) <= 1e-9
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
        return a == b

    for key in ("instance", "n", "L", "exact", "rows", "bounds", "multi_iteration"):
        assert same(old[key], new[key]), key
    for ledger in ("claims", "field_claims"):
        for a, b in zip(old[ledger], new[ledger], strict=True):
            assert list(b) == list(a)
            for field in ("key", "verdict", "witness", "values"):
                assert same(a[field], b[field]), (a["key"], field)
            # the prose may be reworded (no internal language), never the verdict or the values
            assert b["statement"] == a["statement"] or a["key"] == "never_below"
    s2 = new["summary"][1]
    assert s2["K"] == 2 and s2["best_without_oracle"]["method"] == "near_opt_bv"
    assert s2["best_without_oracle"]["expected_accepted"] == "881/448" and s2["best"]["method"] == "lp_oracle"


@pytest.mark.parametrize(
    "instance, ks, methods",
    [
        (random_instance(2, 1, 0), (1, 2, 3, 4, 5), None),  # --K 1-5: one block, the phrases beside it
        (random_instance(3, 2, 0, zero_prob=0.4), (1, 2, 3), None),  # the convergence witness
        (random_instance(2, 2, 0, exact=False), (1, 2, 3), None),  # a float64 instance
        (random_instance(2, 1, 0), tuple(range(1, 9)), ("sd", "mdbv", "spectr_gbv_released")),  # a second block
    ],
)
def test_every_view_fits_100_columns(instance, ks, methods):
    kw = {"methods": methods} if methods else {}
    rep = build_report(instance, ks, horizon=2, ledger="spectr_gbv", **kw)
    default = _fits(render(rep))
    _fits(render(rep, detail=True))
    header = next(line for line in default if line.startswith("method "))
    shown = re.findall(r"K=(\d+)", header)
    assert len(shown) == (len(ks) if len(ks) <= 5 else 5)  # five K columns fit beside the phrases
    if len(ks) > 5:
        assert sum(bool(re.match(r"method +K=", line)) for line in default) == 2
    if not instance.exact:  # float rounding is not a defect line; the legend says why
        assert not any(line.startswith("  defect") and "e-1" in line for line in default)
        assert "a defect within 1e-09 counts as 0" in " ".join(default)


def test_cli_detail_flag_and_footer(capsys):
    argv = ["report", "--random", "2,1,0", "--K", "1-5", "--horizon", "2", "--ledger", "spectr_gbv", "--quiet"]
    assert main([*argv, "--detail"]) == 0
    out = capsys.readouterr().out
    lines = _fits(out.rstrip("\n"))
    assert lines[-1].startswith("(computed in ") and "E[tokens] m=1" in out and "Exact values" in out
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "E[tokens] m=1" not in out and "Exact values" not in out and "Summary: " in out


def test_method_phrases_are_short():
    assert all(0 < len(m.summary) <= SUMMARY_MAX_LEN for m in METHOD_TABLE)


def test_claim_key_lines():
    c = Claim("k", "statement", "holds")
    assert c.key_lines() == []
    c.evidence.append("first")
    c.add("second", key=True)
    c.add("third")
    assert c.key_lines() == ["second"] and c.evidence == ["first", "second", "third"]
    assert c.to_json()["evidence"] == ["first", "second", "third"] and "key_evidence" not in c.to_json()
    assert Claim("k", "s", "holds", ["only"]).key_lines() == ["only"]


def test_guide_excerpt_is_what_the_report_prints(default_report):
    """Every line of docs/guide.md's excerpt of the report is a line of the default view."""
    guide = (Path(__file__).parents[2] / "docs" / "guide.md").read_text()
    passage = guide.split("### `spectr-gbv report`: the main job", 1)[1]
    block = passage.split("```\n", 2)[1]
    lines = set(render(default_report).split("\n"))
    shown = [line for line in block.split("\n") if line.strip()]
    assert len(shown) >= 15 and all(line in lines for line in shown), [x for x in shown if x not in lines]
