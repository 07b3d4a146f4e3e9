"""sweep.summary on a hand-made table: every number of the summary, the files and the plots."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction as F

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from spectr_gbv.sweep.schema import COLUMNS, arrow_schema  # noqa: E402
from spectr_gbv.sweep.summary import Summary, summarize  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
MD, OMD, SGR = "mdbv", "optimal_multidraft", "spectr_gbv_released"

# (instance, K) -> OPT, then E[tau] per method (exact strings). spectr_gbv_released is lossy
# (registry): its defect 1/4 is no violation and its larger E[tau] at (i2, 1) is never "best".
OPT = {("i1", 1): 2.0, ("i2", 1): 2.0, ("i3", 1): 1.0, ("i1", 2): 4.0, ("i2", 2): 4.0, ("i3", 2): 2.0}
E = {
    MD: {("i1", 1): "1", ("i2", 1): "3/2", ("i3", 1): "1", ("i1", 2): "2", ("i2", 2): "3", ("i3", 2): "1"},
    OMD: {("i1", 1): "2", ("i2", 1): "3/2", ("i3", 1): "1", ("i1", 2): "3", ("i2", 2): "1", ("i3", 2): "2"},
    SGR: {("i1", 1): "3/2", ("i2", 1): "7/4", ("i3", 1): "1/2", ("i1", 2): "5/2", ("i2", 2): "2", ("i3", 2): None},
}
# planted violations of a lossless method (exact defects)
DEFECT = {(OMD, "i2", 2): "1/8", (OMD, "i3", 1): "1/16"}


def _row(instance_id, method, k, e, defect, opt, *, error=None, exact=True):
    row = dict.fromkeys(COLUMNS)
    row.update(instance_id=instance_id, family="random", n=3, L=2, K=k, method=method, error=error)
    if error is None:
        row.update(expected_accepted=e, validity_defect=defect, opt=opt, seconds=0.0, package_version="0")
        row["expected_accepted_float"] = float(F(e)) if exact else float(e)
        if defect is not None:
            row["validity_defect_float"] = float(F(defect)) if exact else float(defect)
            row["lossless"] = row["validity_defect_float"] == 0
    return row


def _write(directory, rows, parts=2):
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(parts):
        table = pa.Table.from_pylist(rows[i::parts], schema=arrow_schema())
        pq.write_table(table, directory / f"part-{i}.parquet")
    return directory


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    rows = []
    for method, values in E.items():
        for (inst, k), e in values.items():
            if e is None:
                rows.append(_row(inst, method, k, None, None, None, error="ValueError: boom"))
            else:
                defect = "1/4" if method == SGR else DEFECT.get((method, inst, k), "0")
                rows.append(_row(inst, method, k, e, defect, OPT[(inst, k)]))
    return _write(tmp_path_factory.mktemp("sweep"), rows)


@pytest.fixture(scope="module")
def summary(sweep_dir):
    return summarize(sweep_dir)


def _cell(summary, method, k):
    (cell,) = [c for c in summary.cells if c["method"] == method and c["K"] == k]
    return cell


def test_counts_and_order(summary, sweep_dir):
    assert isinstance(summary, Summary)
    assert summary.directory == str(sweep_dir)
    assert (summary.rows, summary.rows_ok, summary.instances) == (18, 17, 3)
    assert summary.methods == (MD, SGR, OMD)  # the registry's stable order
    assert summary.ks == (1, 2)
    assert summary.errors == {MD: 0, SGR: 1, OMD: 0}
    assert [(c["method"], c["K"]) for c in summary.cells] == [(MD, 1), (MD, 2), (SGR, 1), (SGR, 2), (OMD, 1), (OMD, 2)]
    assert [(c["instances"], c["errors"], c["lossless"]) for c in summary.cells] == [
        (3, 0, True), (3, 0, True), (3, 0, False), (2, 1, False), (3, 0, True), (3, 0, True)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "method, k, n, mean, median, worst",
    [
        (MD, 1, 3, 0.75, 0.75, 0.5),
        (MD, 2, 3, 1.75 / 3, 0.5, 0.5),
        (SGR, 1, 3, 2.125 / 3, 0.75, 0.5),
        (SGR, 2, 2, 0.5625, 0.5625, 0.5),  # the failed row (i3, 2) is ignored
        (OMD, 1, 3, 2.75 / 3, 1.0, 0.75),
        (OMD, 2, 3, 2.0 / 3, 0.75, 0.25),
    ],
)
def test_ratio_to_opt(summary, method, k, n, mean, median, worst):
    r = _cell(summary, method, k)["ratio"]
    assert (r["n"], r["mean"], r["median"], r["worst"]) == (n, mean, median, worst)


def test_ratio_quantiles(summary):
    r = _cell(summary, MD, 1)["ratio"]  # ratios 1/2, 3/4, 1: linear quantiles
    assert r["q10"] == pytest.approx(0.55, rel=1e-15) and r["q90"] == pytest.approx(0.95, rel=1e-15)


@pytest.mark.parametrize(
    "method, k, n, mean, median, worst, excluded",
    [
        (MD, 1, 2, 0.0, 0.0, 0.0, 1),  # (i3, 1): mdbv reaches OPT = 1
        (MD, 2, 3, 0.0, 0.0, 0.0, 0),
        (SGR, 1, 2, 0.5, 0.5, 0.5, 1),
        (SGR, 2, 2, -0.375, -0.375, -1.0, 0),
        (OMD, 1, 2, 0.5, 0.5, 0.0, 1),
        (OMD, 2, 3, -0.5 / 3, 0.5, -2.0, 0),  # i1: 1/2, i2: (1 - 3) / (4 - 3) = -2, i3: 1
    ],
)
def test_gap_closure(summary, method, k, n, mean, median, worst, excluded):
    g = _cell(summary, method, k)["gap_closure"]
    assert (g["n"], g["mean"], g["median"], g["worst"], g["excluded"]) == (n, mean, median, worst, excluded)


def test_best_share_with_ties_and_lossy_excluded(summary):
    # K=1: i1 optimal_multidraft; i2 and i3 ties (1/2 each); the lossy method's 7/4 at i2 does not count
    assert _cell(summary, OMD, 1)["best"] == {"contested": 3, "wins": 2.0, "share": 2 / 3}
    assert _cell(summary, MD, 1)["best"] == {"contested": 3, "wins": 1.0, "share": 1 / 3}
    assert _cell(summary, OMD, 2)["best"] == {"contested": 3, "wins": 2.0, "share": 2 / 3}
    assert _cell(summary, MD, 2)["best"] == {"contested": 3, "wins": 1.0, "share": 1 / 3}
    assert _cell(summary, SGR, 1)["best"] is None and _cell(summary, SGR, 2)["best"] is None


def test_lossless_violations(summary):
    assert _cell(summary, OMD, 1)["violations"] == {
        "count": 1, "worst": {"instance_id": "i3", "K": 1, "defect": "1/16", "defect_float": 0.0625}
    }  # fmt: skip
    assert _cell(summary, OMD, 2)["violations"] == {
        "count": 1, "worst": {"instance_id": "i2", "K": 2, "defect": "1/8", "defect_float": 0.125}
    }  # fmt: skip
    assert _cell(summary, MD, 1)["violations"] == {"count": 0, "worst": None}
    assert _cell(summary, SGR, 1)["violations"] is None  # lossy by the registry: defect 1/4 is expected
    assert summary.violations == {
        MD: {"count": 0, "worst": None},
        OMD: {"count": 2, "worst": {"instance_id": "i2", "K": 2, "defect": "1/8", "defect_float": 0.125}},
    }


def test_monotonicity_claim_search(summary):
    assert summary.monotonicity == {
        MD: {"instances": 3, "failures": 0, "worst": None},  # i3: 1 -> 1 is no drop
        SGR: {"instances": 2, "failures": 0, "worst": None},  # i3 has one K left (K=2 failed)
        OMD: {
            "instances": 3,
            "failures": 1,
            "worst": {"instance_id": "i2", "K_from": 1, "K_to": 2, "drop": 0.5, "drop_exact": "1/2"},
        },
    }


def test_float_instances_unknown_method_and_no_opt(tmp_path):
    rows = [  # float64 instance: reprs, tolerances 1e-9; opt not measured
        _row("f1", MD, 1, "2.0", "1e-12", None, exact=False),
        _row("f1", MD, 2, "1.5", "2e-09", None, exact=False),
        _row("f1", MD, 3, "1.0", None, None, exact=False),
        _row("f1", "my_rule", 1, "2.5", "0.0", None, exact=False),
        _row("f1", "my_rule", 2, repr(2.5 - 1e-12), "0.0", None, exact=False),
    ]
    s = summarize(_write(tmp_path / "f", rows, parts=1))
    assert s.methods == (MD, "my_rule")
    assert _cell(s, MD, 1)["ratio"] == {"n": 0, "mean": None, "median": None, "worst": None, "q10": None, "q90": None}
    assert _cell(s, MD, 1)["gap_closure"]["n"] == 0 and _cell(s, MD, 1)["gap_closure"]["excluded"] == 0
    assert s.violations[MD] == {
        "count": 1,
        "worst": {"instance_id": "f1", "K": 2, "defect": "2e-09", "defect_float": 2e-9},
    }
    # a name nobody knows claims nothing: never credited as lossless (its 2.5 does not beat mdbv's 2.0)
    assert _cell(s, "my_rule", 1)["best"] is None and s.rules["my_rule"]["credited"] is False
    assert _cell(s, MD, 1)["best"] == {"contested": 1, "wins": 1.0, "share": 1.0}
    assert s.monotonicity[MD]["worst"] == {"instance_id": "f1", "K_from": 1, "K_to": 3, "drop": 1.0, "drop_exact": None}
    assert s.monotonicity["my_rule"] == {"instances": 1, "failures": 0, "worst": None}  # drop 1e-12 < 1e-9


def test_empty_directory(tmp_path):
    s = summarize(tmp_path)
    assert (s.rows, s.instances, s.methods, s.cells) == (0, 0, (), ())
    assert "0 rows" in s.to_markdown()


def test_markdown_tables(summary, sweep_dir):
    md = summary.to_markdown()
    assert md.startswith(f"# Sweep summary: {sweep_dir}\n")
    assert "18 rows (17 ok, 1 failed), 3 instances" in md
    for title in ("E[tau] / OPT", "Gap closure over mdbv", "Best among lossless", "Lossless violations",
                  "E[tau] decreasing in K", "Errors"):  # fmt: skip
        assert f"\n## {title}" in md
    assert "| mdbv | 1 | 3 | 3 | 0.750000 | 0.750000 | 0.500000 | 0.550000 | 0.950000 |" in md
    # gap closures -2, 1/2, 1: numpy linear quantiles q10 = -3/2, q90 = 9/10
    assert "| optimal_multidraft | 2 | 3 | -0.166667 | 0.500000 | -2.000000 | -1.500000 | 0.900000 | 0 |" in md
    assert "| optimal_multidraft | 1 | 3 | 2 | 0.666667 |" in md
    assert "| optimal_multidraft | 2 | 1 | i2 (K=2) | 1/8 = 0.125000 |" in md  # as display_value prints it
    assert "| optimal_multidraft | 3 | 1 | i2 (K=1 -> 2) | 1/2 = 0.500000 |" in md
    assert "| spectr_gbv_released | 1 |" in md.split("## Errors")[1]


def test_json_round_trip(summary):
    data = summary.to_json()
    assert list(data) == ["directory", "baseline", "rows", "rows_ok", "instances", "methods", "K", "errors",
                          "cells", "violations", "monotonicity", "rules"]  # fmt: skip
    assert json.loads(json.dumps(data)) == data
    assert list(data["cells"][0]) == ["method", "K", "lossless", "instances", "errors", "ratio", "gap_closure",
                                      "best", "violations"]  # fmt: skip


def test_write_files_and_plots(summary, sweep_dir, tmp_path):
    out = tmp_path / "out"
    s = summarize(sweep_dir, out, baseline=MD)
    assert sorted(p.name for p in out.iterdir()) == ["gap_closure.png", "summary.json", "summary.md", "tau_vs_k.png"]
    assert json.loads((out / "summary.json").read_text()) == summary.to_json()
    assert (out / "summary.md").read_text() == s.to_markdown()
    for name in ("gap_closure.png", "tau_vs_k.png"):
        data = (out / name).read_bytes()
        assert data[:8] == PNG and len(data) > 1000
    assert s.gap_values[OMD] == (1.0, 0.0, 0.5, -2.0, 1.0)


def test_no_plots_imports_no_matplotlib(sweep_dir, tmp_path):
    code = (
        "import sys; from spectr_gbv.sweep.summary import summarize; "
        f"summarize({str(sweep_dir)!r}, {str(tmp_path)!r}, plots=False); "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json", "summary.md"]


def test_summaries_never_go_into_the_dataset(sweep_dir, tmp_path):
    from spectr_gbv.sweep.summary import check_summary_dir, default_summary_dir

    assert default_summary_dir(sweep_dir) == sweep_dir.resolve().with_name(sweep_dir.name + "-summary")
    assert default_summary_dir(tmp_path / "runs" / "field") == (tmp_path / "runs" / "field-summary").resolve()
    before = sorted(p.name for p in sweep_dir.iterdir())
    for out in (sweep_dir, sweep_dir / "plots", sweep_dir / "a" / ".." / "b"):
        with pytest.raises(ValueError, match="is inside the dataset folder"):
            summarize(sweep_dir, out)
        with pytest.raises(ValueError, match="is inside the dataset folder"):
            check_summary_dir(sweep_dir, out)
    s = summarize(sweep_dir)
    with pytest.raises(ValueError, match="is inside the dataset folder"):
        s.write(sweep_dir, plots=False)
    assert sorted(p.name for p in sweep_dir.iterdir()) == before  # nothing written into it
    check_summary_dir(sweep_dir, sweep_dir.with_name(sweep_dir.name + "2"))  # a sibling with a longer name is fine
    assert [p.name for p in s.write(tmp_path / "beside", plots=False)] == ["summary.md", "summary.json"]


def test_cli_default_summary_folder(sweep_dir, capsys):
    from spectr_gbv.cli.main import main

    assert main(["sweep", "summarize", str(sweep_dir), "--no-plots", "--baseline", MD]) == 0
    captured = capsys.readouterr()
    beside = sweep_dir.resolve().with_name(sweep_dir.name + "-summary")
    assert captured.out.startswith(f"# Sweep summary: {sweep_dir}\n")
    assert (beside / "summary.md").read_text() == captured.out.rstrip("\n") + "\n"
    assert json.loads((beside / "summary.json").read_text())["rows"] == 18
    assert captured.err == f"spectr-gbv sweep summarize: summary files written to {beside}\n"
    assert main(["sweep", "summarize", str(sweep_dir), "--out", str(sweep_dir), "--no-plots", "--quiet"]) == 2
    assert "is inside the dataset folder" in capsys.readouterr().err
