"""fsm replay, fsm fork and fsm eval on the refund demo's own database."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_inproc import Cli, error_line

from workflows.refund.shop import Shop

DEMO_RUNS = ("r-small", "r-large", "r-late", "r-other", "r-crash")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The database ``make demo`` leaves: real fsm processes, the approval, the crash."""
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    proc = subprocess.run([sys.executable, "-m", "workflows.refund", "demo", "--db", str(db)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return db


@pytest.fixture
def db(demo_db: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the demo's database (and its signing key) for one test."""
    copy = tmp_path / "demo.db"
    shutil.copy(demo_db, copy)
    shutil.copy(f"{demo_db}.key", f"{copy}.key")
    yield copy


def _bytes(db: Path) -> str:
    """The hash of the database file and of its write-ahead log (a reader of a WAL
    database may make SQLite's -wal, empty, and its -shm index, which holds no data)."""
    wal = Path(f"{db}-wal")
    return hashlib.sha256(db.read_bytes() + b"|" + (wal.read_bytes() if wal.exists()
                                                   else b"")).hexdigest()


def _ledger(db: Path) -> list[str]:
    with Shop(str(db)) as shop:
        return [r["idempotency_key"] for r in shop.ledger()]


def test_replaying_every_demo_run_with_its_own_policy_reproduces_it_and_writes_nothing(
        cli: Cli, db: Path) -> None:
    before = _bytes(db)
    for run_id in DEMO_RUNS:
        out = cli("replay", run_id, "--db", str(db), "--json")
        assert out.code == 0, out.err
        report = json.loads(out.out)
        assert report["reproduced"] and report["split_at"] is None, report
        assert report["policy"] == "default"
        assert [s["verdict"] for s in report["steps"]] == ["same"] * len(report["steps"])
        assert report["replayed"]["status"] == report["recorded"]["status"]
        assert report["replayed"]["steps"] == report["recorded"]["steps"]
        assert report["refused"] == [] and report["not_recorded"] == []
        table = cli("replay", run_id, "--db", str(db))
        assert "reproduces the recorded run step for step" in table.out
    assert _bytes(db) == before
    paid = json.loads(cli("replay", "r-small", "--db", str(db), "--json").out)["writes"]
    assert [(w["step"], w["tool"], w["allowed"]) for w in paid] == [
        (6, "refund_item", True), (7, "send_reply", True)]
    own = json.loads(cli("replay", "r-small", "--db", str(db), "--json").out)
    assert own["write_attempts"] == own["writes"]  # nothing refused
    assert _ledger(db) == ["r-small:6", "r-large:6", "r-crash:6"]


def test_a_different_policy_shows_where_the_paths_split(cli: Cli, db: Path) -> None:
    before = _bytes(db)
    out = cli("replay", "r-small", "--policy", "eval_policies:skips_policy", "--db", str(db),
              "--json")
    assert out.code == 0, out.err
    report = json.loads(out.out)
    assert not report["reproduced"] and report["split_at"] == 3
    verdicts = [s["verdict"] for s in report["steps"]]
    assert verdicts[:3] == ["same", "same", "different"] and set(verdicts[3:]) == {
        "after split"}
    assert report["steps"][2]["recorded"].startswith("get_policy")
    assert report["steps"][2]["replayed"] == 'advance {"event": "verified"}'
    assert report["refused"] and report["refused"][0]["event"] == "verified"
    assert report["writes"] == [] and report["write_attempts"] == []  # it never got to pay
    assert report["refused"][0]["args"] == {"event": "verified"}
    # Every write attempt, with its arguments and whether the tables and guards allowed it;
    # "writes" keeps those allowed.
    twice = json.loads(cli("replay", "r-small", "--policy", "eval_policies:pays_twice",
                           "--db", str(db), "--json").out)
    paid = {"amount_paise": 35000, "item_id": "kettle-1", "order_id": "A-1001"}
    assert [(w["step"], w["tool"], w["args"], w["allowed"]) for w in twice["write_attempts"]
            ] == [(6, "refund_item", paid, True), (7, "refund_item", paid, False),
                  (8, "send_reply", twice["write_attempts"][2]["args"], True)]
    assert twice["write_attempts"][1]["note"] == twice["refused"][0]["reason"] == (
        "tool 'refund_item' is not allowed in state 'replying' (allowed: send_reply)")
    assert [w["step"] for w in twice["writes"]] == [6, 8]
    assert twice["refused"] == [{"step": 7, "tool": "refund_item", "event": None,
                                 "args": paid, "reason": twice["refused"][0]["reason"]}]
    table = cli("replay", "r-small", "--policy", "eval_policies:pays_twice", "--db", str(db))
    assert "the paths split at step 7" in table.out
    assert "write attempts: 3 (none ran): 2 the tables and guards allowed, 1 refused" \
        in table.out
    shown = json.dumps(paid, sort_keys=True)
    assert re.search(rf"│ 7 +│ refund_item │ {re.escape(shown)} +│ no +│ tool 'refund_item' "
                     "is not allowed", table.out), table.out
    assert "refused attempts: 1" in table.out
    assert f"  step 7: refund_item {shown}: tool 'refund_item' is not allowed" in table.out
    # --check: for CI, the split is exit 1 (the report as ever); a reproduction is exit 0.
    checked = cli("replay", "r-small", "--policy", "eval_policies:pays_twice", "--check",
                  "--db", str(db))
    assert checked.code == 1 and "the paths split at step 7" in checked.out, checked
    assert cli("replay", "r-small", "--check", "--db", str(db)).code == 0
    assert _bytes(db) == before


def test_replay_from_a_step_replays_the_recording_up_to_it(cli: Cli, db: Path) -> None:
    out = cli("replay", "r-small", "--policy", "eval_policies:skips_policy", "--from", "4",
              "--db", str(db), "--json")
    report = json.loads(out.out)
    assert report["reproduced"], report  # from step 5 on, the clerk and it agree


def test_fork_resume_and_audit_on_the_command_line(cli: Cli, db: Path) -> None:
    out = cli("fork", "r-large", "--at", "6", "--run-id", "f1", "--db", str(db), "--json")
    assert out.code == 0, out.err
    assert json.loads(out.out)["forked_from"]["run_id"] == "r-large"
    assert cli("resume", "f1", "--db", str(db)).code == 0
    audited = cli("audit", "f1", "--db", str(db))
    assert audited.code == 0 and "audit ok" in audited.out, audited
    assert audited.out.splitlines()[1] == "forked from r-large at step 6; the link to it " \
                                          "verified", audited.out
    report = json.loads(cli("audit", "f1", "--db", str(db), "--json").out)
    origin = report["forked_from"]
    assert (origin["run_id"], origin["step"], origin["link"]) == ("r-large", 6, "verified")
    assert isinstance(origin["seq"], int) and len(origin["hash"]) == 64
    assert json.loads(cli("audit", "r-large", "--db", str(db), "--json").out)[
        "forked_from"] is None
    assert "forked from" not in cli("audit", "r-large", "--db", str(db)).out
    assert _ledger(db) == ["r-small:6", "r-large:6", "r-crash:6"]
    runs = {r["run_id"]: r for r in json.loads(cli("runs", "--db", str(db), "--json").out)}
    assert runs["f1"]["forked_from"] == {"run_id": "r-large", "step": 6}
    assert runs["r-large"]["forked_from"] is None
    assert "r-large @ step 6" in cli("runs", "--db", str(db)).out


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (("fork", "r-small", "--at", "9"), 2, "it committed steps 0 to 7"),
    (("fork", "r-small", "--at", "7"), 2, "it had stopped there (done)"),
    (("fork", "nope", "--at", "1"), 1, "run 'nope' not found"),
    (("fork", "r-small", "--at", "2", "--run-id", "r-large"), 2, "a run of that id exists"),
    (("replay", "r-small", "--from", "9"), 2, "cannot replay run 'r-small' at step 9"),
    (("replay", "nope"), 1, "run 'nope' not found"),
    (("replay", "r-small", "--policy", "eval_policies:nothing"), 2, "eval_policies"),
    (("replay", "r-small", "--policy", "p", "--model", "m"), 2, "not both"),
])
def test_bad_input_is_one_line_and_changes_nothing(cli: Cli, db: Path, args: tuple[str, ...],
                                                   code: int, fragment: str) -> None:
    before = _bytes(db)
    error_line(cli(*args, "--db", str(db)), code, fragment)
    assert _bytes(db) == before


def test_replay_on_postgresql_reads_in_read_only_sessions(cli: Cli, pg_url: str) -> None:
    import psycopg

    from fsm.store.postgres import PostgresStore

    assert cli("run", "refund", "Order A-1001: kettle broken", "--user", "asha",
               "--run-id", "pg1", "--db", pg_url).code == 0
    out = cli("replay", "pg1", "--db", pg_url, "--json")
    assert out.code == 0 and json.loads(out.out)["reproduced"], out.err
    with PostgresStore(pg_url, readonly=True) as reader, reader.db.pool.connection() as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("UPDATE runs SET status = 'failed' WHERE run_id = 'pg1'")
    assert cli("show", "pg1", "--db", pg_url, "--json").code == 0


def test_a_run_whose_workflow_cannot_be_loaded_is_refused_in_one_line(
        cli: Cli, tmp_path: Path) -> None:
    module = tmp_path / "gone_desk.py"
    module.write_text("from workflows.refund import WORKFLOW, POLICY  # noqa: F401\n")
    db = tmp_path / "g.db"
    assert cli("run", "gone_desk:WORKFLOW", "Order A-1001: kettle broken", "--user", "asha",
               "--run-id", "g1", "--db", str(db)).code == 0
    module.unlink()
    sys.modules.pop("gone_desk", None)
    before = _bytes(db)
    error_line(cli("replay", "g1", "--db", str(db)), 2, "gone_desk")
    error_line(cli("fork", "g1", "--at", "2", "--db", str(db)), 2, "gone_desk")
    assert _bytes(db) == before


def test_reads_not_in_the_recording_unless_live_reads(cli: Cli, db: Path) -> None:
    args = ("replay", "r-small", "--policy", "eval_policies:reads_another_order",
            "--db", str(db), "--json")
    report = json.loads(cli(*args).out)
    assert report["not_recorded"] == [{"step": 1, "tool": "get_order",
                                       "args": {"order_id": "A-1003"}}]
    assert report["split_at"] == 1
    live = json.loads(cli(*args, "--live-reads").out)
    assert live["not_recorded"] == [] and live["split_at"] == 1
