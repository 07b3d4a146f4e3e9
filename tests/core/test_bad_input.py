"""Bad input at the core layer's entry points (TabularAR, Instance, random_instance, parse/load_instance).

The case machinery and the classes of bad input are in ``tests/bad_input_helpers.py``; the
catalogue of classes, with the messages asserted here, is docs/bad_input.md.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction as F
from typing import Any

import numpy as np
import pytest

from spectr_gbv.core import Instance, TabularAR, default_instance, load_instance, parse_instance, random_instance
from spectr_gbv.core.instance import MAX_INSTANCE_BYTES, DuplicateKeyError, InstanceTooLargeError
from spectr_gbv.theory import bounds
from tests.bad_input_helpers import (
    DEFAULT_JSON,
    INF,
    NAN,
    P3,
    TMP,
    Case,
    P,
    Q,
    duplicate_key_file,
    equals,
    err,
    json_file,
    msg,
    ok,
    params,
    run_case,
    write_file,
)


def _instance_json(**overrides: Any) -> dict[str, Any]:
    data = default_instance().to_dict()
    data.update(overrides)
    return data


def _bad_target_row(row: list[Any]) -> dict[str, Any]:
    data = default_instance().to_dict()
    data["target"] = dict(data["target"])
    data["target"]["0"] = row
    return data


def _sparse_file() -> str:
    path = TMP / "sparse.json"
    with path.open("wb") as fh:
        fh.truncate(MAX_INSTANCE_BYTES + 1)  # a sparse file: no disk used
    return str(path)


def _target_row(row: list[Any]) -> Any:
    return parse_instance({**DEFAULT_JSON, "target": {**DEFAULT_JSON["target"], "": row}})


def _b1(inst: Instance) -> Any:
    return bounds.cic_bound(inst.target, inst.draft, 1, inst.L)


CORE: list[Case] = [
    Case(
        "TabularAR",
        "nan",
        "NaN entry",
        lambda: TabularAR(2, {"": [NAN, 1.0]}, name="target"),
        err("target", "not finite"),
    ),
    Case(
        "TabularAR",
        "inf",
        "inf entry",
        lambda: TabularAR(2, {"": [INF, 0.0]}, name="target"),
        err("target", "not finite"),
    ),
    Case(
        "TabularAR",
        "negative",
        "negative entry",
        lambda: TabularAR(2, {"": ["-1/2", "3/2"]}, name="target"),
        err("target", "negative"),
    ),
    Case(
        "TabularAR",
        "unnormalised",
        "row sums to 11/10",
        lambda: TabularAR(2, {"": ["1/2", "3/5"]}, name="draft"),
        err("draft", "sums to 11/10"),
    ),
    Case(
        "TabularAR",
        "unnormalised",
        "float row off by 1e-6",
        lambda: TabularAR(2, {"": [0.5, 0.500001]}, name="draft"),
        err("draft", "sums to"),
    ),
    Case(
        "TabularAR",
        "wrong_shape",
        "row of 3 entries for n = 2",
        lambda: TabularAR(2, {"": ["1/3", "1/3", "1/3"]}, name="target"),
        err("target", "3 entries", "n = 2"),
    ),
    Case(
        "TabularAR",
        "wrong_shape",
        "missing prefix",
        lambda: TabularAR(2, {"": [1, 0], "0": [1, 0]}, name="target"),
        err("target", "missing law for prefix (1,)"),
    ),
    Case(
        "TabularAR",
        "wrong_shape",
        "empty vocabulary n = 0",
        lambda: TabularAR(0, {"": []}, name="target"),
        err("target", "n"),
    ),
    Case(
        "TabularAR",
        "id_out_of_range",
        "prefix token 2 with n = 2",
        lambda: TabularAR(2, {"": [1, 0], "2": [1, 0]}, name="target"),
        err("target", "outside the vocabulary"),
    ),
    Case(
        "TabularAR",
        "fp16",
        "float16 row that is exact in binary",
        lambda: TabularAR(2, {"": np.array([0.25, 0.75], dtype=np.float16)}, name="target").cond(()).tolist(),
        ok(equals([0.25, 0.75])),
    ),
    Case(
        "TabularAR",
        "fp16",
        "float16 row rounded off 1 (0.1 + 0.9 in fp16)",
        lambda: TabularAR(2, {"": np.array([0.1, 0.9], dtype=np.float16)}, name="target"),
        err("target", "sums to"),
    ),
    Case(
        "TabularAR",
        "wrong_type",
        "row given as a string",
        lambda: TabularAR(2, {"": "1/2,1/2"}, name="target"),
        err("target", "row"),
    ),
    Case(
        "TabularAR.from_levels",
        "wrong_shape",
        "level 1 of shape (3, 2)",
        lambda: TabularAR.from_levels([np.array([0.5, 0.5]), np.full((3, 2), 0.5)], name="draft"),
        err("draft", "levels[1]"),
    ),
    Case(
        "TabularAR.random",
        "L_huge",
        "depth 40 (2^41 rows)",
        lambda: TabularAR.random(2, 40, 0),
        err("depth"),
        timeout=2.0,
    ),
    Case(
        "random_instance",
        "L_huge",
        "L = 40",
        lambda: random_instance(2, 40, 0),
        err("L"),
        timeout=2.0,
    ),
    Case("random_instance", "L_zero", "L = 0", lambda: random_instance(2, 0, 0), err("L")),
    Case(
        "random_instance",
        "wrong_shape",
        "empty vocabulary n = 0",
        lambda: random_instance(0, 2, 0),
        err("n"),
    ),
    Case("Instance", "L_zero", "L = 0", lambda: Instance(P, Q, 0), err("L", ">= 1")),
    Case("Instance", "L_huge", "L = 100 on depth-2 tables", lambda: Instance(P, Q, 100), err("target", "L=100")),
    Case(
        "Instance",
        "vocab_mismatch",
        "n = 3 target, n = 2 draft",
        lambda: Instance(P3, Q, 2),
        err("vocabulary mismatch", "target", "draft"),
    ),
    Case(
        "Instance",
        "wrong_type",
        "target given as a dict",
        lambda: Instance({"": [1]}, Q, 2),  # type: ignore[arg-type]
        err("target", exc=(TypeError, ValueError)),
    ),
    Case(
        "parse_instance",
        "nan",
        "NaN in a target row",
        lambda: parse_instance(_bad_target_row([NAN, 1.0])),
        err("target", "not finite"),
    ),
    Case(
        "parse_instance",
        "inf",
        "inf in a target row",
        lambda: parse_instance(_bad_target_row([INF, 0.0])),
        err("target", "not finite"),
    ),
    Case(
        "parse_instance",
        "negative",
        "negative target entry",
        lambda: parse_instance(_bad_target_row(["-1", "2"])),
        err("target", "negative"),
    ),
    Case(
        "parse_instance",
        "unnormalised",
        "target row sums to 2",
        lambda: parse_instance(_bad_target_row([1, 1])),
        err("target", "sums to 2"),
    ),
    Case(
        "parse_instance",
        "wrong_shape",
        "target row of 3 entries",
        lambda: parse_instance(_bad_target_row(["1/3", "1/3", "1/3"])),
        err("target", "3 entries"),
    ),
    Case(
        "parse_instance",
        "vocab_mismatch",
        "n = 3 with rows of 2",
        lambda: parse_instance(_instance_json(n=3)),
        err("entries", "n = 3"),
    ),
    Case("parse_instance", "L_zero", "L = 0", lambda: parse_instance(_instance_json(L=0)), err("L")),
    Case(
        "parse_instance", "L_huge", "n = 2, L = 40", lambda: parse_instance(_instance_json(L=40)), err("L=40", "rows")
    ),
    Case(
        "parse_instance",
        "id_out_of_range",
        "prefix key '2'",
        lambda: parse_instance(_instance_json(target={**default_instance().to_dict()["target"], "2": [1, 0]})),
        err("target", "outside the vocabulary"),
    ),
    Case(
        "parse_instance", "wrong_type", "n given as a string", lambda: parse_instance(_instance_json(n="2")), err("n")
    ),
]



# ---------------------------------------------------------------------------- files and guards
CORE_GUARDS: list[Case] = [
    Case(
        "random_instance",
        "too_large",
        "n = 10**6, L = 1 (10**12 entries, few rows)",
        lambda: random_instance(10**6, 1, 0),
        msg(
            "n=1000000, L=1: 1000001000000 entries per table (~100.0 TB), above MAX_RANDOM_ENTRIES=10000000 "
            "(or MAX_RANDOM_ROWS=2000000 prefixes)"
        ),
        timeout=2.0,
    ),
    Case(
        "random_instance",
        "too_large",
        "n = 16, L = 5 (17.9M entries per table, 458 s through the CLI)",
        lambda: random_instance(16, 5, 0),
        msg(
            "n=16, L=5: 17895696 entries per table (~1.8 GB), above MAX_RANDOM_ENTRIES=10000000 "
            "(or MAX_RANDOM_ROWS=2000000 prefixes)"
        ),
        timeout=2.0,
    ),
    Case(
        "random_instance",
        "too_large",
        "L = 10**9 (the count itself must not be built)",
        lambda: random_instance(2, 10**9, 0),
        msg(
            "n=2, L=1000000000: over 4.6e18 entries per table (~461168601.8 TB), above MAX_RANDOM_ENTRIES=10000000 "
            "(or MAX_RANDOM_ROWS=2000000 prefixes)"
        ),
        timeout=2.0,
    ),
    Case(
        "random_instance",
        "nan",
        "zero_prob = nan (behaved as 0)",
        lambda: random_instance(2, 2, 0, zero_prob=NAN),
        msg("zero_prob must be a number in [0, 1], got nan"),
    ),
    Case(
        "random_instance",
        "bad_parameter",
        "zero_prob = 1.5",
        lambda: random_instance(2, 2, 0, zero_prob=1.5),
        msg("zero_prob must be a number in [0, 1], got 1.5"),
    ),
    Case(
        "random_instance",
        "bad_seed",
        "seed = -1 (numpy's message)",
        lambda: random_instance(2, 2, -1),
        msg("seed must be an int >= 0 or None, got -1"),
    ),
    Case(
        "random_instance",
        "bad_seed",
        "seed = '0'",
        lambda: random_instance(2, 2, "0"),
        msg("seed must be an int >= 0 or None, got '0'"),
    ),
    Case(
        "random_instance",
        "bad_seed",
        "seed = 1.5",
        lambda: random_instance(2, 2, 1.5),
        msg("seed must be an int >= 0 or None, got 1.5"),
    ),
    Case(
        "random_instance",
        "bad_parameter",
        "concentration = -1 (numpy's message)",
        lambda: random_instance(2, 2, 0, concentration=-1),
        msg("concentration must be a finite number > 0, got -1"),
    ),
    Case(
        "random_instance",
        "inf",
        "concentration = inf",
        lambda: random_instance(2, 2, 0, concentration=INF),
        msg("concentration must be a finite number > 0, got inf"),
    ),
    Case(
        "random_instance",
        "L_huge",
        "depth below L",
        lambda: random_instance(2, 2, 0, depth=1),
        msg("depth must be an int >= L = 2, got 1"),
    ),
    Case(
        "TabularAR.random",
        "bad_seed",
        "seed = -1",
        lambda: TabularAR.random(2, 1, -1),
        msg("seed must be an int >= 0 or None, got -1"),
    ),
    Case(
        "load_instance",
        "duplicate_key",
        'a second "" in target (silently changed B(1) from 13/8 to 57/40)',
        lambda: load_instance(duplicate_key_file()),
        msg(f'instance: {TMP}/dup.json: duplicate key ""', exc=DuplicateKeyError),
    ),
    Case(
        "load_instance",
        "bad_file",
        "/dev/zero (raw MemoryError)",
        lambda: load_instance("/dev/zero"),
        msg(
            f"instance: /dev/zero has over {MAX_INSTANCE_BYTES} bytes, above MAX_INSTANCE_BYTES={MAX_INSTANCE_BYTES}",
            exc=InstanceTooLargeError,
        ),
        timeout=5.0,
    ),
    Case(
        "load_instance",
        "too_large",
        "a file one byte over MAX_INSTANCE_BYTES",
        lambda: load_instance(_sparse_file()),
        msg(
            f"instance: {TMP}/sparse.json has {MAX_INSTANCE_BYTES + 1} bytes, above "
            f"MAX_INSTANCE_BYTES={MAX_INSTANCE_BYTES}",
            exc=InstanceTooLargeError,
        ),
    ),
    Case(
        "load_instance",
        "bad_file",
        "a binary file (UnicodeDecodeError without the file name)",
        lambda: load_instance(write_file("bin.json", b"\xff\xfe\x00\x01")),
        msg(f"instance: {TMP}/bin.json is not UTF-8 text (byte 0xff at offset 0)"),
    ),
    Case(
        "load_instance",
        "bad_file",
        "a directory",
        lambda: load_instance(TMP),
        msg(f"instance: cannot read {TMP}: it is a directory"),
    ),
    Case(
        "load_instance",
        "bad_file",
        "an empty file",
        lambda: load_instance(write_file("empty.json", "")),
        msg(f"instance: {TMP}/empty.json is not valid JSON (Expecting value: line 1 column 1 (char 0))"),
    ),
    Case(
        "load_instance",
        "bad_file",
        "a path with a NUL byte",
        lambda: load_instance("a\x00b.json"),
        msg("instance: cannot read a\\x00b.json: embedded null byte"),
    ),
    Case(
        "load_instance",
        "control_chars",
        "a missing non-UTF-8 path with an escape (surrogates, ANSI)",
        lambda: load_instance(os.fsdecode(b"/nonexistent/\xff\x1b[31m.json")),
        msg("instance: cannot read /nonexistent/\\udcff\\x1b[31m.json: No such file or directory"),
    ),
    Case(
        "load_instance",
        "bad_file",
        "a JSON array at the top level",
        lambda: load_instance(write_file("array.json", "[1, 2]")),
        msg(f"instance: top level must be a JSON object (in {TMP}/array.json)"),
    ),
    Case(
        "load_instance",
        "bad_file",
        "100000 nested arrays (RecursionError)",
        lambda: load_instance(write_file("deep.json", "[" * 100000 + "]" * 100000)),
        msg(
            f"instance: {TMP}/deep.json is not a usable JSON instance (maximum recursion depth exceeded while "
            "decoding a JSON array from a unicode string)"
        ),
    ),
    Case(
        "load_instance",
        "nan",
        "NaN literal in the file",
        lambda: load_instance(json_file("nan.json", target={**DEFAULT_JSON["target"], "": [NAN, 1.0]})),
        msg(f"target prefix (): probability nan is not finite (in {TMP}/nan.json)"),
    ),
    Case(
        "load_instance",
        "inf",
        "Infinity literal in the file",
        lambda: load_instance(json_file("inf.json", target={**DEFAULT_JSON["target"], "": [INF, 0.0]})),
        msg(f"target prefix (): probability inf is not finite (in {TMP}/inf.json)"),
    ),
    Case(
        "load_instance",
        "huge_number",
        "n with 5000 digits (int max-str-digits ValueError)",
        lambda: load_instance(
            write_file("hugeint.json", json.dumps(DEFAULT_JSON).replace('"n": 2', '"n": ' + "9" * 5000))
        ),
        msg(
            f"instance: {TMP}/hugeint.json is not a usable JSON instance (Exceeds the limit (4300 digits) for integer "
            "string conversion: value has 5000 digits; use sys.set_int_max_str_digits() to increase the limit)"
        ),
    ),
    Case(
        "load_instance",
        "L_huge",
        "L = 10**9 in the file (the row count itself hung)",
        lambda: load_instance(json_file("Lhuge.json", L=10**9)),
        msg(f"instance: n=2, L=1000000000 needs over 4.6e18 rows per model (limit 2000000) (in {TMP}/Lhuge.json)"),
        timeout=2.0,
    ),
    Case(
        "load_instance",
        "control_chars",
        "a name with ANSI escapes and a carriage return (escaped at load)",
        lambda: load_instance(json_file("ansi.json", name="evil\x1b[2J\x1b[31mred\r")).name,
        ok(equals("evil\\x1b[2J\\x1b[31mred\\r")),
    ),
    Case(
        "load_instance",
        "control_chars",
        "a Unicode name (kept as is)",
        lambda: load_instance(json_file("uni.json", name="θ-数-instance")).name,
        ok(equals("θ-数-instance")),
    ),
    Case(
        "parse_instance",
        "wrong_type",
        "a name given as an int (used as its str)",
        lambda: parse_instance({**DEFAULT_JSON, "name": 123}).name,
        ok(equals("123")),
    ),
    Case(
        "parse_instance",
        "wrong_type",
        "L given as the float 2.0",
        lambda: parse_instance({**DEFAULT_JSON, "L": 2.0}),
        msg("instance: L must be an int >= 1, got 2.0"),
    ),
    Case(
        "parse_instance",
        "id_out_of_range",
        'probability "1/0"',
        lambda: _target_row(["1/0", "1"]),
        msg("target prefix (): cannot parse probability '1/0'"),
    ),
    Case(
        "parse_instance",
        "too_large",
        'probability "1e-99999999" (a 10**8-digit integer)',
        lambda: _target_row(["1e-99999999", "1"]),
        msg("target prefix (): probability '1e-99999999' has an exponent beyond +-1000"),
        timeout=2.0,
    ),
    Case(
        "parse_instance",
        "too_large",
        "a probability string of 303 characters",
        lambda: _target_row(["1/2" + " " * 300, "1/2"]),
        msg("target prefix (): probability string of 303 characters (limit 200)"),
    ),
    Case(
        "parse_instance",
        "wrong_type",
        "booleans as probabilities",
        lambda: _target_row([True, False]),
        msg("target prefix (): probability True is a bool, not a number"),
    ),
    Case(
        "parse_instance",
        "unnormalised",
        'an entry "3/2" above 1 (with "-1/2")',
        lambda: _target_row(["3/2", "-1/2"]),
        msg("target prefix (): probability '3/2' is above 1"),
    ),
    Case(
        "parse_instance",
        "huge_number",
        "an int entry 10**400",
        lambda: _target_row([10**400, 0]),
        msg("target prefix (): probability (an int of 1329 bits) is above 1"),
    ),
    Case(
        "parse_instance",
        "wrong_type",
        'numbers as strings ("0.25", " 3/4 ") are exact',
        lambda: _b1(_target_row(["0.25", " 3/4 "])),
        ok(lambda v: (isinstance(v, F), v == _b1(_target_row([F(1, 4), F(3, 4)])))[0]),
    ),
    Case(
        "Instance",
        "L_huge",
        "a draft table too shallow for L",
        lambda: Instance(P, Q.truncate(0), 2),
        msg("draft needs laws at prefixes of length 0..L-1=1; it has depth 0"),
    ),
]


CASES = CORE + CORE_GUARDS


@pytest.mark.parametrize("case", params(CASES))
def test_bad_input(case: Case) -> None:
    """One entry point, one bad input: the documented error naming the argument, or the correct result."""
    run_case(case)
