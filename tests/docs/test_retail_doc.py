"""docs/how-to/retail.md: its examples run, and the tables it shows are the desk's."""

from __future__ import annotations

import re

from paths import ROOT

from workflows import retail

PAGE = ROOT / "docs" / "how-to" / "retail.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_tables_shown_are_the_desks() -> None:
    shown: dict[str, object] = {}
    exec(compile(BLOCKS[0], str(PAGE), "exec"), shown)
    assert shown["TRANSITIONS"] == retail.TRANSITIONS
    assert shown["TOOLS_BY_STATE"] == retail.TOOLS_BY_STATE


def test_the_scripted_conversation_runs() -> None:
    assert len(BLOCKS) == 2
    exec(compile(BLOCKS[1], str(PAGE), "exec"), {"__name__": "retail_doc"})


def test_the_verify_section_counts_what_verify_proves() -> None:
    from fsm.auditor.verify import verify

    report = verify(retail.WORKFLOW)
    assert report.ok and f"proves {len(report.verdicts)} invariants" in PAGE.read_text()


def test_the_benchmarks_page_shows_the_committed_results() -> None:
    """docs/explanation/benchmarks.md quotes bench/taubench.md, the output of the last
    full run (make taubench): the same violation table, the same headline."""
    page = (ROOT / "docs" / "explanation" / "benchmarks.md").read_text()
    committed = (ROOT / "bench" / "taubench.md").read_text()
    table = committed.split("## Violations\n\n", 1)[1].split("\n\n", 1)[0]
    assert table in page
    assert "**114 of 114 tasks matched**" in committed and "114 of 114 tasks matched" in page


def test_the_confirming_section_lists_the_words_interpret_reads() -> None:
    """The yes, courtesy and no words the page lists are exactly those of ``interpret``."""
    from workflows.retail import workflow

    text = " ".join(PAGE.read_text().split())
    listed = {kind: {tuple(w.split()) for w in re.findall(
        r"`([^`]+)`", text.split(f" {kind}: ", 1)[1].split(".", 1)[0])}
        for kind in ("Yes", "Courtesy", "No")}
    assert listed == {"Yes": workflow.YES_PHRASES, "Courtesy": workflow.COURTESY_PHRASES,
                      "No": workflow.NO_PHRASES}
