"""The notifications page's Python blocks run, in order, in one namespace (the example
uses the page's ``verify``), and its settings are the ones the code reads."""

from __future__ import annotations

import re
from pathlib import Path

from paths import ROOT

PAGE = ROOT / "docs" / "how-to" / "notifications.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_python_blocks_run_and_a_replayed_delivery_is_refused() -> None:
    assert len(BLOCKS) == 2
    namespace: dict[str, object] = {"__name__": "notifications_page"}
    for block in BLOCKS:
        exec(compile(block, str(PAGE), "exec"), namespace)
    assert namespace["seen"] and len(namespace["captured"]) == 1  # type: ignore[arg-type]


def test_the_page_names_every_setting_the_code_reads() -> None:
    text = PAGE.read_text()
    code = "".join(Path(ROOT, "fsm", "web", name).read_text()
                   for name in ("notify.py", "server.py", "webhooks.py"))
    for name in sorted(set(re.findall(r"FSM_NOTIFY_[A-Z]+", code))):
        assert f"`{name}`" in text, name
