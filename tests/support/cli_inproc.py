"""Running ``fsm`` command lines in this process: the ``cli`` fixture and ``error_line``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from fsm.cli import run


class Result(NamedTuple):
    code: int
    out: str
    err: str


Cli = Callable[..., Result]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> Cli:
    """``cli(*args)`` runs one ``fsm`` command line here, in ``tmp_path`` (also on
    ``sys.path``, for ``module:attr`` references), without ``FSM_*`` settings."""
    for name in [k for k in os.environ if k.startswith(("FSM_", "OPENAI_"))]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def invoke(*args: str) -> Result:
        capsys.readouterr()
        code = run(list(args))
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return invoke


def error_line(result: Result, code: int, *fragments: str) -> str:
    """The one ``error:`` line a refused command printed; it exited with ``code``."""
    assert result.code == code, result
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


KETTLE = "Order A-1001: kettle broken"
HEADPHONES = "Order A-1002: headphones dead"
