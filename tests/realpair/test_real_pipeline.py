"""Smoke tests of the real-model path: the shipped distilled draft, ``spectr-gbv bench`` and the law test.

Opt-in like ``test_real_model_smoke`` (SPECTR_GBV_REAL_MODEL=1, set in CI; or the model is
already cached).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.cli.main import main  # noqa: E402
from tests.realpair.real_model import real_model  # noqa: E402

pytestmark = real_model

CODE = 'def is_palindrome(text: str) -> bool:\n    """Return True if text reads the same backwards."""\n'
SOLUTION = "    cleaned = [c.lower() for c in text if c.isalnum()]\n    return cleaned == cleaned[::-1]\n"


@pytest.fixture(scope="module")
def pair():
    from spectr_gbv.realpair.models.draft import load_draft
    from spectr_gbv.realpair.models.target import load_target

    target, tok = load_target(progress=False)
    return target, load_draft(target), tok


def test_distilled_draft_beats_the_truncation_it_started_from(pair):
    from spectr_gbv.realpair.models.draft import acceptance_rate, truncated_draft

    target, draft, tok = pair
    prompt = tok(CODE)["input_ids"]
    seq = torch.tensor(prompt + tok(SOLUTION)["input_ids"])
    got = acceptance_rate(target, draft, [seq], [len(prompt)], 1.0)
    base = acceptance_rate(target, truncated_draft(target, draft.config.num_hidden_layers), [seq], [len(prompt)], 1.0)
    assert got.positions == seq.numel() - len(prompt)
    assert 0.9 <= got.draft_coverage <= 1.0
    assert got.alpha > base.alpha + 0.05, (got, base)
    logits = draft(input_ids=seq[None, :4]).logits
    assert logits.shape == (1, 4, 49152) and int(torch.isfinite(logits[0, 0]).sum()) == 8192


def test_law_of_the_first_token_on_the_real_pair(pair):
    from spectr_gbv.realpair.real_lossless import first_tokens_law_test

    target, draft, tok = pair
    prompt = torch.tensor(tok(CODE)["input_ids"])
    res = first_tokens_law_test(target, draft, prompt, "mdbv", 2, 2, 0.7, 200, 1, 0)
    assert res.runs == 200 and res.bins >= 2
    assert res.p_value > res.alpha, res


def test_bench_cli_on_one_short_prompt(tmp_path, capsys):
    out = tmp_path / "bench"
    argv = [
        "bench",
        "--datasets",
        "humaneval",
        "--prompts",
        "1",
        "--max-new-tokens",
        "12",
        "--methods",
        "sd,mdbv",
        "--K",
        "3",
        "--L",
        "4",
        "--T",
        "0.7",
        "--no-lossless",
        "--quiet",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    res = json.loads((out / "results.json").read_text())
    rows = {(r["method"], r["num_drafts"]): r for r in res["rows"]}
    assert set(rows) == {("ar", 1), ("sd", 1), ("mdbv", 3)}
    assert rows[("ar", 1)]["block_efficiency"] == 1.0
    for r in rows.values():
        assert r["tokens_generated"] == 12 and 1.0 <= r["block_efficiency"] <= 5.0
    assert res["peer"] and res["predictions"] and not res["errors"]
    assert (out / "runs.csv").is_file() and (out / "summary.md").is_file()
    assert "BE" in capsys.readouterr().out


def test_real_pair_scores_token_trees_with_the_flat_laws(pair):
    """Both real models pass the tree-attention probe, and the target laws of a tree equal flat scoring's."""
    import copy

    from spectr_gbv.gpu import DecodeStats, SpeculativeDecoder, supports_tree_attention

    target, draft, tok = pair
    assert supports_tree_attention(target) and supports_tree_attention(draft)
    dec = SpeculativeDecoder(target, draft, method="mdbv", num_drafts=4, draft_length=3, temperature=0.7, seed=1)
    stats = DecodeStats("mdbv", 4, 3)
    with torch.no_grad():
        cache, pending = dec._prefill(torch.tensor([tok(CODE)["input_ids"]]), stats)
        drafts, _ = dec.draft.propose(4, 3, dec.config.sampling, dec.generator)
        p_tree, _ = dec._score_tree(copy.deepcopy(cache), pending, drafts, stats)
        p_flat, _ = dec._score_flat(cache, pending, drafts, stats)
    assert stats.target_positions < 2 * 4 * 4  # the tree scored fewer positions than flat did
    assert float((p_tree - p_flat).abs().max()) < 1e-4  # float32 noise of other shapes (measured 4.5e-6)
