"""The generation interface: signature check and output reading."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from spectr_gbv.validate.generation.interface import (
    BadOutput,
    check_interface_name,
    check_signature,
    load_generate,
    read_batch,
    read_output,
)
from tests.validate.generation import loops_for_tests as loops


def test_a_correct_signature_passes():
    check_signature(loops.ancestral)
    check_signature(loops.wrong_temperature)  # **kwargs takes the keywords

    def extra(target, draft, prompt_ids, max_new_tokens, *, temperature, top_k, top_p, seed, gamma=3):
        return []

    check_signature(extra, "generation_batched")


def test_a_missing_keyword_is_named():
    with pytest.raises(ValueError, match=r"no_seed.*cannot be called as generate\(.*\): no keyword parameter seed"):
        check_signature(loops.no_seed)


def test_too_few_positional_parameters_are_named():
    def short(target, prompt_ids, *, temperature, top_k, top_p, seed):
        return []

    with pytest.raises(ValueError, match="2 positional parameters where 4 are passed"):
        check_signature(short)


def test_a_required_extra_parameter_is_refused():
    def needs_more(target, draft, prompt_ids, max_new_tokens, gamma, *, temperature, top_k, top_p, seed):
        return []

    with pytest.raises(ValueError, match="missing a required argument: 'gamma'"):
        check_signature(needs_more)


def test_not_callable_and_unknown_interface():
    with pytest.raises(ValueError, match="generate: expected a callable"):
        check_signature(3)
    with pytest.raises(ValueError, match="interface: expected one of generation, generation_batched, got 'chain'"):
        check_interface_name("chain")


@pytest.mark.parametrize(
    "out",
    [[1, 2, 3], (1, 2, 3), np.array([1, 2, 3], dtype=np.int32), torch.tensor([1, 2, 3]), np.array([[1, 2, 3]])],
)
def test_outputs_read_as_int64(out: Any):
    got = read_output(out, 3, 8)
    assert got.dtype == np.int64 and got.tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    "out, message",
    [
        ([1, 2], "2 token ids, expected max_new_tokens = 3"),
        ([1, 2, 8], "token id 8 at position 2 is outside the vocabulary [0, 8)"),
        ([-1, 2, 3], "token id -1 at position 0 is outside the vocabulary"),
        (np.array([0.5, 1.0, 2.0]), "ids of dtype float64, expected integers"),
        ([1, None, 3], "entry 1 is None, not an integer token id"),
        ("abc", "a str, expected a list, numpy array or torch tensor"),
        (np.zeros((2, 3), dtype=np.int64), "shape (2, 3), expected (3,)"),
    ],
)
def test_bad_outputs_are_named(out: Any, message: str):
    with pytest.raises(BadOutput) as info:
        read_output(out, 3, 8)
    assert message in str(info.value)


def test_batch_outputs():
    got = read_batch([[1, 2], np.array([3, 4])], 2, 2, 8)
    assert got.tolist() == [[1, 2], [3, 4]]
    assert read_batch(torch.tensor([[1, 2], [3, 4]]), 2, 2, 8).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(BadOutput, match="1 outputs for a batch of 2 prompts"):
        read_batch([[1, 2]], 2, 2, 8)
    with pytest.raises(BadOutput, match="row 1: token id 9"):
        read_batch([[1, 2], [3, 9]], 2, 2, 8)


def test_load_generate_paths():
    fn = load_generate("tests.validate.generation.loops_for_tests:ancestral", isolation="thread")
    assert fn is loops.ancestral
    with pytest.raises(ValueError, match="bad verifier path"):
        load_generate("nocolon")
    with pytest.raises(ValueError, match="unknown adapter"):
        load_generate("no-such-adapter")
