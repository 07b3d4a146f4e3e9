"""The README's Hugging Face snippet runs as printed and prints its two result lines to stdout.

The code is read from README.md at test time (the first ``python`` block under "## Speculative
decoding with Hugging Face models") and run as it is. With the real model cached (or
SPECTR_GBV_REAL_MODEL=1) it runs on SmolLM2-135M-Instruct and the shipped draft; the other test
runs the same code with ``load_target`` / ``load_draft`` replaced by a tiny stand-in pair and
tokenizer, so the snippet's API use is checked on every run.
"""

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.gpu.tiny_models import unit_pair  # noqa: E402
from tests.realpair.real_model import real_model  # noqa: E402

README = Path(__file__).resolve().parents[2] / "README.md"
HEADING = "## Speculative decoding with Hugging Face models"
OUTPUT = re.compile(r"generated: (?P<text>'.*'|\".*\")\nblock efficiency: (?P<be>\d+\.\d\d) tokens per target call\n")


def readme_snippet() -> str:
    """The first python block after :data:`HEADING` in README.md."""
    text = README.read_text(encoding="utf-8")
    assert HEADING in text, f"README.md has no {HEADING!r} section"
    found = re.search(r"```python\n(.*?)```", text[text.index(HEADING) :], flags=re.S)
    assert found, f"no python block under {HEADING!r}"
    return found.group(1)


class StandInTokenizer:
    """Characters to ids modulo V and back (what the snippet calls: ``tok(text, return_tensors="pt")``, ``decode``)."""

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def __call__(self, text, return_tensors=None):
        ids = torch.tensor([[ord(c) % self.vocab_size for c in text]])
        return type("Encoding", (), {"input_ids": ids})()

    def decode(self, ids):
        return "".join(chr(ord("a") + int(i)) for i in ids)


def run_snippet(capsys) -> tuple[dict, str, str]:
    namespace: dict = {"__name__": "readme_snippet"}
    exec(compile(readme_snippet(), str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    out, err = capsys.readouterr()
    return namespace, out, err


def check_output(namespace: dict, out: str) -> None:
    ids, tokens, stats, tok = namespace["ids"], namespace["out"], namespace["stats"], namespace["tok"]
    assert tokens.shape == (len(ids) + 32,) and tokens[: len(ids)].tolist() == ids.tolist()
    assert stats.tokens_generated == 32 and 1.0 <= stats.block_efficiency <= 5.0  # K = 3 drafts of L = 4
    match = OUTPUT.fullmatch(out)
    assert match, f"the snippet printed {out!r}"
    assert match["text"] == repr(tok.decode(tokens[len(ids) :]))
    assert match["be"] == f"{stats.block_efficiency:.2f}"


def test_readme_snippet_runs_on_a_stand_in_pair(monkeypatch, capsys):
    from spectr_gbv.realpair.models import draft as draft_module
    from spectr_gbv.realpair.models import target as target_module

    V = 26
    target, draft = unit_pair(V)
    target.config.max_position_embeddings = draft.config.max_position_embeddings = 256
    monkeypatch.setattr(target_module, "load_target", lambda: (target, StandInTokenizer(V)))
    monkeypatch.setattr(draft_module, "load_draft", lambda t: draft if t is target else None)
    namespace, out, err = run_snippet(capsys)
    check_output(namespace, out)
    assert namespace["dec"].config.method == "mdbv"
    assert err == ""  # captured stderr is no terminal: no bar


@real_model
def test_readme_snippet_runs_on_the_real_pair(capsys):
    namespace, out, _ = run_snippet(capsys)
    check_output(namespace, out)
    assert namespace["stats"].scoring == "tree"
