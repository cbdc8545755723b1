"""The documentation site: every Python and shell block in ``docs/`` runs, the reference
covers what it claims to, and the site builds with warnings as errors.

A block whose first line is ``# continues`` runs after the blocks before it on the same
page, in their namespace. The shell blocks of a page run in order, in one fresh folder,
with this environment's ``fsm`` first on ``PATH``. A block that is not meant to run says
so, with its reason, in an HTML comment on the line before it:
``<!-- no-run: needs a model server -->``.
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md"))
CONTINUES = "# continues"
RUNNABLE = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh",
            "console": "sh"}
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", flags=re.S | re.M)
NO_RUN = re.compile(r"<!--\s*no-run:\s*(\S[^>]*?)\s*-->\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    source: str
    #: Why it does not run, or ``None`` for a block that runs.
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(DOCS)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NO_RUN.search(before)
        found.append(Block(page, text.count("\n", 0, m.start()) + 1, m.group(1).lower(),
                           m.group(2), marker.group(1) if marker else None))
    return found


ALL = [b for p in PAGES for b in blocks(p)]
PYTHON = [b for b in ALL if RUNNABLE.get(b.lang) == "python" and b.skip is None]
SHELL_PAGES = sorted({b.page for b in ALL if RUNNABLE.get(b.lang) == "sh" and b.skip is None})


def chain(block: Block) -> list[Block]:
    """``block`` with the blocks of its page it continues, first to last."""
    page = [b for b in PYTHON if b.page == block.page]
    i = page.index(block)
    start = i
    while start > 0 and page[start].source.startswith(CONTINUES):
        start -= 1
    return page[start:i + 1]


def test_the_site_has_pages_and_blocks_that_run() -> None:
    assert len(PAGES) >= 20 and len(PYTHON) >= 15 and SHELL_PAGES


def test_every_block_that_does_not_run_says_why() -> None:
    """Python and shell blocks run unless marked; other languages (text, toml, json,
    mermaid) are shown, not run, and need no mark."""
    unlabelled = [b.name for b in ALL if not b.lang]
    assert not unlabelled, f"fenced blocks without a language: {unlabelled}"
    for b in ALL:
        if b.skip is not None:
            assert len(b.skip) > 10, f"{b.name}: say why the block does not run"


@pytest.mark.parametrize("block", PYTHON, ids=[b.name for b in PYTHON])
def test_python_block_runs(block: Block) -> None:
    first = chain(block)[0]
    assert not first.source.startswith(CONTINUES), f"{first.name} continues nothing"
    namespace = {"__name__": "docs"}
    for b in chain(block):
        # Padded so that a traceback names the page's own line numbers.
        exec(compile("\n" * b.line + b.source, str(b.page), "exec"), namespace)
    # A connection a block leaves open is reported by the block that opened it, not by
    # whichever later test the collector happens to run in.
    namespace.clear()
    gc.collect()


def commands(source: str) -> str:
    """A block as a shell script; in a session shown with ``$`` prompts, only the lines
    after a prompt (and their continuations) are commands, the rest their output."""
    lines = source.splitlines()
    if not any(line.startswith("$ ") for line in lines):
        return source
    out: list[str] = []
    going = False
    for line in lines:
        if line.startswith("$ "):
            out.append(line[2:])
        elif going:
            out.append(line)
        going = bool(out) and out[-1].endswith("\\") and (line.startswith("$ ") or going)
    return "\n".join(out)


@pytest.mark.parametrize("page", SHELL_PAGES, ids=[str(p.relative_to(DOCS)) for p in SHELL_PAGES])
def test_shell_blocks_run(page: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for b in blocks(page):
        if RUNNABLE.get(b.lang) != "sh" or b.skip is not None:
            continue
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", commands(b.source)],
                              cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{b.name} exited {done.returncode}:\n{done.stderr}"


# -- what the reference must cover -----------------------------------------------------------

def page(path: str) -> str:
    return (DOCS / path).read_text()


def test_every_define_workflow_parameter_and_toolspec_field_has_a_row() -> None:
    from fsm import ToolSpec, define_workflow

    text = page("reference/workflow.md")
    rows = set(re.findall(r"^\| `(\w+)` \|", text, flags=re.M))
    params = set(inspect.signature(define_workflow).parameters)
    fields = {f.name for f in dataclasses.fields(ToolSpec)}
    assert params - rows == set(), "define_workflow parameters the reference does not list"
    assert fields - rows == set(), "ToolSpec fields the reference does not list"


def test_every_environment_variable_read_has_a_row() -> None:
    """Every variable of :class:`fsm.Settings`, and every FSM_* and OPENAI_* name in the
    code, the workflows and the tests' fixtures."""
    from fsm.settings import variables

    sources = [*ROOT.joinpath("fsm").rglob("*.py"), *ROOT.joinpath("workflows").rglob("*.py"),
               ROOT / "tests" / "conftest.py"]
    read = {m for src in sources
            for m in re.findall(r"\b((?:FSM|OPENAI)_[A-Z][A-Z_]*[A-Z])\b", src.read_text())}
    read |= set(variables().values())
    rows = set(re.findall(r"^\| `(\w+)` \|", page("reference/environment.md"), flags=re.M))
    assert read - rows == set(), "variables the environment table does not list"
    assert rows - read == set(), "variables the table lists that nothing reads"


def test_every_exit_code_and_status_is_documented() -> None:
    from fsm.cli import exits
    from fsm.records import STATUSES

    codes = {int(c) for c in re.findall(r"^\| (\d+) \|", page("reference/exit-codes.md"),
                                        flags=re.M)}
    defined = {v for k, v in vars(exits).items() if k.isupper() and isinstance(v, int)}
    assert codes == defined
    rows = re.findall(r"^\| `(\w+)` \|", page("reference/statuses.md"), flags=re.M)
    assert sorted(rows) == sorted(STATUSES)


def test_every_fsm_command_the_pages_name_exists() -> None:
    from typer.main import get_command

    from fsm.cli import app

    group = get_command(app)
    shell = [b.source for b in ALL if RUNNABLE.get(b.lang) == "sh"]
    named = {m for text in shell for m in re.findall(r"^fsm ([a-z][\w-]*)", text, flags=re.M)}
    assert named, "the pages show no fsm command"
    missing = named - set(group.commands)  # type: ignore[attr-defined]
    assert not missing, f"pages name commands the CLI lacks: {sorted(missing)}"


def test_the_cli_reference_is_generated_from_every_command() -> None:
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        import cli as hook
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    text = hook.on_page_markdown(page("reference/cli.md"), None, None, None)
    assert hook.MARKER not in text
    for command in ("run", "resume", "approve", "deny", "serve", "worker", "users add",
                    "doctor", "workflows"):
        assert f"### `fsm {command}`" in text and f"Usage: fsm {command}" in text


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run([str(mkdocs), "build", "--strict", "-q", "-d", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "index.html").exists()
    cli = (tmp_path / "reference" / "cli" / "index.html").read_text()
    assert "Usage: fsm run" in cli
    engine = (tmp_path / "reference" / "engine" / "index.html").read_text()
    assert "Drives runs of one workflow against one store with one policy" in engine
    assert (tmp_path / "explanation" / "refund.svg").read_bytes() == \
        (ROOT / "diagrams" / "refund.svg").read_bytes()


def test_the_mermaid_on_the_diagrams_page_is_the_committed_diagram() -> None:
    mermaid = re.findall(r"```mermaid\n(.*?)```", page("explanation/diagrams.md"), flags=re.S)
    committed = (ROOT / "diagrams" / "refund.mmd").read_text()
    assert mermaid == [committed], "the Mermaid block is stale: paste diagrams/refund.mmd"
