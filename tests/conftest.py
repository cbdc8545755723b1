"""Shared fixtures: a fresh refund shop with the demo orders, its workflow, a store,
and an engine factory."""

from __future__ import annotations

import functools
import inspect
import os
import re
import shutil
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from embedded_pg import start_embedded_postgres

from fsm import Engine, MemoryStore, WorkflowSpec
from fsm.signing import default_key_file
from fsm.store import SQLiteStore
from fsm.store._statements import DATABASE_IDENTITY
from fsm.store.base import Store
from fsm.store.postgres import PostgresStore
from workflows.refund import Shop, build

#: ``server`` and ``no_model_env``, for the tests against the fake OpenAI server; ``cli``,
#: which runs an ``fsm`` command line in this process; ``any_db``, a fresh database of each
#: kind as a command line names it.
pytest_plugins = ["openai_fixtures", "cli_inproc", "damage"]

#: Where this file is: the folders below it are the layers the tests cover.
_TESTS = Path(__file__).resolve().parent


#: What makes a test module timing-sensitive: it starts threads, processes or servers,
#: sends signals or sleeps (directly or through the kits in tests/support that do).
_WAITS = re.compile(r"\b(threading|subprocess|Popen|os\.kill|signal\.|time\.sleep|"
                    r"multiprocessing|uvicorn|sync_playwright|web_server|fleetkit|crashkit|"
                    r"pgproxy|fake_openai|openai_fixtures)\b")


#: The kits in tests/support whose every use waits on processes, servers or threads.
_WAITING_KITS = frozenset({"fleetkit", "crashkit", "pgproxy", "fake_openai", "web_server",
                           "openai_fixtures", "chat_desk", "deploykit", "payoutkit",
                           "airline_env"})


@functools.cache
def _source_waits(obj: Any) -> bool:
    """Whether ``obj`` (a function or class) is from a waiting kit, or is test code whose
    own source starts threads, processes or servers, sends signals or sleeps (the
    library's own locks and threads are what the tests test, not what makes them wait)."""
    if getattr(obj, "__module__", None) in _WAITING_KITS:
        return True
    try:
        if not Path(inspect.getfile(obj)).resolve().is_relative_to(_TESTS):
            return False
        return bool(_WAITS.search(inspect.getsource(obj)))
    except (OSError, TypeError):
        return False


def _waits(item: pytest.Item) -> bool:
    """Whether a test waits: its own code, a function or class of its module that it
    calls, or one of its fixtures starts threads, processes or servers, sends signals or
    sleeps."""
    function = getattr(item, "function", None)
    if function is None:
        return False
    called = [function.__globals__.get(n) for n in function.__code__.co_names]
    fixtures = getattr(item, "_fixtureinfo", None)
    defs = fixtures.name2fixturedefs.values() if fixtures is not None else ()
    candidates = [function, *called, *(d[-1].func for d in defs if d)]
    return any((inspect.isfunction(c) or inspect.isclass(c)) and _source_waits(c)
               for c in candidates)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark what needs PostgreSQL (``postgres``) and what tests the workers and the inbox
    (``services``, every test under ``tests/services/``), so that
    ``pytest -m "not postgres and not services"`` runs the core: the runtime, the stores on
    SQLite and memory, the CLI, the audit, the definitions. ``stress`` marks what waits on
    threads, processes, servers, leases or clocks: the tests ``bench/stress.py`` repeats
    beside CPU burners."""
    services = _TESTS / "services"
    # Every test here starts an MCP server process and waits on it.
    servers = (_TESTS / "mcp", _TESTS / "airline")
    for item in items:
        callspec = getattr(item, "callspec", None)
        postgres = "pg_server" in getattr(item, "fixturenames", ()) or (
            callspec is not None and "postgres" in callspec.id.split("-"))
        if postgres:
            item.add_marker(pytest.mark.postgres)
        in_services = item.path.is_relative_to(services)
        if in_services:
            item.add_marker(pytest.mark.services)
        if in_services or any(item.path.is_relative_to(s) for s in servers) or _waits(item):
            item.add_marker(pytest.mark.stress)


@pytest.fixture(autouse=True)
def close_connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every store and shop a test opens is closed when the test ends (Python 3.13 warns
    about a SQLite connection nobody closed, and warnings are errors here)."""
    opened: list[Any] = []
    for cls in (SQLiteStore, Shop):
        def init(self: Any, *args: Any, _original: Any = cls.__init__, **kwargs: Any) -> None:
            _original(self, *args, **kwargs)
            opened.append(self)

        monkeypatch.setattr(cls, "__init__", init)
    yield opened
    for obj in reversed(opened):
        obj.close()


@pytest.fixture
def shop() -> Iterator[Shop]:
    """The fake shop on its own in-memory database, seeded with A-1001..A-1004."""
    with Shop() as s:
        yield s.seed_demo()


@pytest.fixture
def spec(shop: Shop) -> WorkflowSpec:
    """The refund workflow bound to ``shop``."""
    return build(shop)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def make_engine(spec: WorkflowSpec, store: MemoryStore) -> Callable[..., Engine]:
    """``make_engine(policy, **options)``: an engine on ``spec`` and ``store``."""

    def make(policy: Any = None, **options: Any) -> Engine:
        return Engine(spec, store, policy, **options)

    return make


# -- PostgreSQL: the server named by FSM_TEST_DATABASE_URL, else a throwaway one -----------

def _with_database(url: str, dbname: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + dbname))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a PostgreSQL server to create test databases on. Never skipped: when
    neither FSM_TEST_DATABASE_URL nor embedded-postgres works, the test fails and says why."""
    import psycopg

    url = os.environ.get("FSM_TEST_DATABASE_URL")
    if url:
        try:
            psycopg.connect(url, connect_timeout=5).close()
        except psycopg.Error as exc:
            pytest.fail(f"FSM_TEST_DATABASE_URL={url!r} does not answer: {exc}")
        yield url
        return
    try:
        server = start_embedded_postgres()
    except Exception as exc:  # noqa: BLE001 - any failure is reported, never skipped
        pytest.fail("no PostgreSQL for the tests: FSM_TEST_DATABASE_URL is not set and "
                    f"embedded-postgres could not start a server ({type(exc).__name__}: {exc})")
    yield server.get_uri("postgres")
    server.cleanup()
    shutil.rmtree(server.pgdata.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_database(pg_server: str) -> Iterator[str]:
    """A uniquely named database on ``pg_server`` for this test session, dropped after."""
    import psycopg

    name = f"fsm_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield _with_database(pg_server, name)
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url(pg_database: str) -> Iterator[str]:
    """A URL whose tables live in a fresh schema of ``pg_database`` (dropped after): as
    good as a fresh database for one test, and much faster to make."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_database else "?"
    url = f"{pg_database}{sep}options=-csearch_path%3D{schema}"
    yield url
    with psycopg.connect(url, autocommit=True) as conn:
        # The signing key fsm made for this schema (see fsm.signing.default_key_file).
        row = conn.execute(DATABASE_IDENTITY).fetchone()
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    if row is not None:
        Path(default_key_file("/".join(str(v) for v in row))).unlink(missing_ok=True)


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A durable store of each kind: a SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        with SQLiteStore(str(tmp_path / "any.db")) as s:
            yield s
    else:
        s = PostgresStore(request.getfixturevalue("pg_url"))
        try:
            yield s
        finally:
            s.close()
