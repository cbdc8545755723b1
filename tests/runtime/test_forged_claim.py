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
from fsm.records import canonical
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
