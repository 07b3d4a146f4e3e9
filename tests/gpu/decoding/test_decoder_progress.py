"""The progress bar of ``SpeculativeDecoder.generate``: stderr only, counts tokens, never changes the output."""

import io

import pytest
import tqdm

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from spectr_gbv.gpu import SpeculativeDecoder  # noqa: E402
from tests.gpu.tiny_models import unit_pair  # noqa: E402

V, PROMPT, N = 5, [1, 2, 3], 12


@pytest.fixture(scope="module")
def models():
    return unit_pair(V)


def decode(models, **kwargs):
    target, draft = models
    dec = SpeculativeDecoder(target, draft, method="mdbv", num_drafts=2, draft_length=3, seed=0, device="cpu")
    return dec.generate(PROMPT, max_new_tokens=N, **kwargs)


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class EveryUpdate(tqdm.tqdm):
    """tqdm redrawing on every update (the real bar redraws at most every 0.1 s)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "mininterval": 0.0, "miniters": 1})


def test_progress_true_writes_a_token_bar_to_stderr_only(models, capsys, monkeypatch):
    quiet_ids, quiet_stats = decode(models, progress=False)
    assert capsys.readouterr() == ("", "")
    monkeypatch.setattr(tqdm, "tqdm", EveryUpdate)
    ids, stats = decode(models, progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "generate" in err and f"/{N} " in err and f"{N}/{N}" in err  # the total, then every token counted
    assert f"BE {stats.block_efficiency:.2f}" in err  # the last postfix is the run's block efficiency
    assert ids.tolist() == quiet_ids.tolist()  # the bar never touches the generator
    assert stats.accepted_hist == quiet_stats.accepted_hist


def test_progress_none_is_silent_off_a_terminal_and_when_quiet(models, capsys, monkeypatch):
    decode(models)  # captured stderr is not a terminal
    assert capsys.readouterr() == ("", "")
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setenv("SPECTR_GBV_QUIET", "1")
    decode(models)
    assert terminal.getvalue() == ""


def test_progress_none_on_a_terminal_waits_before_showing(models, monkeypatch):
    from spectr_gbv.gpu.decoding import decoder

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.delenv("SPECTR_GBV_QUIET", raising=False)
    monkeypatch.setattr(decoder, "PROGRESS_DELAY", 3600.0)  # a call shorter than the delay prints nothing
    decode(models)
    assert terminal.getvalue() == ""
    monkeypatch.setattr(decoder, "PROGRESS_DELAY", 0.0)
    decode(models)
    assert f"generate:   0%|          | 0/{N} " in terminal.getvalue()


@pytest.mark.parametrize("bad", [1, "yes", 0.5])
def test_progress_must_be_a_bool_or_none(models, bad):
    with pytest.raises(ValueError, match=r"^progress must be True, False or None, got "):
        decode(models, progress=bad)


def test_progress_counts_every_row_of_a_batch_up_to_its_total(models, capsys, monkeypatch):
    target, draft = models
    monkeypatch.setattr(tqdm, "tqdm", EveryUpdate)
    dec = SpeculativeDecoder(target, draft, method="mdbv", num_drafts=2, draft_length=3, seed=0, device="cpu")
    dec.generate([PROMPT, [3, 2, 1]], max_new_tokens=N, progress=True)
    err = capsys.readouterr().err
    assert f"{2 * N}/{2 * N}" in err and f"{2 * N + 1}/" not in err  # the tail past N is not counted
