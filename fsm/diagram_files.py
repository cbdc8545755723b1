"""Regenerate a workflow's committed diagrams and verification report.

``python -m fsm.diagram_files refund diagrams`` (``make diagrams``) writes
``refund.dot``, ``refund.svg``, ``refund.mmd``, ``refund.md`` and
``refund-verification.md``; ``--check`` only reports the files that differ from
what the tables produce now. The SVG embeds the SHA-256 of the DOT it was rendered
from, so its freshness can be checked without Graphviz.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

from fsm.diagram import extract
from fsm.diagram_render import dot_sha256, to_dot, to_image, to_markdown, to_mermaid
from fsm.errors import FSMError
from fsm.spec import WorkflowSpec
from fsm.verify import verify

SVG_STAMP = re.compile(rb"<!-- fsm: dot-sha256 ([0-9a-f]{64}) -->")


def text_files(spec: WorkflowSpec) -> dict[str, bytes]:
    """File name → contents of every generated file that needs no Graphviz program."""
    d = extract(spec)
    return {
        f"{spec.name}.dot": to_dot(d).encode(),
        f"{spec.name}.mmd": to_mermaid(d).encode(),
        f"{spec.name}.md": to_markdown(d).encode(),
        f"{spec.name}-verification.md": verify(spec).markdown().encode(),
    }


def svg_name(spec: WorkflowSpec) -> str:
    return f"{spec.name}.svg"


def render_svg(spec: WorkflowSpec) -> bytes:
    """The SVG, rendered by Graphviz's ``dot`` (raises if it is not installed)."""
    return to_image(to_dot(extract(spec)), "svg")


def svg_dot_hash(svg: bytes) -> str | None:
    """The DOT hash an SVG written by fsm carries, or ``None``."""
    m = SVG_STAMP.search(svg)
    return m.group(1).decode() if m else None


def stale(spec: WorkflowSpec, directory: Path) -> list[str]:
    """Names of the committed files that differ from what the tables produce now."""
    out = []
    for name, data in text_files(spec).items():
        path = directory / name
        if not path.exists() or path.read_bytes() != data:
            out.append(name)
    svg = directory / svg_name(spec)
    want = dot_sha256(to_dot(extract(spec)))
    if not svg.exists() or svg_dot_hash(svg.read_bytes()) != want:
        out.append(svg.name)
    return out


def write_atomic(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, _mode(path))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _mode(path: Path) -> int:
    """The mode an ordinary new file gets (or the existing file's)."""
    if path.exists():
        return path.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_all(spec: WorkflowSpec, directory: Path) -> list[Path]:
    """Write every file; the SVG last, so a missing Graphviz leaves the text files done."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in text_files(spec).items():
        write_atomic(directory / name, data)
        written.append(directory / name)
    write_atomic(directory / svg_name(spec), render_svg(spec))
    written.append(directory / svg_name(spec))
    return written


def main(argv: list[str] | None = None) -> int:
    from fsm.registry import load_workflow

    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if len(args) != 2:
        print("usage: python -m fsm.diagram_files WORKFLOW DIRECTORY [--check]", file=sys.stderr)
        return 2
    try:
        spec = load_workflow(args[0])
        directory = Path(args[1])
        if check:
            old = stale(spec, directory)
            for name in old:
                print(f"stale: {directory / name} (run: make diagrams)", file=sys.stderr)
            return 1 if old else 0
        for path in write_all(spec, directory):
            print(f"wrote {path}")
        report = verify(spec)
    except FSMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not report.ok:
        print(f"error: {report.summary}; see {directory / f'{spec.name}-verification.md'}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
