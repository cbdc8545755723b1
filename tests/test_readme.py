"""Every Python block in the README runs, and the commands it names exist.

A block whose first line is ``# continues`` runs after the blocks before it, in their
namespace, so the README can tell one example in several steps.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
CONTINUES = "# continues"


def chain(i: int) -> list[str]:
    """Block ``i`` with the blocks it continues, first to last."""
    start = i
    while start > 0 and BLOCKS[start].startswith(CONTINUES):
        start -= 1
    return BLOCKS[start:i + 1]


@pytest.mark.parametrize("i", range(len(BLOCKS)), ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_python_block_runs(i: int) -> None:
    namespace = {"__name__": "readme"}
    for source in chain(i):
        exec(compile(source, str(README), "exec"), namespace)


def test_the_first_block_does_not_continue_anything() -> None:
    assert not BLOCKS[0].startswith(CONTINUES)


def test_the_authoring_section_names_every_parameter() -> None:
    """Each parameter of define_workflow and each ToolSpec field has a row of its own."""
    import dataclasses
    import inspect

    from fsm import ToolSpec, define_workflow

    text = README.read_text()
    section = text[text.index("## Writing a workflow"):text.index("## Running against")]
    rows = set(re.findall(r"^\| `(\w+)` \|", section, flags=re.M))
    params = set(inspect.signature(define_workflow).parameters)
    fields = {f.name for f in dataclasses.fields(ToolSpec)}
    assert params - rows == set(), "define_workflow parameters the README does not list"
    assert fields - rows == set(), "ToolSpec fields the README does not list"


def test_readme_names_the_two_commands() -> None:
    text = README.read_text()
    assert "make demo" in text and "make test" in text


def test_cli_commands_in_readme_exist() -> None:
    from typer.main import get_command

    from fsm.cli import app

    group = get_command(app)
    named = set(re.findall(r"^fsm (\w+)", README.read_text(), flags=re.M))
    assert named, "the README shows no fsm command"
    missing = named - set(group.commands)  # type: ignore[attr-defined]
    assert not missing, f"README names commands the CLI lacks: {sorted(missing)}"


def test_readme_mermaid_is_the_committed_diagram() -> None:
    mermaid = re.findall(r"```mermaid\n(.*?)```", README.read_text(), flags=re.S)
    committed = (README.parent / "diagrams" / "refund.mmd").read_text()
    assert mermaid == [committed], "README's Mermaid block is stale: paste diagrams/refund.mmd"
