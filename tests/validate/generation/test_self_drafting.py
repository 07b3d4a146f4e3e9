"""The ``self_drafting`` kernel interface: signature and output checks, the loop, verdicts and the CLI."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spectr_gbv.cli.main import main
from spectr_gbv.testing.mutants.kernel_loops import gumbel_chain_kernel, shared_stream_kernel
from spectr_gbv.validate.generation.interface import BadOutput
from spectr_gbv.validate.generation.kernel_driver import validate_self_drafting
from spectr_gbv.validate.generation.plan import build_plan
from spectr_gbv.validate.generation.self_drafting import (
    KernelJob,
    check_kernel_signature,
    check_num_draft_tokens,
    read_kernel_output,
    row_seed,
)
from spectr_gbv.validate.isolation.guard import CallGuard

KERNELS = "spectr_gbv.testing.mutants.kernel_loops"


# ------------------------------------------------------------------------------ kernels used below
def emits_drafts_wrongly(draft_logits, target_logits, *, num_draft_tokens, last_tokens, positions, seeds, temperature):
    """Returns a first token that is not the draft followed by more tokens."""
    B = int(seeds.shape[0])
    drafted = torch.zeros(B, 0, dtype=torch.int64)
    for _ in range(num_draft_tokens):
        drafted = torch.cat([drafted, draft_logits(drafted).argmax(-1, keepdim=True)], 1)
    target_logits(drafted)
    out = torch.full((B, num_draft_tokens + 1), -1, dtype=torch.int64)
    out[:, 0] = (drafted[:, 0] + 1) % 8
    out[:, 1] = drafted[:, 1]
    return out


def never_verifies(draft_logits, target_logits, *, num_draft_tokens, last_tokens, positions, seeds, temperature):
    """Never calls target_logits."""
    return torch.zeros(int(seeds.shape[0]), num_draft_tokens + 1, dtype=torch.int64)


def raises(draft_logits, target_logits, *, num_draft_tokens, last_tokens, positions, seeds, temperature):
    """Raises on every call."""
    raise RuntimeError("kernel exploded")


def wrong_signature(draft_logits, target_logits, seeds):
    """Not the interface's signature."""
    return seeds


# ------------------------------------------------------------------------------ interface checks
def test_signature_and_draft_length_are_checked():
    check_kernel_signature(gumbel_chain_kernel)
    with pytest.raises(ValueError, match=r"kernel: cannot be called as kernel\(draft_logits, target_logits, \*, "):
        check_kernel_signature(wrong_signature)
    with pytest.raises(ValueError, match="kernel: expected a callable"):
        check_kernel_signature(3)
    assert check_num_draft_tokens(np.int64(3)) == 3
    for bad in (0, 9, 2.0, True, "2"):
        with pytest.raises(ValueError, match=r"num_draft_tokens: expected an int in \[1, 8\]"):
            check_num_draft_tokens(bad)


def test_row_seeds_are_in_range_and_distinct():
    seeds = [row_seed(s) for s in range(1000)]
    assert all(0 <= s < 2**31 for s in seeds) and len(set(seeds)) == 1000
    assert row_seed(7) == row_seed(7)


@pytest.mark.parametrize(
    "out, message",
    [
        (np.zeros((2, 2), dtype=np.int64), r"expected int \[2, 3\], got int64 \[2, 2\]"),
        (np.zeros((2, 3)), r"expected int \[2, 3\], got float64"),
        (np.array([[-1, -1, -1], [1, -1, -1]]), r"row 0: no token emitted"),
        (np.array([[1, -1, 2], [1, -1, -1]]), r"row 0: a token after the -1 padding"),
        (np.array([[1, -1, -1], [8, -1, -1]]), r"row 1: token id outside \[0, 8\)"),
        (np.array([[1, 3, -1], [1, -1, -1]]), r"row 0: emitted \[1, 3\] but drafted \[2, 3\]"),
    ],
)
def test_bad_outputs_are_named(out, message):
    drafted = np.array([[2, 3], [1, 4]])
    with pytest.raises(BadOutput, match=message):
        read_kernel_output(out, 2, 2, 8, drafted)


def test_good_output_is_read_per_row():
    drafted = np.array([[2, 3], [1, 4]])
    got = read_kernel_output(torch.tensor([[2, 3, 5], [6, -1, -1]]), 2, 2, 8, drafted)
    assert [g.tolist() for g in got] == [[2, 3, 5], [6]]


def test_the_loop_feeds_contexts_positions_and_seeds():
    """Rows grow by what they emitted; positions are context lengths; the seed of a row is fixed."""
    plan = build_plan("quick", interface="generation", pairs=["far"], m=None, max_new_tokens=None)
    pair = plan.pairs["far"]
    models = {"far": {"target": pair.target, "draft": pair.draft, "alt_draft": pair.alt_draft, "vocab_size": 8}}
    seen = []

    def one_token(draft_logits, target_logits, *, num_draft_tokens, last_tokens, positions, seeds, temperature):
        drafted = torch.zeros(len(seeds), 0, dtype=torch.int64)
        for _ in range(num_draft_tokens):
            drafted = torch.cat([drafted, draft_logits(drafted).argmax(-1, keepdim=True)], 1)
        logits = target_logits(drafted)
        seen.append((positions.tolist(), seeds.tolist(), last_tokens.tolist(), tuple(logits.shape), temperature))
        out = torch.full((len(seeds), num_draft_tokens + 1), -1, dtype=torch.int64)
        out[:, 0] = logits[:, 0].argmax(-1)
        return out

    job = KernelJob(one_token, models, CallGuard(60, isolation="thread"), num_draft_tokens=3)
    prompt = tuple(plan.scenarios[0].scenario.prompt)
    toks, bad, _ = job.run("far", "draft", prompt, 2, {"temperature": 0.7, "top_k": 0, "top_p": 1.0}, [5, 6])
    assert bad is None and toks.shape == (2, 2) and job.rounds == 2
    n = len(prompt)
    assert seen[0][0] == [n, n] and seen[1][0] == [n + 1, n + 1]
    assert seen[0][1] == [row_seed(5), row_seed(6)] == seen[1][1]
    assert seen[0][2] == [prompt[-1]] * 2 and seen[1][2] == toks[:, 0].tolist()
    assert seen[0][3] == (2, 4, 8) and seen[0][4] == 0.7


# ------------------------------------------------------------------------------ verdicts
def test_a_correct_kernel_passes_quick():
    rep = validate_self_drafting(gumbel_chain_kernel, budget="quick", quiet=True)
    assert rep.passed and rep.interface == "self_drafting"
    assert rep.settings["num_draft_tokens"] == 2 and rep.settings["rows_per_call"] == 512
    assert rep.settings["calls_per_scenario"] == {"close,p1,T=0.5,m=2": 383, "far,p1,T=0.7,top_k=3,m=2": 330}
    assert "requests (kernel rows)" in rep.to_text()


def test_a_kernel_that_emits_non_drafts_is_a_bad_output():
    rep = validate_self_drafting(emits_drafts_wrongly, budget="quick", quiet=True, isolation="thread")
    runs = next(c for c in rep.checks if c.name == "runs")
    assert not rep.passed and runs.diagnosis == "bad_output"
    assert "the tokens before the last must be the accepted drafts" in runs.detail


def test_a_kernel_that_never_verifies_and_one_that_raises_are_reported():
    rep = validate_self_drafting(never_verifies, budget="quick", quiet=True, isolation="thread")
    runs = next(c for c in rep.checks if c.name == "runs")
    assert runs.diagnosis == "bad_output" and "without calling target_logits" in runs.detail
    rep = validate_self_drafting(raises, budget="quick", quiet=True, isolation="thread")
    runs = next(c for c in rep.checks if c.name == "runs")
    assert runs.diagnosis == "raises" and "kernel exploded" in runs.detail


def test_bad_arguments_raise_one_line():
    with pytest.raises(ValueError, match="rows_per_call: expected an int >= 1, got 0"):
        validate_self_drafting(gumbel_chain_kernel, rows_per_call=0)
    with pytest.raises(ValueError, match="num_draft_tokens"):
        validate_self_drafting(gumbel_chain_kernel, num_draft_tokens=0)
    with pytest.raises(ValueError, match="kernel: cannot be called"):
        validate_self_drafting(wrong_signature)


def test_the_shared_stream_bug_is_lossy_on_its_first_token():
    """The #54282 mechanism: on 'close' at T = 0.5 the first token's law is off by a TV of about 0.03."""
    plan = build_plan("standard", interface="generation", pairs=["close"], m=1, max_new_tokens=None)
    sc = plan.scenarios[0]
    models = {
        "close": {
            "target": plan.pairs["close"].target,
            "draft": plan.pairs["close"].draft,
            "alt_draft": plan.pairs["close"].alt_draft,
            "vocab_size": 8,
        }
    }
    law = np.zeros(8)
    for k, v in sc.law.items():
        law[k[0]] += v
    tvs = {}
    for kernel in (gumbel_chain_kernel, shared_stream_kernel):
        job = KernelJob(kernel, models, CallGuard(600, isolation="thread"), num_draft_tokens=2)
        kw = sc.scenario.settings_kwargs()
        toks, bad, _ = job.run("close", "draft", sc.scenario.prompt, 1, kw, list(range(4000)))
        freq = np.bincount(toks[:, 0], minlength=8) / len(toks)
        tvs[kernel.__name__] = 0.5 * np.abs(freq - law).sum()
    # sampling noise of the TV estimate at N = 4000 over 6 tokens: about 0.01
    assert tvs["gumbel_chain_kernel"] < 0.015 and tvs["shared_stream_kernel"] > 0.025  # measured: 0.011, 0.035


# ------------------------------------------------------------------------------ CLI
def test_cli_runs_a_kernel_and_rejects_options_of_other_interfaces(capsys):
    args = ["validate", f"{KERNELS}:gumbel_chain_kernel", "--interface", "self_drafting", "--budget", "quick"]
    assert main([*args, "--pairs", "far", "--num-draft-tokens", "3", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Validation of {KERNELS}:gumbel_chain_kernel (interface self_drafting, budget quick")
    assert "num_draft_tokens: 3" in out
    assert main([*args, "--num-draft-tokens", "0", "--quiet"]) == 2
    assert "num_draft_tokens: expected an int in [1, 8], got 0" in capsys.readouterr().err
    assert main([*args, "--max-new-tokens", "4", "--quiet"]) == 2
    assert "--max-new-tokens does not apply to --interface self_drafting" in capsys.readouterr().err
    generation = ["validate", "tests.validate.generation.loops_for_tests:ancestral", "--interface", "generation"]
    assert main([*generation, "--num-draft-tokens", "2", "--quiet"]) == 2
    assert "--num-draft-tokens applies to --interface self_drafting only" in capsys.readouterr().err
    assert main(["validate", "x:y", "--rows-per-call", "3"]) == 2
    assert "--rows-per-call applies to --interface generation / generation_batched / self_drafting only" in (
        capsys.readouterr().err
    )
