"""Workflow and policy references that fail in any way are one ``error:`` line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_inproc import KETTLE, Cli, error_line

from fsm.cli import exits

# -- workflow and policy references ------------------------------------------------------

BROKEN_MODULES = {
    "ref_boom": 'raise RuntimeError("boom at import")\n',
    "ref_syntax": "def f(:\n",
    "ref_odd": '''
X = 3
def needs_args(a, b):
    return a
def raises():
    raise ValueError("factory failed")
class Weird:
    def __getattr__(self, name):
        raise KeyError(name)
W = Weird()
''',
}


@pytest.fixture
def modules(tmp_path: Path) -> None:
    for name, text in BROKEN_MODULES.items():
        (tmp_path / f"{name}.py").write_text(text)


@pytest.mark.parametrize("ref, says", [
    pytest.param("ref_boom:X", "RuntimeError: boom at import", id="raises-on-import"),
    pytest.param("ref_syntax:X", "SyntaxError", id="syntax-error"),
    pytest.param("ref_odd:needs_args", "calling it with no arguments failed (TypeError",
                 id="factory-needs-arguments"),
    pytest.param("ref_odd:raises", "ValueError: factory failed", id="factory-raises"),
    pytest.param("ref_odd:W.foo", "KeyError", id="odd-attribute-error"),
    pytest.param(":X", "give an absolute module name", id="no-module"),
    pytest.param(".ref_odd:X", "give an absolute module name", id="relative-module"),
    pytest.param("ref_odd:X", "is an int, not a workflow spec", id="not-a-spec"),
])
def test_a_workflow_reference_that_fails_is_one_line(cli: Cli, modules: None, ref: str,
                                                     says: str) -> None:
    for command in (["run", ref, "goal"], ["verify", ref], ["diagram", ref],
                    ["submit", ref, "goal"]):
        error_line(cli(*command), exits.USAGE, repr(ref), says)
    assert not Path("fsm.db").exists()


@pytest.mark.parametrize("ref, says", [
    pytest.param("ref_boom:X", "RuntimeError: boom at import", id="raises-on-import"),
    pytest.param("ref_odd:W.foo", "KeyError", id="odd-attribute-error"),
    pytest.param(":X", "give an absolute module name", id="no-module"),
])
def test_a_policy_reference_that_fails_is_one_line(cli: Cli, modules: None, ref: str,
                                                   says: str) -> None:
    for command in (["run", "refund", KETTLE, "--user", "asha", "--policy", ref],
                    ["submit", "refund", KETTLE, "--policy", ref]):
        error_line(cli(*command), exits.USAGE, repr(ref), says)
    assert not Path("fsm.db").exists()


def test_an_unknown_workflow_is_a_usage_error(cli: Cli) -> None:
    error_line(cli("run", "nosuch", "goal"), exits.USAGE, "unknown workflow 'nosuch'",
               "registered: ")
