"""Every Python block of the faults page runs (docs/explanation/faults.md)."""

from __future__ import annotations

import re

import pytest
from paths import ROOT

PAGE = ROOT / "docs" / "explanation" / "faults.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_page_has_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("i", range(len(BLOCKS)), ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_python_block_runs(i: int) -> None:
    exec(compile(BLOCKS[i], str(PAGE), "exec"), {"__name__": "faults_page"})


def test_the_page_names_every_timeout_setting() -> None:
    from fsm.settings import variables

    pg = [v for v in variables().values() if v.startswith("FSM_PG_") and v.endswith("TIMEOUT")]
    assert len(pg) == 6
    text = PAGE.read_text()
    for name in [*pg, "FSM_SQLITE_BUSY_TIMEOUT", "FSM_RETRIES", "FSM_RETRY_SECONDS",
                 "FSM_RETRY_MAX_SECONDS", "--step-timeout"]:
        assert name in text, name
