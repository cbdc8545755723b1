"""The worker on one machine: SQLite (polling, no notifications), the commands around
it (``fsm submit``, ``approve --no-drive``, ``worker --stats``), the metrics endpoint,
database URLs, and the heartbeat that keeps a lease alive while a run is driven."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from crashkit import FSM_BIN
from fleetkit import run_until
from prometheus_client.parser import text_string_to_metric_families

from fsm import Engine, EngineConfig, MemoryStore, StoreError, StoreUnavailable, open_store
from fsm.auditor.audit import audit
from fsm.store import SQLiteStore
from fsm.worker import Worker, WorkerConfig
from workflows.refund import build, clerk
from workflows.refund.shop import Shop


def fsm(*args: str, db: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([FSM_BIN, *args, "--db", db], capture_output=True, text=True,
                          env={**os.environ, "FSM_DB": db})
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def drive_with_worker(store: Any, until: Any, **config: Any) -> tuple[Worker, list[str]]:
    lines: list[str] = []
    worker = Worker(store, WorkerConfig(poll_seconds=0.05, **config), log=lines.append)
    run_until(worker, until)
    return worker, lines


def test_a_worker_on_sqlite_drives_submitted_runs_by_polling(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    db = str(tmp_path / "runs.db")
    monkeypatch.setenv("FSM_DB", db)
    assert fsm("submit", "refund", "Order A-1001: the kettle arrived broken", "--user", "asha",
               "--run-id", "k1", db=db).stdout.strip() == \
        "submitted k1 (refund, running in collecting)"
    fsm("submit", "refund", "Order A-1002: headphones dead", "--user", "ravi", "--run-id", "h1",
        db=db)
    store = open_store(f"sqlite:///{db}")
    assert isinstance(store, SQLiteStore)
    # The worker's first look at the runs' definition fails (the database went away for a
    # moment): the definition is looked at again, not left unknown and its runs unclaimed.
    failed: list[str] = []
    events = store.events

    def events_failing_once(run_id: str) -> Any:
        if not failed:
            failed.append(run_id)
            raise StoreUnavailable("database 'runs.db': unavailable for a moment")
        return events(run_id)

    store.events = events_failing_once  # type: ignore[method-assign]
    try:
        worker, lines = drive_with_worker(
            store, lambda: {r.status for r in store.list_runs()} == {"done",
                                                                    "awaiting_approval"})
        assert failed and any("cannot claim runs: database 'runs.db': unavailable" in x
                              for x in lines)
        assert any("polling every" in x for x in lines)
        assert any(x.endswith("finished k1 (done)") for x in lines)
        assert any(x.endswith("paused h1 (awaiting approval)") for x in lines)
        stats = worker.stats()
        assert stats["finished"] == 1 and stats["paused"] == 1 and stats["steps"] >= 12
        assert stats["approvals_waiting"] == 1 and stats["in_flight"] == 0
        out = fsm("approve", "h1", "--reviewer", "priya", "--no-drive", "--json", db=db)
        assert json.loads(out.stdout)["status"] == "running"  # left to the workers
        assert json.loads(fsm("worker", "--stats", "--json", db=db).stdout)["runnable"] == 1
        drive_with_worker(store, lambda: store.load_run("h1").status == "done")
        assert [(p["order_id"], p["amount_paise"]) for p in Shop(db).ledger()] == [
            ("A-1001", 35_000), ("A-1002", 180_000)]
        assert all(audit(store, r).ok for r in ("k1", "h1"))
        stats_out = json.loads(fsm("worker", "--stats", "--json", db=db).stdout)
        assert stats_out["runs"] == {"done": 2} and stats_out["approvals_waiting"] == 0
    finally:
        store.close()


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics over loopback, parsed: (sample name, labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        body = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def test_the_metrics_endpoint_serves_steps_tokens_cost_and_leases(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "runs.db")
    monkeypatch.setenv("FSM_DB", db)  # the refund workflow's shop follows the runs
    with SQLiteStore(db) as store:
        with Engine(build(), store) as engine:
            for run_id, goal, user in (("k1", "Order A-1001: the kettle arrived broken", "asha"),
                                       ("h1", "Order A-1002: headphones dead", "ravi")):
                engine.start(goal, user=user, run_id=run_id, drive=False)
        _metered_fleet(store)


def _metered_fleet(store: SQLiteStore) -> None:
    worker = Worker(store, WorkerConfig(concurrency=3, poll_seconds=0.05,
                                        policy="crashkit:metered_clerk"), log=lambda _: None)
    with worker.serving_metrics(0) as port:
        before = _scrape(port)
        assert before[("fsm_worker_in_flight", ())] == 0
        assert before[("fsm_worker_leases_held", ())] == 0
        assert before[("fsm_worker_concurrency", ())] == 3
        run_until(worker, lambda: {r.status for r in store.list_runs()} ==
                  {"done", "awaiting_approval"})
        after = _scrape(port)
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other")
        info.value.close()
    assert info.value.code == 404
    steps = sum(store.load_run(r).used.steps for r in ("k1", "h1"))
    refund = (("workflow", "refund"),)
    assert after[("fsm_steps_total", refund)] == steps > 0
    assert after[("fsm_tokens_total", (("direction", "input"), ("workflow", "refund")))] == \
        120 * steps
    assert after[("fsm_tokens_total", (("direction", "output"), ("workflow", "refund")))] == \
        30 * steps
    assert after[("fsm_cost_micros_total", refund)] == 45 * steps == \
        sum(store.load_run(r).used.cost_micros for r in ("k1", "h1"))
    assert after[("fsm_pauses_total", refund)] == 1
    assert after[("fsm_stops_total", (("status", "done"), ("workflow", "refund")))] == 1
    assert after[("fsm_worker_approvals_waiting", ())] == 1
    assert after[("fsm_worker_finished_total", ())] == 1
    assert after[("fsm_worker_paused_total", ())] == 1
    assert after[("fsm_worker_steps_total", ())] == worker.stats()["steps"] > 0
    assert after[("fsm_worker_leases_held", ())] == 0


def test_leases_held_counts_the_lease_a_failed_run_keeps(tmp_path: Path) -> None:
    """A run whose driving failed (here its policy cannot be imported) keeps its lease
    until it expires, so that nobody spins on it: not in flight, but held."""
    with SQLiteStore(str(tmp_path / "runs.db")) as store:
        with Engine(build(), store) as engine:
            engine.start("Order A-1001: the kettle arrived broken", user="asha", run_id="k1",
                         drive=False)
        said: list[str] = []
        worker = Worker(store, WorkerConfig(concurrency=2, poll_seconds=0.05,
                                            lease_seconds=60, policy="nowhere:clerk"),
                        log=said.append)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            # the worker says "dropped" before its thread lets go of the run: wait for both
            deadline = time.monotonic() + 30
            stats = worker.stats()
            while not (any("dropped k1" in line for line in said) and
                       stats["in_flight"] == 0) and time.monotonic() < deadline:
                time.sleep(0.02)
                stats = worker.stats()
        finally:
            worker.stop()
            thread.join(30)
        lease = store.lease("k1")
    assert any("dropped k1" in line for line in said), said
    assert (stats["in_flight"], stats["leases_held"]) == (0, 1), stats
    assert lease is not None and lease.until > time.time() + 30


def test_a_heartbeat_keeps_the_lease_of_a_run_that_is_driven(shop: Shop) -> None:
    store = MemoryStore()
    seen: list[float | None] = []

    def slow(view: Any) -> Any:
        lease = store.lease(view.run_id)
        seen.append(lease.until if lease else None)
        # The policy call lasts until the heartbeat has renewed the lease under it (every
        # 2/3 s), however long the machine takes to get there.
        deadline = time.monotonic() + 60
        while (renewed := store.lease(view.run_id)) is None or renewed.until == seen[-1]:
            assert time.monotonic() < deadline, "the heartbeat never renewed the lease"
            time.sleep(0.02)
        return clerk(view)

    # Renewed every 2/3 s while the policy waits.
    engine = Engine(build(shop), store, slow, config=EngineConfig(lease_seconds=2.0))
    run = engine.start("Order A-1001: broken", user="asha", run_id="hb")
    assert run.status == "done"
    assert len(seen) == 7 and all(u is not None for u in seen)
    assert all(b > a for a, b in zip(seen, seen[1:], strict=False))  # renewed, not re-taken
    assert store.lease("hb") is None  # released at the end


@pytest.mark.parametrize("url, message", [
    ("mysql://x/y", "database URL scheme 'mysql' is not supported"),
    ("sqlite:///", "names no file"),
    ("postgresql://nobody@127.0.0.1:1/nope", "cannot open database postgresql://nobody@"),
])
def test_a_bad_database_url_is_one_clear_error(url: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=message):
        open_store(url)
    proc = fsm("runs", db=url, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: ") and message in proc.stderr


def test_passwords_are_kept_out_of_messages() -> None:
    with pytest.raises(StoreError) as info:
        open_store("postgresql://bob:s3cret@127.0.0.1:1/db")
    assert "s3cret" not in str(info.value) and "bob:***@" in str(info.value)


def test_a_worker_and_the_inbox_drive_a_model_run_with_the_server_and_timeout_it_recorded(
        shop: Shop) -> None:
    """``fsm run --model M --base-url U --timeout T`` records all three; whoever resumes the
    run (a worker, an approval in the inbox) asks the same server with the same patience."""
    from fsm.adapters.recorded import recorded_policy

    store = MemoryStore()
    meta = {"workflow_ref": "refund", "policy": "model:qwen",
            "base_url": "http://127.0.0.1:9/v1", "timeout": 300.0}
    run = Engine(build(shop), store, clerk).start("Order A-1001: broken", run_id="m1",
                                                   drive=False, meta=meta)
    events = store.events("m1")
    _, by_worker = Worker(store)._parts(run, events)
    by_inbox = recorded_policy("refund", build(shop), events[0].detail)
    for policy in (by_worker, by_inbox):
        assert (policy.model, policy.base_url, policy.timeout) == \
            ("qwen", "http://127.0.0.1:9/v1", 300.0)


def test_one_sweep_expires_every_due_approval_and_the_worker_counts_each(shop: Shop) -> None:
    store = MemoryStore()
    spec = build(shop)
    for run_id, order in (("h1", "A-1002"), ("h2", "A-1002")):
        run = Engine(spec, store, clerk).start(f"Order {order}: headphones dead", user="ravi",
                                               run_id=run_id, meta={"workflow_ref": "refund"})
        assert run.status == "awaiting_approval"
    lines: list[str] = []
    later = time.time() + spec.approval_ttl_seconds + 60
    worker = Worker(store, clock=lambda: later, log=lines.append)
    worker._sweep()
    assert worker.counts.expired == 2
    for run_id in ("h1", "h2"):
        assert store.load_run(run_id).status != "awaiting_approval"
        assert sum(f"expired {run_id}'s approval" in line for line in lines) == 1
    assert [a.decision for a in store.approvals(pending_only=False)] == ["expired", "expired"]


def test_a_sweep_reports_only_the_runs_it_expired(shop: Shop) -> None:
    """An approval decided between the sweep's listing and its turn is not reported (two
    workers sweeping at once each log only what they expired)."""
    store = MemoryStore()
    spec = build(shop)
    Engine(spec, store, clerk).start("Order A-1002: headphones dead", user="ravi", run_id="h1")
    listed = store.approvals(pending_only=True)
    Engine(spec, store, clerk).decide("h1", True, "meera", "checked")
    store.approvals = lambda *args, **kwargs: listed  # type: ignore[method-assign]
    later = time.time() + spec.approval_ttl_seconds + 60
    assert Engine(spec, store, clerk, clock=lambda: later).sweep() == []
    assert store.load_run("h1").status == "done"
