"""The one settings object: every variable parsed once, refused in one line, read only at
the edge, and the environment page's table generated from it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_inproc import KETTLE, Cli, error_line
from paths import ROOT

from fsm import Settings, SettingsError, open_store
from fsm.cli.exits import USAGE
from fsm.settings import LAST_TIME, markdown, variables
from fsm.store.pg_session import Timeouts

#: The modules that may read the environment: the settings object itself; ``fsm doctor``
#: (standard library only: it runs before the virtual environment exists); the ``fsm``
#: command's entry point, which reads ``FSM_FAULT`` (the fault-injection hook of crash
#: tests) and the standard ``OTEL_*`` variables (the tracing hook) once, as it starts;
#: ``fsm users --password-env NAME``, which reads the variable the user names.
BOUNDARY = {"fsm/settings.py", "fsm/cli/system/doctor.py", "fsm/cli/__init__.py", "fsm/cli/web.py"}


def _reads_environment(node: ast.AST) -> bool:
    """``os.environ``, ``getenv``/``os.getenv``, ``Settings.load()`` or ``Settings()``
    (a function given a mapping named ``environ`` reads what its caller passes)."""
    if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
        return True
    if isinstance(node, ast.Name) and node.id == "getenv":
        return True
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "load" and \
                isinstance(f.value, ast.Name) and f.value.id == "Settings":
            return True
        return isinstance(f, ast.Name) and f.id == "Settings" and not node.args \
            and not node.keywords
    return False


def _environment_readers() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(ROOT.joinpath("fsm").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if _reads_environment(node):
                n = getattr(node, "lineno", 0)
                found.setdefault(rel, []).append(f"{rel}:{n}: {lines[n - 1].strip()}")
    return found


def test_nothing_deep_in_fsm_reads_the_environment() -> None:
    readers = _environment_readers()
    # The command line reads the settings once, in one place.
    assert [line.split(": ", 1)[1] for line in readers.pop("fsm/cli/app.py")] == \
        ["_LOADED.append(Settings.load())"]
    offenders = [line for rel, lines in readers.items() if rel not in BOUNDARY
                 for line in lines]
    assert offenders == [], "read the environment outside the edge:\n" + "\n".join(offenders)


@pytest.mark.parametrize(("name", "value", "line"), [
    pytest.param("FSM_RETRIES", "x", "FSM_RETRIES='x' is not a whole number (allowed: 1 or more)",
                 id="retries-word"),
    pytest.param("FSM_RETRIES", "0", "FSM_RETRIES='0' is out of range (allowed: 1 or more)",
                 id="retries-zero"),
    pytest.param("FSM_PG_POOL", "2.5", "FSM_PG_POOL='2.5' is not a whole number of connections "
                 "(allowed: 1 or more)", id="pool-fraction"),
    pytest.param("FSM_PG_LOCK_TIMEOUT", "-1", "FSM_PG_LOCK_TIMEOUT='-1' is out of range "
                 "(allowed: 0 or more, below 1e+09)", id="pg-negative"),
    pytest.param("FSM_SQLITE_BUSY_TIMEOUT", "soon", "FSM_SQLITE_BUSY_TIMEOUT='soon' is not a "
                 "number of seconds (allowed: 0 or more, below 1e+06)", id="busy-word"),
    pytest.param("FSM_SYNCHRONOUS", "fast", "FSM_SYNCHRONOUS='fast' is not a SQLite "
                 "synchronous mode (allowed: FULL, NORMAL, OFF or EXTRA)", id="synchronous"),
    pytest.param("FSM_CLOCK_OFFSET", "1e20", "FSM_CLOCK_OFFSET='1e20' moves the clock outside "
                 "1970 to the year 9999 (allowed: seconds that keep the clock between 1970 and "
                 "the year 9999)", id="offset-far"),
    pytest.param("FSM_CLOCK_OFFSET", "nan", "FSM_CLOCK_OFFSET='nan' moves the clock outside "
                 "1970 to the year 9999 (allowed: seconds that keep the clock between 1970 and "
                 "the year 9999)", id="offset-nan"),
    pytest.param("FSM_CLOCK_OFFSET", "an hour", "FSM_CLOCK_OFFSET='an hour' is not a number of "
                 "seconds (allowed: seconds that keep the clock between 1970 and the year "
                 "9999)", id="offset-word"),
    pytest.param("FSM_NOTIFY_URL", "http://a, ftp://b", "FSM_NOTIFY_URL='http://a, ftp://b' "
                 "names 'ftp://b', which is not an http:// or https:// address (allowed: "
                 "http:// or https:// addresses, comma-separated)", id="webhook"),
    pytest.param("FSM_TOOL_CHOICE", "always", "FSM_TOOL_CHOICE='always' is not a tool choice "
                 "(allowed: auto or off)", id="tool-choice"),
    pytest.param("FSM_SESSION_SECONDS", "8h", "FSM_SESSION_SECONDS='8h' is not a whole number "
                 "of seconds (allowed: 1 or more)", id="session"),
    pytest.param("FSM_RETRY_SECONDS", "90", "FSM_RETRY_SECONDS=90 is more than "
                 "FSM_RETRY_MAX_SECONDS=60 (allowed: a first wait at most the longest)",
                 id="retry-order"),
])
def test_a_bad_variable_is_one_line_naming_it_its_value_and_what_is_allowed(
        monkeypatch: pytest.MonkeyPatch, name: str, value: str, line: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        Settings.load()
    assert str(refused.value) == line
    assert refused.value.problems == [line]


def test_every_bad_variable_is_named_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FSM_RETRIES", "x")
    monkeypatch.setenv("FSM_DOT_TIMEOUT", "0")
    with pytest.raises(SettingsError) as refused:
        Settings.load()
    assert refused.value.problems == [
        "FSM_RETRIES='x' is not a whole number (allowed: 1 or more)",
        "FSM_DOT_TIMEOUT='0' is out of range (allowed: above 0, below 1e9)"]
    assert "\n" not in str(refused.value)


def test_values_are_parsed_once_with_one_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"FSM_RETRIES": " 3 ", "FSM_SYNCHRONOUS": "normal",
                        "FSM_TOOL_CHOICE": "OFF", "FSM_CLOCK_OFFSET": "-3600",
                        "FSM_NOTIFY_URL": "http://a.test/h https://b.test/h",
                        "FSM_PG_POOL": "3", "FSM_PG_LOCK_TIMEOUT": "2.5",
                        "OPENAI_API_KEY": "sk-x", "FSM_PRICES": "", "fsm_dot_timeout": "7"
                        }.items():
        monkeypatch.setenv(name, value)
    s = Settings.load()
    assert (s.retries, s.synchronous, s.tool_choice, s.pg_pool) == (3, "NORMAL", "off", 3)
    assert s.notify_url == ("http://a.test/h", "https://b.test/h")
    assert s.prices is None  # empty is unset
    assert s.dot_timeout == 7.0  # names match without regard to case
    assert s.openai_api_key == "sk-x" and "sk-x" not in repr(s)
    assert abs(s.clock() - (time.time() - 3600)) < 5
    assert Timeouts.of(s).lock == 2.5 and Timeouts.of(s).statement == 30.0
    with pytest.raises(Exception, match="frozen"):
        s.retries = 4  # type: ignore[misc]


def test_library_defaults_read_no_environment(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setenv("FSM_RETRIES", "x")  # would be refused if anything read it
    monkeypatch.setenv("FSM_SYNCHRONOUS", "OFF")
    monkeypatch.chdir(tmp_path)
    assert Settings.defaults().retries == 5
    assert Settings.of(retries=2).retries == 2
    assert Timeouts.of(Settings.defaults()) == Timeouts()
    with open_store("runs.db") as store:
        mode = store.db.connection.execute("PRAGMA synchronous").fetchone()[0]  # type: ignore[attr-defined]
    assert mode == 2  # FULL, the default: FSM_SYNCHRONOUS is the command line's
    with pytest.raises(SettingsError, match=r"^FSM_CLOCK_OFFSET="):
        Settings.of(clock_offset=-LAST_TIME)


def test_the_library_defaults_are_the_settings_defaults(tmp_path: Path) -> None:
    import inspect

    from fsm import Retry, SQLiteStore
    from fsm._location import DEFAULT_DB
    from fsm.auditor.render import DOT_TIMEOUT
    from fsm.store.postgres import DEFAULT_POOL
    from fsm.web.auth import SESSION_SECONDS
    from fsm.web.notify import Notifier

    d = Settings.defaults()
    assert (d.db, d.pg_pool, d.dot_timeout, d.session_seconds) == \
        (DEFAULT_DB, DEFAULT_POOL, DOT_TIMEOUT, SESSION_SECONDS)
    assert Retry() == Retry(tries=d.retries, first=d.retry_seconds, most=d.retry_max_seconds)
    with SQLiteStore(str(tmp_path / "plain.db")) as store:
        db = store.db.connection  # type: ignore[attr-defined]
        assert db.execute("PRAGMA busy_timeout").fetchone()[0] == d.sqlite_busy_timeout * 1000
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 2 and d.synchronous == "FULL"
    assert inspect.signature(Notifier).parameters["base_delay"].default == d.notify_backoff


def test_a_bad_variable_stops_a_command_with_one_usage_line(cli: Cli,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    monkeypatch.setenv("FSM_PG_POOL", "lots")
    error_line(cli("run", "refund", KETTLE, "--user", "asha"), USAGE,
               "error: FSM_PG_POOL='lots' is not a whole number of connections "
               "(allowed: 1 or more)")
    assert not (tmp_path / "fsm.db").exists()  # nothing was done
    error_line(cli("runs"), USAGE, "FSM_PG_POOL='lots'")
    assert cli("workflows").code == 0  # a command that needs no settings reads none
    assert cli("--help").code == 0


def test_fsm_db_is_read_once_by_the_command_line(cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("FSM_DB", str(tmp_path / "elsewhere.db"))
    assert cli("run", "refund", KETTLE, "--user", "asha", "--run-id", "k1").code == 0
    assert (tmp_path / "elsewhere.db").exists() and not (tmp_path / "fsm.db").exists()
    monkeypatch.delenv("FSM_DB")
    error_line(cli("show", "k1"), 1, "no database at 'fsm.db'")


def test_the_environment_page_has_the_generated_table() -> None:
    page = (ROOT / "docs" / "reference" / "environment.md").read_text()
    start = page.index("-->\n", page.index("<!-- settings-table")) + len("-->\n")
    end = page.index("<!-- /settings-table -->")
    assert page[start:end] == markdown(), \
        "docs/reference/environment.md is stale: python -m fsm.settings --markdown"
    for var in variables().values():
        assert f"| `{var}` |" in page


def test_the_table_is_printed_by_a_command() -> None:
    out = subprocess.run([sys.executable, "-m", "fsm.settings", "--markdown"], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    assert out == markdown()
    assert out.splitlines()[0] == "| variable | default | meaning |"


@pytest.mark.parametrize("argv", [
    pytest.param(["-m", "fsm", "serve", "--port", "0"], id="fsm-serve"),
    pytest.param(["-m", "fsm", "worker", "--poll-seconds", "0.1"], id="fsm-worker"),
    pytest.param(["-m", "workflows.refund", "ledger"], id="refund-entry"),
])
def test_every_entry_refuses_a_bad_variable_in_one_line(argv: list[str], tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    env.update(FSM_CLOCK_OFFSET="soon", FSM_DB=str(tmp_path / "runs.db"),
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == USAGE, done
    assert done.stderr == ("error: FSM_CLOCK_OFFSET='soon' is not a number of seconds "
                           "(allowed: seconds that keep the clock between 1970 and the year "
                           "9999)\n")
    assert not (tmp_path / "runs.db").exists()  # nothing was done
