"""The sweep grid: TOML and flags give the same grid, tasks rebuild their instances, bad grids fail in one line."""

import json

import pytest

from spectr_gbv.cli.main import main
from spectr_gbv.core.instance import default_instance, random_instance
from spectr_gbv.sweep.grid import FamilySpec, SweepGrid, build_instance, grid_from_args, load_grid_toml
from spectr_gbv.validate.battery import KINDS


def write(tmp_path, text, name="grid.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def instance_dir(tmp_path):
    folder = tmp_path / "insts"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(default_instance().to_dict()))
    (folder / "b.json").write_text(json.dumps(random_instance(2, 1, 3).to_dict()))
    (folder / "notes.txt").write_text("not an instance")
    return folder


def test_toml_and_flags_give_the_same_grid(tmp_path, instance_dir):
    path = write(
        tmp_path,
        """
methods = ["mdbv", "optimal_multidraft"]
K = "2-4"
measures = ["bounds", "opt"]
[[family]]
random = "3,2,0-99,0.3"
[[family]]
dir = "insts"
[[family]]
battery = true
""",
    )
    grid = load_grid_toml(path)
    flags = grid_from_args(
        random=["3,2,0-99,0.3"],
        instances=instance_dir,
        battery=True,
        methods="mdbv,optimal_multidraft",
        ks="2-4",
        measures="bounds,opt",
    )
    assert grid == flags
    assert grid.methods == ("mdbv", "optimal_multidraft")
    assert grid.ks == (2, 3, 4)
    assert grid.measures == ("tau", "bounds", "opt")  # tau is always on, order of MEASURES
    tasks = grid.tasks()
    assert len(tasks) == 100 + 2 + len(KINDS)
    assert [t.instance_id for t in tasks[:2]] == ["random:3,2,0,0.3", "random:3,2,1,0.3"]
    assert [t.instance_id for t in tasks[100:102]] == ["file:a", "file:b"]
    assert [t.instance_id for t in tasks[102:]] == [f"battery:{k}" for k in KINDS]
    assert tasks[0].keys() == {("random:3,2,0,0.3", m, k) for m in grid.methods for k in (2, 3, 4)}
    assert grid.num_rows() == len(tasks) * 2 * 3
    assert grid.to_dict()["family"][0] == {"random": "3,2,0-99,0.3"}


def test_tasks_rebuild_their_instances(instance_dir):
    grid = grid_from_args(random=["2,2,4-5"], instances=instance_dir, battery=True, methods="sd", ks=[1])
    by_id = {t.instance_id: t for t in grid.tasks()}
    assert build_instance(by_id["random:2,2,5,0"].spec).to_dict() == random_instance(2, 2, 5).to_dict()
    assert build_instance(by_id["file:a"].spec).to_dict()["target"] == default_instance().to_dict()["target"]
    wide = build_instance(by_id["battery:wide_tree"].spec)
    assert (wide.n, wide.L, wide.name) == (4, 1, "battery:wide_tree")


def test_defaults_and_k_forms():
    grid = grid_from_args(random=["2,1,0"])
    assert (grid.methods, grid.ks, grid.measures) == (("sd", "bv", "mdbv"), (1, 2), ("tau", "bounds"))
    assert grid_from_args(random=["2,1,0"], ks="1,3-4").ks == (1, 3, 4)
    assert grid_from_args(random=["2,1,0"], ks=[2, 2, 1]).ks == (2, 1)
    assert FamilySpec.random("2,1,7").seeds == (7, 7)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "family: the grid names no instance family (give random, dir or battery)"),
        ({"methods": "sd,nope"}, "methods: unknown method 'nope'; valid: "),
        ({"methods": ""}, "methods: the grid names no method"),
        ({"ks": "0,2"}, "K: values must be ints in 1..8, got '0,2'"),
        ({"ks": "9"}, "K: values must be ints in 1..8, got '9'"),
        ({"ks": "4-2"}, "K: range '4-2' is empty (write it low-high), got '4-2'"),
        ({"ks": "a"}, "K: expected comma-separated ints or a range (e.g. 2,3 or 2-4), got 'a'"),
        ({"measures": "tau,speed"}, "measures: unknown measure 'speed'; valid: tau, bounds, opt, ot"),
        ({"random": ["2,2,5-1"]}, "random: bad seed range '5-1' in '2,2,5-1' (need 0 <= first <= last)"),
        ({"random": ["2,2,x-3"]}, "random: bad seed range 'x-3' in '2,2,x-3' (expected 7 or 0-99)"),
        ({"random": ["2,2"]}, "random: expected n,L,seeds[,zero_prob] (e.g. 3,2,0-99,0.3), got '2,2'"),
        ({"random": ["0,2,1"]}, "random: need n >= 1 and L >= 1, got '0,2,1'"),
        ({"random": ["2,2,1,1.5"]}, "random: zero_prob must lie in [0, 1), got '2,2,1,1.5'"),
        ({"random": ["2,1,0-100000"]}, "family: the grid expands to 100001 instances, above MAX_TASKS=100000"),
        ({"instances": "/no/such/dir"}, "dir: no such directory '/no/such/dir'"),
    ],
)
def test_bad_flags(kwargs, message):
    kwargs = {"random": ["2,1,0"], **kwargs} if "random" not in kwargs and kwargs else kwargs
    with pytest.raises(ValueError) as info:
        grid_from_args(**kwargs)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_empty_instance_dir(tmp_path):
    with pytest.raises(ValueError, match=r"^dir: '.*' holds no \*\.json instance file$"):
        FamilySpec.directory(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('methods = ["sd"]\nspeed = 3\n', "unknown key 'speed'; valid: methods, K, measures, family"),
        ('[[family]]\nrandom = "2,1,0"\nseed = 3\n', "family: unknown key 'seed'; valid: random, dir, battery"),
        ('[[family]]\nrandom = "2,1,0"\nbattery = true\n', "family: each [[family]] gives exactly one of"),
        ("[[family]]\nbattery = 1\n", "battery: expected true, got 1"),
        ("[[family]]\nrandom = 3\n", 'random: expected a string such as "3,2,0-99,0.3", got 3'),
        ('[[family]]\ndir = "missing"\n', "dir: no such directory 'missing'"),
        ("K = [2, 9]\n[[family]]\nbattery = true\n", "K: values must be ints in 1..8, got [2, 9]"),
        ("K = true\n[[family]]\nbattery = true\n", "K: expected ints"),
        ('methods = ["sd", "zz"]\n[[family]]\nbattery = true\n', "methods: unknown method 'zz'"),
        ('measures = ["tau", "x"]\n[[family]]\nbattery = true\n', "measures: unknown measure 'x'"),
        ('methods = ["sd"]\n', "family: the grid names no instance family"),
        ("methods = [\n", "not valid TOML"),
    ],
)
def test_bad_toml(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as info:
        load_grid_toml(path)
    assert str(info.value).startswith(f"grid {path}: {message}")
    assert "\n" not in str(info.value)


def test_missing_toml(tmp_path):
    with pytest.raises(ValueError, match="cannot read it"):
        load_grid_toml(tmp_path / "none.toml")


def test_duplicate_instance_ids_across_folders(tmp_path, instance_dir):
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.json").write_text(json.dumps(random_instance(2, 1, 9).to_dict()))
    grid = SweepGrid((FamilySpec.directory(instance_dir), FamilySpec.directory(other)), methods=("sd",), ks=(1,))
    with pytest.raises(ValueError, match="family: two instances share the id 'file:a'"):
        grid.tasks()


def test_cli_bad_grid_is_a_one_line_usage_error(capsys, tmp_path):
    assert main(["sweep", "--random", "2,2,0-1", "--K", "12", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == "spectr-gbv sweep: error: K: values must be ints in 1..8, got '12'\n"
    assert main(["sweep", "--random", "2,2,0-1"]) == 2
    assert "--out DIR is required" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
