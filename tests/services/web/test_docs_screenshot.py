"""``make screenshot``: docs/screenshot.py takes the approval page's picture from a real
``fsm serve`` with Debian's Chromium, so the picture in the docs cannot go stale."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from paths import ROOT

SCRIPT = ROOT / "docs" / "screenshot.py"


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_the_script_takes_the_approval_page_from_a_real_server(tmp_path: Path) -> None:
    out = tmp_path / "approval-page.png"
    done = subprocess.run([sys.executable, str(SCRIPT), "-o", str(out)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {out}"
    assert png_size(out) == (1280, 900)
    assert out.stat().st_size > 20_000  # a page, not a blank


def test_the_docs_show_the_picture_the_script_makes() -> None:
    assert png_size(ROOT / "docs" / "approval-page.png") == (1280, 900)
    assert "](../approval-page.png)" in (ROOT / "docs" / "how-to" / "inbox.md").read_text()
    assert "screenshot.py -o docs/approval-page.png" in (ROOT / "Makefile").read_text()
