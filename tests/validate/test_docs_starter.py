"""docs/validate.md opens with a verifier to copy: it must pass ``validate`` at budget quick, as the page says.

The first ``python`` block of the page is the starter; the first plain block after it is the
report's opening lines the page shows. Both are read from the page, so the page cannot drift.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from spectr_gbv.validate import validate

PAGE = Path(__file__).resolve().parents[2] / "docs" / "validate.md"


def _blocks(text: str) -> list[tuple[str, str]]:
    """Fenced blocks of ``text`` in order: (language, body)."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w*)\n(.*?)```", text, flags=re.S)]


def _starter() -> tuple[Any, list[str], str]:
    text = PAGE.read_text()
    first_screen = text.split("\n## ", 2)[1]  # the "Start here" section
    blocks = _blocks(first_screen)
    code = next(body for lang, body in blocks if lang == "python")
    shown = next(body for lang, body in blocks if lang == "").splitlines()
    ns: dict[str, Any] = {"__name__": "my_verify"}
    exec(compile(code, "docs/validate.md", "exec"), ns)
    return ns["verify"], shown, first_screen


def test_the_starter_is_short_and_comes_first() -> None:
    _, shown, first_screen = _starter()
    code = next(body for lang, body in _blocks(first_screen) if lang == "python")
    assert first_screen.startswith("Start here: a verifier to copy")
    assert len(code.strip().splitlines()) <= 20
    assert "spectr-gbv validate my_verify:verify --budget quick" in first_screen
    assert "spectr-gbv validate spectr_gbv.examples.textbook_sd:verify --budget quick" in first_screen
    assert "python -m spectr_gbv.examples.textbook_sd" in first_screen
    assert shown[0].endswith(": PASSED") and shown[1].startswith("Verdict: PASSED (exit 0)")


def test_the_starter_passes_at_quick_with_the_lines_the_page_shows() -> None:
    verify, shown, _ = _starter()
    report = validate(verify, budget="quick", seed=0, quiet=True)
    assert report.passed and report.exit_code == 0, report.to_text()
    assert {c.name for c in report.advisories} == {"placeholder_ids[zero_rows]", "placeholder_ids[copied_rows]"}
    text = report.to_text()
    got = text.splitlines()
    assert got[0] == shown[0].replace("my_verify:verify", report.verifier)
    for line in shown[1:]:  # the law line is shown up to "(...)"
        want = line.split(" (...)")[0]
        assert any(g.startswith(want) for g in got), (want, text)
    # a passing report reads with no alarming word: the advisory part says "note" / "ok"
    assert "FAIL" not in text and "Traceback" not in text


def test_python_m_textbook_sd_validates_the_shipped_function_by_its_name(monkeypatch, capsys) -> None:
    """``python -m spectr_gbv.examples.textbook_sd`` runs ``validate(verify, budget="quick")`` on the module's
    own ``verify`` (not ``__main__:verify``), prints the report and returns its exit status."""
    import spectr_gbv.validate as V
    from spectr_gbv.examples import textbook_sd

    seen: dict[str, Any] = {}

    class _Report:
        exit_code = 3

        def to_text(self) -> str:
            return "the report"

    def fake(verify: Any, **kw: Any) -> _Report:
        seen.update(verify=verify, **kw)
        return _Report()

    monkeypatch.setattr(V, "validate", fake)
    assert textbook_sd.main() == 3
    assert seen == {"verify": textbook_sd.verify, "budget": "quick"}
    assert capsys.readouterr().out == "the report\n"
