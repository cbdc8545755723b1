"""fsm shadow --live: the calls the gate admits run on a fresh copy of the retail
database; the final database is compared with τ²-bench's expected one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_inproc import Cli, error_line

from fsm.sandbox.shadow import Outcome, replay_one
from fsm.sandbox.shadow_live import live_for
from fsm.sandbox.shadow_read import Act, Hear, Recorded, Say, read_file
from workflows.retail import LIVE, SHADOW, build
from workflows.retail.live import RetailCopy
from workflows.retail.memory import MemoryRetail

ORDER = "#W9348897"  # Daiki Sanchez's pending order, which τ²-bench's task 38 cancels
USER = "daiki_sanchez_3253"
CANCEL = {"order_id": ORDER, "reason": "no longer needed"}
#: τ²-bench's reference actions of task 38, as its action checks carry them.
TASK_38 = (
    {"action_id": "38_0", "name": "find_user_id_by_email",
     "arguments": {"email": "daikisanchez1479@example.com"}},
    {"action_id": "38_1", "name": "find_user_id_by_name_zip",
     "arguments": {"first_name": "Daiki", "last_name": "Sanchez", "zip": "46236"}},
    {"action_id": "38_9", "name": "calculate",
     "arguments": {"expression": "466.75 + 288.82 + 135.24 + 193.38 + 46.66"}},
    {"action_id": "38_10", "name": "cancel_pending_order", "arguments": CANCEL},
)


def _recorded(answer: str, *, task_id: str = "38",
              checked: tuple[dict[str, Any], ...] = ()) -> Recorded:
    """A customer asks to cancel their order; the agent proposes it, hears ``answer`` and
    cancels. The recorded results are what τ²-bench's tools answered."""
    fresh = MemoryRetail()
    order = fresh.call("get_order_details", {"order_id": ORDER})
    return Recorded("made", f"cancel-{answer}", task_id=task_id, trial=0, reward=1.0,
                    checked_actions=checked, items=[
        Hear(0, "Hi, please cancel my order. I am Daiki Sanchez, zip 46236."),
        Act(1, "find_user_id_by_name_zip",
            {"first_name": "Daiki", "last_name": "Sanchez", "zip": "46236"}, USER),
        Act(2, "get_order_details", {"order_id": ORDER}, order),
        Say(3, f"Order {ORDER} is pending. Shall I cancel it with the reason 'no longer "
               "needed' (yes/no)?"),
        Hear(4, answer),
        Act(5, "cancel_pending_order", CANCEL, {**order, "status": "cancelled"}),
    ])


def _live(rec: Recorded) -> tuple[Outcome, RetailCopy]:
    copy = LIVE.fresh(rec)
    out = replay_one(build(), rec, SHADOW, live=copy.spec)
    return out, copy


def test_an_admitted_write_runs_on_the_fresh_copy_and_matches_the_expected_database() -> None:
    out, copy = _live(_recorded("Yes, please go ahead."))
    assert out.verdict == "admitted"
    rows = copy.db.rows()
    assert rows["orders"][ORDER]["status"] == "cancelled"
    assert rows["orders"][ORDER]["cancel_reason"] == "no longer needed"
    assert [(w["tool"], w["args"]) for w in copy.db.writes()] == [
        ("cancel_pending_order", CANCEL)]
    result = copy.compare()
    assert (result.matched, result.differences) == (True, [])
    assert result.expected == ("τ²-bench's expected database: the reference actions of "
                               "task 38, applied to a fresh one")
    assert result.writes_run == [{"tool": "cancel_pending_order", "args": CANCEL}]


def test_a_refused_write_never_runs_and_the_database_differs_where_it_would_have() -> None:
    out, copy = _live(_recorded("Hmm, let me think about it."))
    assert out.verdict == "refused"
    assert out.refusal is not None and out.refusal.tool == "cancel_pending_order"
    assert copy.db.writes() == []
    assert copy.db.rows() == MemoryRetail().rows()  # untouched
    result = copy.compare()
    assert result.matched is False and result.writes_run == []
    assert f"orders['{ORDER}'].status: 'pending', expected 'cancelled'" in result.differences


def test_the_expected_database_is_that_of_the_actions_the_score_checked() -> None:
    """A results file may label a simulation with another task than the one τ²-bench
    scored it against: the score's own action checks say which."""
    rec = _recorded("yes", task_id="0", checked=TASK_38)
    out, copy = _live(rec)
    result = copy.compare()
    assert result.matched is True
    assert result.expected == (
        "τ²-bench's expected database: the 4 reference actions of τ²-bench's own action "
        "checks (those of task 38; the simulation says task 0), applied to a fresh one")
    # by its label alone, it would be compared with task 0's expected database
    labelled = RetailCopy(_recorded("yes", task_id="0"))
    labelled.db.call("cancel_pending_order", CANCEL)
    assert labelled.compare().matched is False


def test_a_workflow_without_a_live_environment_has_none() -> None:
    assert live_for("retail") is LIVE
    assert live_for("refund") is None


def _simulation(rec: Recorded) -> dict[str, Any]:
    """``rec`` as τ²-bench writes a simulation."""
    messages: list[dict[str, Any]] = [{"role": "assistant", "content": "Hi! How can I help?",
                                       "turn_idx": 0}]
    for item in rec.items:
        turn = len(messages)
        if isinstance(item, Hear):
            messages.append({"role": "user", "content": item.text, "turn_idx": turn})
        elif isinstance(item, Say):
            messages.append({"role": "assistant", "content": item.text, "turn_idx": turn})
        else:
            assert isinstance(item, Act)
            messages.append({"role": "assistant", "content": None, "turn_idx": turn,
                             "tool_calls": [{"id": f"c{turn}", "name": item.tool,
                                             "arguments": item.args}]})
            messages.append({"role": "tool", "id": f"c{turn}", "turn_idx": turn + 1,
                             "content": json.dumps(item.result)})
    return {"id": rec.simulation_id, "task_id": "0", "trial": 0, "messages": messages,
            "reward_info": {"reward": 1.0, "action_checks": [
                {"action": a, "action_match": True} for a in TASK_38]}}


def test_the_command_reports_each_final_database_and_the_count(cli: Cli,
                                                              tmp_path: Path) -> None:
    sims = [_simulation(_recorded("Yes, please go ahead.")),
            _simulation(_recorded("Hmm, let me think about it."))]
    (tmp_path / "sims.json").write_text(json.dumps(sims))
    assert [r.checked_actions for r in read_file(tmp_path / "sims.json")] == [TASK_38] * 2
    result = cli("shadow", "sims.json", "--workflow", "retail", "--live", "--json",
                 "out.json", "--markdown", "out.md")
    assert result.code == 0, result
    report = json.loads((tmp_path / "out.json").read_text())
    live = [(c["verdict"], c["live"]["matched"]) for c in report["conversations"]]
    assert live == [("admitted", True), ("refused", False)]
    assert report["conversations"][1]["live"]["differences"][0] == \
        f"orders['{ORDER}'].cancel_reason: None, expected 'no longer needed'"
    summary = report["live"]["summary"]
    assert (summary["compared"], summary["matched"], summary["differs"]) == (2, 1, 1)
    assert "final databases: 1 of 2 match the expected one" in result.out
    assert "**1 of 2** final states compared match" in (tmp_path / "out.md").read_text()


def test_live_on_a_workflow_without_a_live_environment_exits_2(cli: Cli,
                                                               tmp_path: Path) -> None:
    (tmp_path / "chats.jsonl").write_text(json.dumps(
        {"id": "c", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    error_line(cli("shadow", "chats.jsonl", "--workflow", "refund", "--live"), 2,
               "workflow 'refund' has no live environment")


def test_the_checked_actions_count_even_where_the_pinned_task_differs() -> None:
    """τ²-bench may have scored a conversation against another version of its task: the
    expected database is that of the actions the score checked, and the report says so."""
    renamed = (*TASK_38[:3], {**TASK_38[3], "action_id": "38_99"})
    _, copy = _live(_recorded("yes", checked=renamed))
    result = copy.compare()
    assert result.matched is True
    assert result.expected == ("τ²-bench's expected database: the 4 reference actions of "
                               "τ²-bench's own action checks; 38_99 not in the pinned task, "
                               "applied to a fresh one")
    _, reads_only = _live(_recorded("yes", checked=TASK_38[:3]))
    result = reads_only.compare()
    assert result.matched is False
    assert f"orders['{ORDER}'].status: 'cancelled', expected 'pending'" in result.differences
