"""How ``module:attr`` references load: from the current directory as ``python -m`` finds
modules, every definition problem shown with exit 2, policies given as themselves or as
factories, and a workflow module's ``POLICY``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_inproc import Cli, error_line

from fsm.cli import exits

FSM = str(Path(sys.executable).parent / "fsm")  # the console script, as a user runs it

BAD_TABLES = '''
from fsm import define_workflow
WORKFLOW = define_workflow("m1", transitions={"a": {"go": "dnoe"}}, tools_by_state={},
                           initial="a", terminal={"done"})
'''
BAD_FACTORY = '''
from fsm import define_workflow
def factory():
    return define_workflow("m2", transitions={"a": {"go": "dnoe"}}, tools_by_state={},
                           initial="a", terminal={"done"})
'''
PROBLEMS = [
    "  - transition target 'dnoe' (a --go-->) is not a declared state; did you mean 'done'? "
    "(declare end states with terminal= or handed_over_states=)",
    "  - states unreachable from 'a': 'done'",
]
#: A one-state workflow, a policy, a factory of it, and factories that return no policy.
GREETER = '''
from fsm import Action, define_workflow
SPEC = define_workflow("greeter", transitions={"talking": {}}, tools_by_state={},
                       initial="talking", terminal=set(), finish_states={"talking"})
def policy(view):
    return Action(final="hello from " + view.workflow)
class Polite:
    """A policy class: its instances answer."""
    def __init__(self, greeting="good day"):
        self.greeting = greeting
    def __call__(self, view):
        return Action(final=self.greeting)
def make():
    return policy
def broken():
    return 42
def boom():
    raise RuntimeError("no model configured")
'''


def fsm(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FSM, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)})


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "mistakes.py").write_text(BAD_TABLES)
    (tmp_path / "mistakes_factory.py").write_text(BAD_FACTORY)
    (tmp_path / "greeter.py").write_text(GREETER)
    (tmp_path / "elsewhere").mkdir()
    return tmp_path


@pytest.mark.parametrize("ref", ["mistakes:WORKFLOW", "mistakes_factory:factory"])
def test_a_workflow_with_bad_tables_prints_every_problem_and_exits_2(folder: Path,
                                                                     ref: str) -> None:
    for command in (["run", ref, "goal", "--db", "x.db"], ["verify", ref]):
        done = fsm(folder, *command)
        assert done.returncode == exits.USAGE, done
        lines = done.stderr.splitlines()
        assert lines[0].startswith("error: workflow 'm") and \
            lines[0].endswith("has 2 definition problem(s):")
        assert lines[1:] == PROBLEMS
    assert not (folder / "x.db").exists()


def test_a_module_in_the_current_directory_loads_as_python_m_finds_it(folder: Path) -> None:
    done = fsm(folder, "run", "greeter:SPEC", "hi", "--policy", "greeter:policy", "--db",
               "g.db", "--json")
    assert done.returncode == exits.OK, done.stderr
    assert '"answer": "hello from greeter"' in done.stdout


def test_a_module_that_is_nowhere_says_where_it_was_looked_for(folder: Path) -> None:
    done = fsm(folder / "elsewhere", "verify", "greeter:SPEC")
    assert done.returncode == exits.USAGE
    assert done.stderr.splitlines() == [
        "error: cannot import 'greeter:SPEC': no module named 'greeter' in the current "
        "directory, then PYTHONPATH, then the installed packages (as python -m finds "
        f"modules); the current directory is {folder / 'elsewhere'}: run fsm from the folder "
        "that holds greeter.py (or greeter/__init__.py), or add that folder to PYTHONPATH"]


def test_help_says_where_modules_are_looked_up() -> None:
    done = subprocess.run([FSM, "run", "--help"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "400"})
    text = " ".join(done.stdout.split())
    assert "looked up in the current directory, then PYTHONPATH, then the installed " \
           "packages" in text
    assert "a policy (view -> Action) or a function of no arguments returning one" in text


def test_help_speaks_of_no_workflow_currency_and_says_whose_a_run_is() -> None:
    def shown(*args: str) -> str:
        done = subprocess.run([FSM, *args, "--help"], capture_output=True, text=True,
                              timeout=60, env={"PATH": "/usr/bin:/bin", "COLUMNS": "400"})
        return " ".join(done.stdout.split())

    assert "paise" not in shown("users", "add")
    for command in ("run", "submit"):
        assert 'default: "", a run of no one' in shown(command)


@pytest.fixture
def greeter(cli: Cli, tmp_path: Path) -> Cli:
    (tmp_path / "greeter.py").write_text(GREETER)
    return cli


@pytest.mark.parametrize("policy, answer", [
    pytest.param("greeter:policy", "hello from greeter", id="a-policy"),
    pytest.param("greeter:make", "hello from greeter", id="a-factory"),
    pytest.param("greeter:Polite", "good day", id="a-class-made-with-no-arguments"),
])
def test_a_policy_is_given_as_itself_or_as_a_factory(greeter: Cli, policy: str,
                                                     answer: str) -> None:
    done = greeter("run", "greeter:SPEC", "hi", "--policy", policy, "--json")
    assert done.code == exits.OK, done
    assert f'"answer": "{answer}"' in done.out


@pytest.mark.parametrize("policy, says", [
    pytest.param("greeter:broken", "takes no arguments, so it was called as a factory, but it "
                 "returned an int, not a policy", id="factory-returns-no-policy"),
    pytest.param("greeter:boom", "calling it with no arguments failed (RuntimeError: no model "
                 "configured)", id="factory-raises"),
    pytest.param("greeter:SPEC", "is a WorkflowSpec, not callable", id="not-callable"),
])
def test_a_policy_reference_that_gives_no_policy_is_one_line(greeter: Cli, policy: str,
                                                             says: str) -> None:
    error_line(greeter("run", "greeter:SPEC", "hi", "--policy", policy), exits.USAGE,
               repr(policy), says)
    assert not Path("fsm.db").exists()


def test_a_workflow_modules_policy_factory_is_its_default(greeter: Cli, tmp_path: Path) -> None:
    # A module of its own name: this process has imported greeter already.
    (tmp_path / "greeter_default.py").write_text(GREETER + "POLICY = make\n")
    done = greeter("run", "greeter_default:SPEC", "hi", "--json")
    assert done.code == exits.OK, done
    assert '"answer": "hello from greeter"' in done.out
