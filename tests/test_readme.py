"""Every Python block in the README runs, and the commands it names exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("source", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_python_block_runs(source: str) -> None:
    exec(compile(source, str(README), "exec"), {"__name__": "readme"})


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
