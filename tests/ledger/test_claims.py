import json

from spectr_gbv.core.instance import default_instance
from spectr_gbv.ledger import claims


def test_claims_ledger_on_section_7():
    ledger = {c.key: c for c in claims.claims_ledger(default_instance(), (1, 2, 3))}
    assert list(ledger) == [
        "monotone_bound",
        "convergence",
        "k1_reduction",
        "attains_bound",
        "lossless",
        "optimal",
    ]
    assert ledger["monotone_bound"].verdict == claims.HOLDS
    assert ledger["convergence"].verdict == claims.CONDITIONAL
    assert ledger["convergence"].values == {"limit": "2", "L": 2, "covers": True}
    assert ledger["convergence"].witness["L"] == 2  # a non-covering witness was found
    assert ledger["k1_reduction"].verdict == claims.HOLDS
    assert ledger["attains_bound"].verdict == claims.FAILS
    assert ledger["attains_bound"].values["1"] == {"B": "13/8", "released": "13/8"}
    assert ledger["lossless"].verdict == claims.FAILS
    assert ledger["lossless"].values["1"] == "1/18" and ledger["lossless"].values["2"] == "66211/1122000"
    assert ledger["lossless"].witness["L"] == 1
    assert ledger["optimal"].verdict == claims.FAILS
    assert abs(ledger["optimal"].values["2"]["opt"] - 71 / 36) < 1e-8
    json.loads(claims.ledger_json(list(ledger.values())))


def test_verdicts_follow_the_code_under_test(monkeypatch):
    # a released rule that were lossless would flip the verdict on this instance
    from spectr_gbv.simulate import methods

    real = methods.simulate_method

    def fake(instance, method, k):
        return real(instance, "mdbv" if method == "spectr_gbv_released" else method, k)

    monkeypatch.setattr(claims, "simulate_method", fake)
    monkeypatch.setattr(claims, "WITNESS_SEARCH_LIMIT", 3)
    ledger = {c.key: c for c in claims.claims_ledger(default_instance(), (1, 2))}
    assert ledger["lossless"].verdict == claims.HOLDS and ledger["lossless"].witness is None


def test_witness_reproduce_commands_rebuild_the_witness(capsys):
    from spectr_gbv.cli.main import main

    ledger = {c.key: c for c in claims.claims_ledger(default_instance(), (1,))}
    line = next(e for e in ledger["lossless"].evidence if e.startswith("reproduce: "))
    argv = line.removeprefix("reproduce: spectr-gbv ").split() + ["--horizon", "0", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n"] == ledger["lossless"].witness["n"] and data["L"] == 1
    row = next(r for r in data["rows"] if r["method"] == "spectr_gbv_released")
    assert row["K"] == 2 and row["validity_defect"] != "0"
