"""The conversation pages: every Python block runs, and what they quote of the command line
is what it prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_inproc import Cli
from paths import ROOT

PAGES = [ROOT / "docs" / "tutorial" / "conversation.md",
         ROOT / "docs" / "reference" / "conversations.md"]
CONTINUES = "# continues"


def blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def chained(page: Path, i: int) -> list[str]:
    found = blocks(page)
    start = i
    while start > 0 and found[start].startswith(CONTINUES):
        start -= 1
    return found[start:i + 1]


CASES = [(page, i) for page in PAGES for i in range(len(blocks(page)))]


@pytest.mark.parametrize("page, i", CASES, ids=[f"{p.parent.name}-{p.stem}-block{i}"
                                                for p, i in CASES])
def test_python_block_runs(page: Path, i: int) -> None:
    namespace = {"__name__": "docs"}
    for source in chained(page, i):
        exec(compile(source, str(page), "exec"), namespace)


def test_the_pages_have_code_and_link_each_other() -> None:
    tutorial, reference = (p.read_text() for p in PAGES)
    assert len(blocks(PAGES[0])) >= 5 and len(blocks(PAGES[1])) >= 1
    assert "../reference/conversations.md" in tutorial
    assert "../tutorial/conversation.md" in reference


def test_every_conversation_parameter_is_in_the_reference() -> None:
    import dataclasses
    import inspect

    from fsm import ToolSpec, define_workflow
    from fsm.definition.spec import HASHED_WHEN_SET

    text = PAGES[1].read_text()
    rows = set(re.findall(r"^\| `(\w+)` \|", text, flags=re.M))
    params = set(inspect.signature(define_workflow).parameters)
    # Tool servers are hashed when set too, and documented with the workflow's reference.
    conversation = set(HASHED_WHEN_SET) - {"servers"}
    assert conversation <= rows and set(HASHED_WHEN_SET) <= params
    assert {"confirmed_by", "always_emits"} <= rows & {f.name for f in dataclasses.fields(
        ToolSpec)}


def test_the_command_lines_quoted_in_the_tutorial_print_what_it_says(cli: Cli) -> None:
    text = PAGES[0].read_text()
    started = cli("run", "refund_chat", "My kettle arrived broken, I want my money back",
                  "--user", "asha", "--run-id", "k1")
    for line in started.out.splitlines()[1:]:  # the token differs every time
        assert line in text, line
    replied = cli("reply", "k1", "It is A-1001")
    for line in replied.out.splitlines():
        assert line in text, line
    for argv in (("reply", "k1", ""), ("reply", "k1", "thanks")):
        refused = cli(*argv)
        assert refused.code == 2 and refused.err.strip() in text, refused.err
