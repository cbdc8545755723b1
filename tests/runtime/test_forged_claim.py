"""A writer of the database without the deployment's key cannot make the log witness a
payment: a forged ``claim`` event chained from the run row's head, the head moved, and a
``DONE`` effect row naming the claim's hash."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from fsm import Engine, SQLiteStore
from fsm.auditor.audit import audit
from fsm.errors import SigningKeyError
from fsm.records import Effect, canonical
from fsm.runtime.claims import binding, claim_event
from fsm.signing import Keys
from workflows.refund import Shop, build
from workflows.refund.clerk import clerk

HEADPHONES = "Order A-1002: headphones dead"


def _approved(tmp_path: Path) -> tuple[str, Shop]:
    """A refund of ₹1,800 approved and about to pay (the decision recorded, not driven)."""
    db = str(tmp_path / "runs.db")
    shop = Shop(str(tmp_path / "shop.db")).seed_demo()
    with SQLiteStore(db) as store:
        engine = Engine(build(shop), store, clerk)
        assert engine.start(HEADPHONES, user="ravi", run_id="big").status == \
            "awaiting_approval"
        run = engine.decide("big", True, "priya", "ok", drive=False)
        assert (run.status, run.state) == ("running", "refunding")
    return db, shop


def _forge(db: str) -> str:
    """What a writer without the key does: a claim event chained from ``log_head``, the
    head moved, the effect row DONE with ``{"status": "ok"}`` and the claim's hash."""
    with SQLiteStore(db, readonly=True) as store:
        run = store.load_run("big")
        (approval,) = store.approvals("big", pending_only=False)
    decision = run.facts["decision"]
    args = {"order_id": "A-1002", "item_id": decision["item_id"],
            "amount_paise": decision["amount_paise"]}
    assert args["amount_paise"] == 180_000
    key, tool = f"big:{run.step + 1}", "refund_item"
    con = sqlite3.connect(db)
    count, head = con.execute("SELECT log_count, log_head FROM runs WHERE run_id = 'big'"
                              ).fetchone()
    ev = claim_event(run, step=run.step + 1, time=run.updated_at + 1, tool=tool, key=key,
                     args=args, bound=binding(None, approval))
    ev = ev.model_copy(update={"seq": count, "prev_hash": head})
    ev = ev.model_copy(update={"hash": ev.compute_hash()})
    con.execute("INSERT INTO events (run_id, seq, step, time, kind, state_before, "
                "state_after, tool, event, reason, cost_micros, tokens, reviewer, detail, "
                "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (ev.run_id, ev.seq, ev.step, ev.time, ev.kind, ev.state_before,
                 ev.state_after, ev.tool, ev.event, ev.reason, ev.cost_micros, ev.tokens,
                 ev.reviewer, canonical(ev.detail), ev.prev_hash, ev.hash))
    con.execute("UPDATE runs SET log_count = ?, log_head = ? WHERE run_id = 'big'",
                (count + 1, ev.hash))
    con.execute("INSERT INTO effects (key, run_id, step, tool, args, status, result, error, "
                "started_at, finished_at, claim) VALUES (?, ?, ?, ?, ?, 'DONE', ?, NULL, ?, "
                "?, ?)", (key, "big", ev.step, tool, canonical(args),
                          canonical({"status": "ok"}), ev.time, ev.time, ev.hash))
    con.commit()
    con.close()
    return key


def test_a_forged_witnessed_claim_never_tells_the_customer_it_was_paid(
        tmp_path: Path) -> None:
    db, shop = _approved(tmp_path)
    key = _forge(db)
    with SQLiteStore(db) as store:
        run = Engine(build(shop), store, clerk).resume("big")
        answers = [m.get("final", "") for m in store.messages("big")]
        paid = [p for p in shop.ledger() if p["idempotency_key"] == key]
        # Either the refund is really paid once, or a person takes over; never "paid"
        # on the word of a row nobody signed.
        assert (run.status, run.state) == ("handed_over", "refunding"), run
        assert "no signed commit" in (run.reason or "") or "not signed" in (run.reason or "")
        assert paid == [] and not any("on its way" in a for a in answers)
        report = audit(store, "big")
    assert not report.ok
    assert any("written by no signed commit" in p for p in report.problems), report.problems


def test_the_audit_fails_on_the_forged_rows_before_anyone_resumes(tmp_path: Path) -> None:
    db, _ = _approved(tmp_path)
    _forge(db)
    with SQLiteStore(db, readonly=True) as store:
        report = audit(store, "big")
    assert any("not signed" in p for p in report.problems), report.problems


def test_a_signed_database_whose_key_is_missing_is_refused_and_nothing_is_written(
        tmp_path: Path) -> None:
    db, _ = _approved(tmp_path)
    key = Path(db + ".key")
    assert key.stat().st_mode & 0o777 == 0o600
    key.rename(tmp_path / "elsewhere.key")
    with pytest.raises(SigningKeyError, match="holds signed runs, but its signing key file"):
        SQLiteStore(db)
    assert not key.exists()  # no new key was made
    Keys.generate(str(key))  # another key: the wrong one
    with pytest.raises(SigningKeyError, match="which the key file .* does not hold"):
        SQLiteStore(db)


def test_after_a_rotation_old_runs_still_verify_and_new_ones_use_the_new_key(
        tmp_path: Path) -> None:
    db, shop = _approved(tmp_path)
    with SQLiteStore(db) as store:
        old = store.keys.current
        Engine(build(shop), store, clerk).resume("big")
        assert audit(store, "big").ok
        store.keys.rotate()
    with SQLiteStore(db) as store:
        assert store.keys.current != old and old in store.keys.public
        assert audit(store, "big").ok  # signed by the old key, which the keyring keeps
        run = Engine(build(shop), store, clerk).start(
            "Order A-1001: the kettle arrived broken", user="asha", run_id="k2")
        assert run.status == "done"
        assert (store.signed_head("k2")[2] or "").startswith(f"{store.keys.current}:")
        assert audit(store, "k2").ok


def test_recovery_asks_the_gateway_and_a_row_it_contradicts_hands_the_run_over(
        tmp_path: Path) -> None:
    """A claim the log witnesses, left STARTED by a crash, then marked DONE behind fsm's
    back: the refund workflow declares a lookup, so recovery asks the gateway, which has
    no payment under the key; the run is handed over and nothing is paid or said."""
    db, shop = _approved(tmp_path)
    with SQLiteStore(db) as store:
        run = store.load_run("big")
        decision = run.facts["decision"]
        args = {"order_id": "A-1002", "item_id": decision["item_id"],
                "amount_paise": decision["amount_paise"]}
        (approval,) = store.approvals("big", pending_only=False)
        key = f"big:{run.step + 1}"
        claimed = store.claim_effect(
            Effect(key=key, run_id="big", step=run.step + 1, tool="refund_item", args=args,
                   status="STARTED", started_at=run.updated_at + 1),
            version=run.version,
            claim=claim_event(run, step=run.step + 1, time=run.updated_at + 1,
                              tool="refund_item", key=key, args=args,
                              bound=binding(None, approval)))
        assert claimed is None  # a signed claim, as a step makes before it pays
    con = sqlite3.connect(db)
    con.execute("UPDATE effects SET status = 'DONE', result = ? WHERE key = ?",
                (canonical({"status": "ok"}), key))
    con.commit()
    con.close()
    with SQLiteStore(db) as store:
        run = Engine(build(shop), store, clerk).resume("big")
        assert run.status == "handed_over", run
        assert "the world has no outcome under its key" in (run.reason or "")
        assert shop.ledger() == []
        assert not any("on its way" in m.get("final", "") for m in store.messages("big"))
