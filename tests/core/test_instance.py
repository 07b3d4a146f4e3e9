import json
from fractions import Fraction as F

import pytest

from spectr_gbv.core.instance import Instance, default_instance, load_instance, parse_instance
from spectr_gbv.core.tabular import TabularAR


def test_default_instance_is_section_7():
    inst = default_instance()
    assert (inst.n, inst.L, inst.exact) == (2, 2, True)
    assert inst.target.cond((0, 1)).tolist() == [F(1, 5), F(4, 5)]
    assert inst.draft.cond((1, 1)).tolist() == [F(1, 3), F(2, 3)]
    p, q = inst
    assert p is inst.target and q is inst.draft


def test_json_roundtrip(tmp_path):
    inst = default_instance()
    path = tmp_path / "i.json"
    path.write_text(json.dumps(inst.to_dict()))
    back = load_instance(path)
    assert back.target == inst.target and back.draft == inst.draft and back.L == 2


def test_draft_may_stop_at_depth_L_minus_1():
    data = default_instance().to_dict()
    data["draft"] = {k: v for k, v in data["draft"].items() if k.count(",") == 0}
    inst = parse_instance(data)
    assert inst.draft.depth == 1


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.pop("target"), "missing field 'target'"),
        (lambda d: d.update(n=0), "n must be a positive int"),
        (lambda d: d.update(L=0), "L must be an int >= 1"),
        (lambda d: d.update(L=3), r"target needs laws at prefixes of length 0..L=3"),
        (lambda d: d["target"].update({"0": ["1/2", "1/3"]}), r"target prefix \(0,\): row sums to 5/6"),
        (lambda d: d["draft"].pop("1"), r"draft: missing law for prefix \(1,\)"),
        (lambda d: d.update(n=3), "row has 2 entries, expected n = 3"),
    ],
)
def test_bad_instances(mutate, match):
    data = default_instance().to_dict()
    mutate(data)
    with pytest.raises(ValueError, match=match):
        parse_instance(data)


def test_file_errors(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        load_instance(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_instance(bad)


def test_vocabulary_mismatch_and_mixed_kinds():
    p = TabularAR.context_free(["1/2", "1/2"], 2)
    with pytest.raises(ValueError, match="vocabulary mismatch"):
        Instance(p, TabularAR.context_free(["1/3"] * 3, 2), 2)
    mixed = Instance(p, TabularAR.context_free([0.25, 0.75], 2), 2)
    assert not mixed.exact and not mixed.target.exact
