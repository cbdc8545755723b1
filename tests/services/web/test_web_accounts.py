"""Accounts and the notification outbox in the run database, through the CLI and both stores."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsm import Engine, MemoryStore, SQLiteStore, Store
from fsm.web.accounts import authenticate
from workflows.refund import Shop, build
from workflows.refund.clerk import clerk


def fsm(db: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)], input=stdin,
                          capture_output=True, text=True, env=full, timeout=60)


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_users_add_passwd_disable_keep_argon2_hashes_and_never_show_the_password(
        tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    added = fsm(db, "users", "add", "priya", "--role", "approver", "--limit", "15,000",
                "--password-stdin", stdin="correct horse\n")
    assert added.returncode == 0, added.stderr
    assert "correct horse" not in added.stdout + added.stderr
    env = fsm(db, "users", "add", "audrey", "--role", "auditor", "--password-env", "PW",
              env={"PW": "auditor-secret"})
    assert env.returncode == 0, env.stderr
    (name, role, limit, hashed, disabled), = rows(
        db, "SELECT name, role, release_limit, password_hash, disabled FROM accounts "
            "WHERE name = 'priya'")
    assert (name, role, limit, disabled) == ("priya", "approver", 1500000, 0)
    assert str(hashed).startswith("$argon2id$") and "correct horse" not in str(hashed)

    store = SQLiteStore(str(db))
    try:
        assert authenticate(store, "priya", "correct horse") is not None
        assert authenticate(store, "priya", "wrong horse") is None
        assert authenticate(store, "nobody", "correct horse") is None
        changed = fsm(db, "users", "passwd", "priya", "--password-stdin", stdin="battery staple\n")
        assert changed.returncode == 0, changed.stderr
        assert authenticate(store, "priya", "correct horse") is None
        assert authenticate(store, "priya", "battery staple") is not None
        assert fsm(db, "users", "disable", "priya").returncode == 0
        assert authenticate(store, "priya", "battery staple") is None
    finally:
        store.close()


@pytest.mark.parametrize("args, stdin, fragment", [
    (["add", "x1", "--role", "boss", "--password-stdin"], "longpassword\n", "unknown role 'boss'"),
    (["add", "x2", "--role", "approver", "--password-stdin"], "short\n", "at least 8"),
    (["add", "x3", "--role", "auditor", "--limit", "5", "--password-stdin"], "longpassword\n",
     "only approvers"),
    (["add", "bad name", "--role", "auditor", "--password-stdin"], "longpassword\n",
     "is not allowed"),
    (["add", "x4", "--role", "auditor"], "", "no terminal"),
    (["passwd", "ghost", "--password-stdin"], "longpassword\n", "no account 'ghost'"),
    (["disable", "ghost"], "", "no account 'ghost'"),
])
def test_bad_account_commands_give_one_clear_line(tmp_path: Path, args: list[str], stdin: str,
                                                  fragment: str) -> None:
    proc = fsm(tmp_path / "runs.db", "users", *args, stdin=stdin)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], lines


def test_a_duplicate_account_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    assert fsm(db, "users", "add", "priya", "--role", "approver", "--password-stdin",
               stdin="longpassword\n").returncode == 0
    again = fsm(db, "users", "add", "priya", "--role", "auditor", "--password-stdin",
                stdin="longpassword\n")
    assert again.returncode == 1 and "account 'priya' already exists" in again.stderr


@pytest.fixture(params=["memory", "sqlite"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(
        str(tmp_path / "runs.db"))
    yield s
    s.close()


def test_a_pause_and_an_expiry_write_their_notifications_in_the_same_commit(
        any_store: Store) -> None:
    shop = Shop().seed_demo()
    try:
        now = [1_000_000.0]
        engine = Engine(build(shop), any_store, clerk, clock=lambda: now[0])
        run = engine.start("Order A-1002: headphones dead", user="ravi", run_id="r2")
        assert run.status == "awaiting_approval"
        (note,) = any_store.notifications(run_id="r2")
        assert note.kind == "waiting" and note.approval_id == run.pending.approval_id  # type: ignore[union-attr]
        assert note.status == "pending" and note.key == f"{note.approval_id}:waiting"
        small = engine.start("Order A-1001: the kettle arrived broken", user="asha", run_id="r1")
        assert small.status == "done" and any_store.notifications(run_id="r1") == []
        now[0] += 73 * 3600
        assert engine.sweep() == ["r2"]
        kinds = [(n.kind, n.approval_id) for n in any_store.notifications(run_id="r2")]
        # The expiry hands the run over: it now waits at the desk, and that is told too.
        (handover,) = any_store.run_handovers("r2")
        assert sorted(kinds) == sorted([("waiting", note.approval_id),
                                        ("expired", note.approval_id),
                                        ("waiting", handover.handover_id)])
        assert handover.cause == "expired"
        assert any_store.load_run("r2").status == "handed_over"
    finally:
        shop.close()
