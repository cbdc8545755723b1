"""The README is a front page: short, its blocks run, and its links lead into the site.

A block whose first line is ``# continues`` runs after the blocks before it, in their
namespace. The shell block other than the two ``make`` commands runs in a fresh folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

README = ROOT / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
SHELL = re.findall(r"```sh\n(.*?)```", TEXT, flags=re.S)
CONTINUES = "# continues"
#: About 12 KB: a front page, not a manual.
MAX_BYTES = 12_500


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
    assert BLOCKS and not BLOCKS[0].startswith(CONTINUES)


def test_the_readme_is_a_front_page() -> None:
    assert len(TEXT.encode()) <= MAX_BYTES


def test_readme_names_the_two_commands() -> None:
    assert "make demo" in TEXT and "make test" in TEXT
    assert SHELL[0].split("\n")[:2] == [
        "make demo    # the refund demo on a fresh SQLite file",
        "make test    # the test suite"]


def test_the_shell_example_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for block in SHELL[1:]:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "audit ok: r2" in done.stdout


def test_every_link_into_the_site_leads_to_a_page() -> None:
    links = re.findall(r"\]\((docs/[^)#]+)", TEXT)
    assert len(links) >= 20
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, f"README links to pages that do not exist: {missing}"
    nav = (ROOT / "mkdocs.yml").read_text()
    assert all(link.removeprefix("docs/") in nav for link in links)


def test_cli_commands_in_readme_exist() -> None:
    from typer.main import get_command

    from fsm.cli import app

    group = get_command(app)
    named = set(re.findall(r"^fsm (\w+)", TEXT, flags=re.M))
    assert named, "the README shows no fsm command"
    missing = named - set(group.commands)  # type: ignore[attr-defined]
    assert not missing, f"README names commands the CLI lacks: {sorted(missing)}"
