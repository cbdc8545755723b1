"""Locks that time out: a process frozen (SIGSTOP) inside each locked section, and
everyone else goes on.

The frozen process stops itself at a named fault point (``FSM_FAULT=<point>@0:stop``)
while it holds the lock: the store's schema migration lock, the fleet's sweep lock, the
shop's schema lock. Its session is ended by the server once it idles, which frees the
lock; every other command, worker and server meanwhile finishes its work. A worker whose
step never comes back gives its run's lease back; a command that waited too long for a
lock says what it waited for, in one line.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from crashkit import Exit, popen_fsm, run_fsm
from fleetkit import Fleet, wait_for
from web_server import launch, stopped

from fsm import Engine, Settings, open_store
from fsm.store import Store
from workflows.refund import build, clerk
from workflows.refund.shop import PostgresShop

KETTLE = "Order A-1001: the kettle arrived broken, please refund it"
HEADPHONES = "Order A-1002: my headphones stopped working, I want my money back"
#: Short waits, so that a frozen holder's session ends within two seconds.
SHORT = {"FSM_PG_MIGRATION_TIMEOUT": "4", "FSM_PG_SWEEP_TIMEOUT": "2",
         "FSM_PG_LOCK_TIMEOUT": "2"}
#: How long anyone else's work may take while the holder is frozen: it only bounds a
#: failure. The holder stays frozen until the test lets it go, so whoever waited on it would
#: wait for ever; finishing at all, while it is still frozen, is what shows nobody did.
DEADLINE = 120.0


def frozen(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> bool:
    """True once ``proc`` is stopped (SIGSTOP): its state in /proc is ``T``."""
    try:
        with open(f"/proc/{proc.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:
    s = open_store(pg_url)
    yield s
    s.close()


@pytest.fixture
def fleet(pg_url: str, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(pg_url, tmp_path, **SHORT)
    yield f
    f.close()


def thaw(proc: subprocess.Popen[str]) -> Exit:
    """Let a frozen process go on; how it ended."""
    proc.send_signal(signal.SIGCONT)
    out, err = proc.communicate(timeout=60)
    return Exit(proc.returncode, out, err)


def test_a_process_frozen_holding_the_migration_lock_stalls_no_one(
        pg_url: str, tmp_path: Path) -> None:
    env = {**SHORT, "FSM_DB": pg_url}
    holder = popen_fsm("submit", "refund", KETTLE, "--user", "asha", "--run-id", "held",
                       env={**env, "FSM_FAULT": "migration_locked@0:stop"})
    try:
        wait_for("the first process to freeze holding the migration lock",
                 lambda: frozen(holder) or holder.poll() is not None, DEADLINE)
        assert frozen(holder), holder.communicate()
        for name, argv in {
            "submit": ["submit", "refund", KETTLE, "--user", "asha", "--run-id", "w1"],
            "run": ["run", "refund", HEADPHONES, "--user", "ravi", "--run-id", "big"],
            "approve": ["approve", "big", "--reviewer", "priya", "--note", "ok"],
            "sweep": ["sweep"],
        }.items():
            e = run_fsm(*argv, "--db", pg_url, env=env, timeout=DEADLINE)
            assert e.code == 0, (name, e)
        assert frozen(holder)  # all of it while the holder stays frozen
        fleet = Fleet(pg_url, tmp_path, **SHORT)
        try:
            w = fleet.start("--poll-seconds", "0.1")
            wait_for("a worker to finish the submitted run",
                     lambda: open_done(pg_url, "w1"), DEADLINE)
            assert fleet.stop(w) == 0
        finally:
            fleet.close()
        server, _ = launch(pg_url, env=env)
        stopped(server)
        assert frozen(holder)  # the worker and the server too
    finally:
        ended = thaw(holder)
    # The holder's session was ended while it was frozen: it says so in one line.
    lines = ended.stderr.strip().splitlines()
    assert ended.code == 1 and len(lines) == 1, ended
    assert lines[0].startswith("error: ") and "migration failed" in lines[0], lines


def open_done(url: str, run_id: str) -> bool:
    s = open_store(url)
    try:
        return s.load_run(run_id).status == "done"
    finally:
        s.close()


def test_a_worker_frozen_holding_the_sweep_lock_stalls_no_other_sweeper(
        store: Store, pg_url: str, fleet: Fleet) -> None:
    shop = PostgresShop(pg_url).seed_demo()
    try:
        spec = build(shop)
        engine = Engine(spec, store, clerk)
        for n in range(3):
            shop.add_order(f"E-{5000 + n}", f"buyer{n}", f"big-{n}", "big thing", 90_000, 2)
            run = engine.start(f"Order E-{5000 + n}: broken", user=f"buyer{n}",
                               run_id=f"e{n}", meta={"workflow_ref": "refund"})
            assert run.status == "awaiting_approval"
    finally:
        shop.close()
    late = str(spec.approval_ttl_seconds + 60)  # every approval is due for the workers
    a = fleet.start("--poll-seconds", "0.1", "--sweep-seconds", "0.2",
                    FSM_CLOCK_OFFSET=late, FSM_FAULT="sweep_locked@0:stop")
    wait_for("worker A to freeze holding the sweep lock", lambda: frozen(a), DEADLINE)
    b = fleet.start("--poll-seconds", "0.1", "--sweep-seconds", "0.2", FSM_CLOCK_OFFSET=late)
    wait_for("worker B to sweep every expired approval", lambda: all(
        store.load_run(f"e{n}").status == "handed_over" for n in range(3)), DEADLINE)
    assert frozen(a)  # all of it while A stays frozen
    # B says so once its sweep is over (the runs are written first).
    wait_for("worker B to say it expired them", lambda: all(
        f"expired e{n}'s approval" in fleet.log(b) for n in range(3)), 10)
    assert "expired" not in fleet.log(a)
    assert fleet.stop(b) == 0


def test_a_worker_frozen_holding_the_shops_schema_lock_stalls_no_other_worker(
        store: Store, pg_url: str, fleet: Fleet) -> None:
    """The shop's tables do not exist yet: the first worker to open the shop creates them
    under its lock, and freezes there."""
    runs = {"k": ("A-1001", "asha"), "m": ("A-1003", "meera"), "l": ("A-1004", "asha"),
            "t": ("A-1005", "dev")}
    engine = Engine(build(), store)
    for run_id, (order, user) in runs.items():
        engine.start(f"Order {order}: it broke", user=user, run_id=run_id, drive=False,
                     meta={"workflow_ref": "refund", "policy": "default"})
    a = fleet.start("--poll-seconds", "0.1", "--concurrency", "1", "--lease-seconds", "2",
                    FSM_FAULT="shop_schema_locked@0:stop")
    wait_for("worker A to freeze creating the shop's tables", lambda: frozen(a), DEADLINE)
    b = fleet.start("--poll-seconds", "0.1", "--lease-seconds", "2")
    wait_for("worker B to finish every run, worker A's too", lambda: all(
        store.load_run(r).status == "done" for r in runs), DEADLINE)
    assert frozen(a)  # all of it while A stays frozen
    shop = PostgresShop(pg_url)
    try:
        assert sorted(p["order_id"] for p in shop.ledger()) == ["A-1001", "A-1004", "A-1005"]
    finally:
        shop.close()
    assert fleet.stop(b) == 0


def test_a_worker_whose_step_never_returns_gives_the_lease_back(
        store: Store, pg_url: str, fleet: Fleet, tmp_path: Path) -> None:
    Engine(build(PostgresShop(pg_url).seed_demo()), store).start(
        KETTLE, user="asha", run_id="stuck", drive=False,
        meta={"workflow_ref": "refund", "policy": "default"})
    marker = tmp_path / "marker"
    # The lease outlasts the step timeout by far: B can only have it from A's hand, not by
    # its expiry, even on a machine too busy to run A's heartbeat for a few seconds.
    a = fleet.start("--policy", "fleetkit:marked_clerk", "--lease-seconds", "15",
                    "--step-timeout", "2", "--poll-seconds", "0.1",
                    FLEET_SLOW_STATE="verifying", FLEET_MARKER=str(marker),
                    FLEET_SLOW_SECONDS="600")
    wait_for("worker A to hang in a step", marker.exists, DEADLINE)
    owner = store.lease("stuck").owner  # type: ignore[union-attr]
    b = fleet.start("--policy", "fleetkit:sleepy_clerk", "--poll-seconds", "0.1",
                    FLEET_SLEEP="0.01")
    wait_for("worker B to finish the run", lambda: store.load_run("stuck").status == "done",
             DEADLINE)
    assert a.poll() is None  # A still waits in its step, and holds nothing
    # Given back, not left to expire: B took it from nobody.
    assert "taken stuck (refund)" in fleet.log(b) and "taken stuck (refund) from" not in \
        fleet.log(b), fleet.log(b)
    lease = store.lease("stuck")
    assert lease is None or lease.owner != owner
    assert [e.kind for e in store.events("stuck")].count("stop") == 1
    assert fleet.stop(b) == 0


def test_a_command_that_waited_too_long_for_sqlite_says_so_in_one_line(
        tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    assert run_fsm("submit", "refund", KETTLE, "--db", str(db)).code == 0
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write lock
    try:
        e = run_fsm("submit", "refund", KETTLE, "--db", str(db),
                    env={"FSM_SQLITE_BUSY_TIMEOUT": "0.3"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    lines = e.stderr.strip().splitlines()
    assert e.code == 1 and len(lines) == 1, e
    assert lines[0].startswith("error: ") and \
        "waited 0.3s for another process's lock on the database" in lines[0], lines


def test_a_command_that_waited_too_long_for_a_postgres_lock_says_so(
        store: Store, pg_url: str) -> None:
    Engine(build(PostgresShop(pg_url).seed_demo()), store, clerk).start(
        HEADPHONES, user="ravi", run_id="big")
    env = {"FSM_PG_LOCK_TIMEOUT": "0.5", "FSM_RETRIES": "2", "FSM_RETRY_SECONDS": "0"}
    import psycopg

    with psycopg.connect(pg_url) as holder:  # holds the run's row, in a transaction
        holder.execute("SELECT 1 FROM runs WHERE run_id = 'big' FOR UPDATE")
        e = run_fsm("approve", "big", "--reviewer", "priya", "--note", "ok", "--db", pg_url,
                    env=env)
        holder.rollback()
    lines = e.stderr.strip().splitlines()
    assert e.code == 1, e
    assert lines[-1].startswith("error: ") and \
        "waited 0.5s for a lock another session holds (lock_timeout)" in lines[-1], lines
    assert len(lines) == 2 and lines[0].startswith("unavailable: "), lines
    assert store.load_run("big").status == "awaiting_approval"  # nothing was decided
    ok = run_fsm("approve", "big", "--reviewer", "priya", "--note", "ok", "--db", pg_url)
    assert ok.code == 0 and store.load_run("big").status == "done", ok


@pytest.mark.parametrize("env, expected", [
    pytest.param({}, ("30s", "10s", "1min"), id="defaults"),
    pytest.param({"FSM_PG_STATEMENT_TIMEOUT": "5", "FSM_PG_LOCK_TIMEOUT": "0.25",
                  "FSM_PG_IDLE_TIMEOUT": "7"}, ("5s", "250ms", "7s"), id="from-the-settings"),
])
def test_every_session_has_its_timeouts(pg_url: str, monkeypatch: pytest.MonkeyPatch,
                                        env: dict[str, str], expected: tuple[str, ...]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    s = open_store(pg_url, settings=Settings.load())
    try:
        rows = s.db.read("SELECT current_setting('statement_timeout'), "  # type: ignore[attr-defined]
                       "current_setting('lock_timeout'), "
                       "current_setting('idle_in_transaction_session_timeout')")
    finally:
        s.close()
    assert rows[0] == expected
