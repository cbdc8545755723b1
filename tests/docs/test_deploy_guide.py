"""Every Python block of the deploy guide runs, and the commands it names exist.

A block whose first line is ``# continues`` runs after the blocks before it, in their
namespace, as in the README.
"""

from __future__ import annotations

import re

import pytest
from paths import ROOT

GUIDE = ROOT / "docs" / "how-to" / "deploys.md"
TEXT = GUIDE.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
CONTINUES = "# continues"


def test_the_guide_has_python_examples_that_tell_one_story() -> None:
    assert len(BLOCKS) >= 4
    assert not BLOCKS[0].startswith(CONTINUES)
    assert all(b.startswith(CONTINUES) for b in BLOCKS[1:])


def test_every_python_block_runs() -> None:
    namespace = {"__name__": "deploy_guide"}
    for i, source in enumerate(BLOCKS):
        exec(compile(source, f"{GUIDE}:block{i}", "exec"), namespace)


@pytest.mark.parametrize("command", sorted(set(re.findall(r"^\$ fsm ([\w-]+)", TEXT,
                                                          flags=re.M))))
def test_the_commands_it_shows_exist(command: str) -> None:
    from typer.main import get_command

    from fsm.cli import app

    assert command in get_command(app).commands  # type: ignore[attr-defined]
