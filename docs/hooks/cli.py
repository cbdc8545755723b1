"""MkDocs hooks: what the site takes from the project itself at build time.

- A page line ``<!-- fsm-help -->`` becomes one section per ``fsm`` command (and per
  subcommand of a group such as ``fsm users``), each with the text ``fsm COMMAND --help``
  prints, so the CLI reference cannot drift from the commands.
- The committed pictures the pages show (the refund diagram, the benchmark plot) are
  taken from where they are generated (``diagrams/``, ``bench/``), never copied by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
#: Site path -> the committed file it is.
PICTURES = {
    "explanation/refund.svg": ROOT / "diagrams" / "refund.svg",
    "explanation/peers.png": ROOT / "bench" / "peers.png",
}
MARKER = "<!-- fsm-help -->"


def _commands(group: Any, prefix: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name in sorted(group.commands):
        command = group.commands[name]
        if getattr(command, "hidden", False):
            continue
        path = f"{prefix} {name}"
        out.append((path, command))
        if hasattr(command, "commands"):
            out += _commands(command, path)
    return out


def _help(path: str, command: Any) -> str:
    ctx_class = type(command).context_class
    ctx = ctx_class(command, info_name=path, terminal_width=88, max_content_width=88)
    return str(command.get_help(ctx))


def cli_reference() -> str:
    """Every command's help, as Markdown sections."""
    from typer.main import get_command

    from fsm.cli import app

    root = get_command(app)
    parts = []
    for path, command in _commands(root, "fsm"):
        summary = (command.get_short_help_str(limit=200) or "").strip()
        parts.append(f"### `{path}`\n\n{summary}\n\n```text\n{_help(path, command)}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())


def on_files(files: Files, config: Any) -> Files:
    for uri, path in PICTURES.items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
