"""The ready generation adapters' registry: names, attributes, signatures, refusals (no model runs)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from spectr_gbv.validate.generation.adapters import ADAPTERS, adapter_names, resolve_adapter
from spectr_gbv.validate.generation.adapters.common import ADAPTER_ATTRIBUTES, GENERATION_INTERFACES
from spectr_gbv.validate.generation.adapters.hf_assisted import AssistedSettings
from spectr_gbv.validate.generation.adapters.spectr_decoder import (
    DECODER_LOSSLESS_METHODS,
    RELEASED_METHOD,
    SINGLE_PATH_METHODS,
)

GENERATION_PARAMS = ["target", "draft", "prompt_ids", "max_new_tokens", "temperature", "top_k", "top_p", "seed"]
KEYWORD_ONLY = {"temperature", "top_k", "top_p", "seed"}


def test_every_adapter_has_the_interface_signature_and_attributes():
    for name, fn in ADAPTERS.items():
        params = inspect.signature(fn).parameters
        assert list(params) == GENERATION_PARAMS, name
        kinds = {p: params[p].kind for p in params}
        assert {p for p, k in kinds.items() if k is inspect.Parameter.KEYWORD_ONLY} == KEYWORD_ONLY, name
        for attr in ADAPTER_ATTRIBUTES:
            assert hasattr(fn, attr), (name, attr)
        assert fn.interface in GENERATION_INTERFACES
        assert fn.adapter_name == name
        assert fn.family in ("hf-assisted", "spectr-decoder") and name.startswith(fn.family)
        assert fn.description and "\n" not in fn.description
        assert fn.deterministic is (name != "hf-assisted:usd"), name
        assert fn.uses_draft is (name not in ("hf-assisted:usd", "spectr-decoder:ar", "spectr-decoder-batched:ar"))
        assert (fn.interface == "generation_batched") == name.startswith("spectr-decoder-batched:"), name


def test_registry_covers_every_path_and_method():
    names = set(ADAPTERS)
    for n in (
        "hf-assisted",
        "hf-assisted:heuristic",
        "hf-assisted:heuristic_transient",
        "hf-assisted:confidence",
        "hf-assisted:usd",
    ):
        assert n in names
    for method in DECODER_LOSSLESS_METHODS:
        assert f"spectr-decoder:{method}" in names
        assert f"spectr-decoder-batched:{method}" in names
        for mode in ("tree", "flat"):
            expected = method not in SINGLE_PATH_METHODS
            assert (f"spectr-decoder:{method}:{mode}" in names) == expected
            assert (f"spectr-decoder-batched:{method}:{mode}" in names) == expected
    assert len(ADAPTERS) == 57


def test_lossy_controls_are_marked_and_not_lossless():
    assert adapter_names(lossless=False) == ("hf-assisted:ensemble", "spectr-decoder:released")
    assert ADAPTERS["hf-assisted:ensemble"].settings.ensemble_weight == 0.5
    assert ADAPTERS["spectr-decoder:released"].method == RELEASED_METHOD
    assert "LOSSY" in ADAPTERS["hf-assisted:ensemble"].description
    assert "LOSSY" in ADAPTERS["spectr-decoder:released"].description
    assert len(adapter_names(lossless=True)) == 55


def test_adapter_names_filter_by_interface():
    batched = adapter_names(interface="generation_batched")
    assert len(batched) == 24 and all(n.startswith("spectr-decoder-batched:") for n in batched)
    assert len(adapter_names(interface="generation")) == 33
    with pytest.raises(ValueError, match="interface must be one of generation, generation_batched, got 'hf'"):
        adapter_names(interface="hf")


@pytest.mark.parametrize("bad", ["x", "hf-assisted:prompt-lookup", "spectr-decoder:mdbv:bogus", 3, None])
def test_unknown_adapter_message_lists_the_known_names(bad):
    with pytest.raises(ValueError) as err:
        resolve_adapter(bad)
    msg = str(err.value)
    assert msg.startswith(f"unknown adapter {bad!r}; known: hf-assisted, hf-assisted:constant-1, ")
    assert msg.endswith("spectr-decoder:released")
    assert "spectr-decoder-batched:near_opt_bv:flat" in msg


def test_resolve_returns_the_registered_function():
    fn = resolve_adapter("spectr-decoder:mdbv:tree")
    assert fn is ADAPTERS["spectr-decoder:mdbv:tree"]
    assert (fn.method, fn.num_drafts, fn.draft_length, fn.scoring) == ("mdbv", 2, 3, "tree")
    assert resolve_adapter("spectr-decoder:sd").num_drafts == 1
    assert resolve_adapter("hf-assisted:heuristic").settings == AssistedSettings("heuristic", 5, 0.0)


def test_decoder_method_lists_match_the_decoder():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from spectr_gbv.gpu.decoding.decoder import LOSSLESS_METHODS, LOSSY_METHODS, SINGLE_DRAFT_METHODS

    assert DECODER_LOSSLESS_METHODS == LOSSLESS_METHODS
    assert LOSSY_METHODS == (RELEASED_METHOD,)
    assert set(SINGLE_PATH_METHODS) == {"ar", *SINGLE_DRAFT_METHODS}


def test_importing_the_registry_imports_neither_torch_nor_transformers():
    code = (
        "import sys; import spectr_gbv.validate.generation.adapters as a; "
        "print(len(a.ADAPTERS), 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["57", "False", "False"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"temperature": 0.0}, "temperature must be a finite number > 0, got 0.0"),
        ({"temperature": float("nan")}, "temperature must be a finite number > 0, got nan"),
        ({"top_k": -1}, r"top_k must be an int >= 0 \(0 = off\), got -1"),
        ({"top_p": 0.0}, r"top_p must be a number in \(0, 1\] \(1.0 = off\), got 0.0"),
        ({"top_p": 1.5}, r"top_p must be a number in \(0, 1\] \(1.0 = off\), got 1.5"),
        ({"seed": -1}, r"seed must be an int in 0..2\*\*63 - 1, got -1"),
        ({"seed": 1.5}, r"seed must be an int in 0..2\*\*63 - 1, got 1.5"),
        ({"max_new_tokens": 0}, "max_new_tokens must be an int >= 1, got 0"),
        ({"prompt_ids": "hello"}, "prompt_ids must be token ids, got str; tokenize the text first"),
        ({"prompt_ids": []}, "prompt_ids must be a non-empty sequence of token ids, got list"),
        ({"prompt_ids": [1, -2]}, r"prompt_ids\[1\] must be a token id \(an int >= 0\), got -2"),
    ],
)
@pytest.mark.parametrize("name", ["hf-assisted", "hf-assisted:usd", "spectr-decoder:mdbv"])
def test_bad_arguments_are_refused_naming_the_argument(name, kwargs, message):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    call = dict(prompt_ids=[1, 2], max_new_tokens=3, temperature=1.0, top_k=0, top_p=1.0, seed=0)
    call.update(kwargs)
    prompt, n = call.pop("prompt_ids"), call.pop("max_new_tokens")
    model = object()  # never reached: the checks come first
    with pytest.raises(ValueError, match=message):
        resolve_adapter(name)(model, model, prompt, n, **call)


def test_batched_adapter_names_the_bad_row():
    pytest.importorskip("torch")
    fn = resolve_adapter("spectr-decoder-batched:mdbv")
    kw = dict(temperature=1.0, top_k=0, top_p=1.0, seed=0)
    with pytest.raises(ValueError, match=r"prompt_ids\[1\] must be token ids, got str"):
        fn(None, None, [[1, 2], "ab"], 3, **kw)
    with pytest.raises(ValueError, match=r"prompt_ids must be a non-empty list of prompts"):
        fn(None, None, [], 3, **kw)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schedule": "adaptive"}, "schedule must be one of constant, heuristic, heuristic_transient, got 'adaptive'"),
        ({"num_assistant_tokens": 0}, "num_assistant_tokens must be an int >= 1, got 0"),
        ({"confidence_threshold": 1.0}, r"confidence_threshold must lie in \[0, 1\), got 1.0"),
        ({"ensemble_weight": 1.0}, r"ensemble_weight must be None or lie in \(0, 1\), got 1.0"),
    ],
)
def test_assisted_settings_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AssistedSettings(**kwargs)
