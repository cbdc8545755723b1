"""fsm shadow: recorded conversations replayed through a workflow's gate, in the shapes
they are found (small hand-made files in ``shadow_data/``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_inproc import Cli, error_line
from pydantic import BaseModel

from fsm import ToolSpec, define_workflow
from fsm.sandbox.shadow import Outcome, replay_recorded
from fsm.sandbox.shadow_read import Act, Hear, Recorded, Say, read_file
from fsm.sandbox.shadow_rules import PlainRules, Seen, rules_for
from workflows.retail import SHADOW, build

DATA = Path(__file__).resolve().parent / "shadow_data"
CONFIRMED_BY = ("confirmed_by 'proposal': a write runs only in 'writing', on the customer's "
                "explicit yes to the proposal of this exact call")


def shadow(name: str) -> dict[str, Outcome]:
    outs = replay_recorded(build(), read_file(DATA / name), SHADOW)
    return {o.simulation_id: o for o in outs}


# -- τ²-bench's results file --------------------------------------------------------------

def test_a_write_confirmed_in_prose_is_admitted_and_names_its_two_messages() -> None:
    o = shadow("tau2_results.json")["sim-confirmed"]
    assert (o.source, o.task_id, o.trial, o.reward, o.verdict) == (
        "tau2_results.json", "1", 0, 1.0, "admitted")
    assert o.writes == [{"turn": 8, "tool": "cancel_pending_order",
                         "args": {"order_id": "#W0000001", "reason": "no longer needed"},
                         "proposal_turn": 6, "answer_turn": 7, "error": None}]
    assert [(e["turn"], e["event"]) for e in o.inferred] == [(8, "propose")]
    assert o.state == "serving"


def test_an_agent_that_writes_without_a_yes_is_refused_by_the_confirmation_rule() -> None:
    o = shadow("tau2_results.json")["sim-no-yes"]
    assert o.verdict == "refused" and o.writes == []
    r = o.refusal
    assert r is not None
    assert (r.turn, r.tool, r.args, r.state, r.rule) == (
        6, "cancel_pending_order", {"order_id": "#W0000001", "reason": "no longer needed"},
        "serving", CONFIRMED_BY)
    assert r.reason == ("the customer's answer at turn 1 is not an explicit yes (to the "
                        "agent's message at turn 0)")


def test_one_yes_covers_each_write_its_proposal_names_and_a_failed_write_is_withdrawn() -> None:
    o = shadow("tau2_results.json")["sim-one-yes-two-writes"]
    assert (o.verdict, o.trial, o.reward) == ("admitted", 1, 0.0)
    assert [(w["args"]["order_id"], w["proposal_turn"], w["answer_turn"], w["error"])
            for w in o.writes] == [("#W0000001", 6, 7, None),
                                   ("#W0000002", 6, 7, "Non-pending order cannot be cancelled")]
    # the failed write leaves the run in 'writing'; the next read needs 'withdrawn'
    assert [(e["turn"], e["event"]) for e in o.inferred] == [
        (8, "propose"), (10, "propose"), (12, "withdrawn")]
    assert any("2 tool calls at once" in n for n in o.notes)


# -- oddities -----------------------------------------------------------------------------

def test_a_plain_list_of_simulations_with_oddities_is_read_and_noted() -> None:
    outs = shadow("simulations.json")
    odd = outs["odd-1"]
    assert (odd.task_id, odd.trial, odd.reward, odd.verdict) == ("7", 0, 1.0, "admitted")
    assert "reward '1.0' is text; read as 1.0" in odd.notes
    assert "trial '0' is text; read as 0" in odd.notes
    assert "system message at turn 0 not replayed" in odd.notes
    assert ("assistant content at turn 10 is a JSON string; its 'message' field is the "
            "message" in odd.notes)
    assert ("assistant content at turn 6 is a JSON object of several fields; replayed whole, "
            "as the customer saw it" in odd.notes)
    # arguments given as a JSON string; the item named by its name, the refund by "original
    # payment method"
    assert [(w["tool"], w["proposal_turn"], w["answer_turn"]) for w in odd.writes] == [
        ("return_delivered_order_items", 6, 7)]
    assert (outs["odd-no-score"].reward, outs["odd-no-score"].verdict) == (None, "admitted")
    assert "no reward_info: the reward is unknown" in outs["odd-no-score"].notes


@pytest.mark.parametrize(("sim", "reason"), [
    ("odd-bad-args", "the arguments of find_user_id_by_email at turn 1 are not JSON: "
                     "Expecting value"),
    ("simulations.json#3", "simulation 3 is str, not an object"),
])
def test_what_cannot_be_read_is_unreadable_with_its_reason(sim: str, reason: str) -> None:
    o = shadow("simulations.json")[sim]
    assert (o.verdict, o.reason) == ("unreadable", reason)


def test_a_score_that_is_not_a_number_is_unknown_never_guessed() -> None:
    o = shadow("simulations.json")["odd-bad-args"]
    assert o.reward is None and "reward 'high' is not a number: the reward is unknown" in o.notes


def test_openai_chat_logs_one_conversation_per_line() -> None:
    outs = shadow("chats.jsonl")
    assert list(outs) == ["chat-1", "chat-2", "chat-3", "chats.jsonl:4", "chats.jsonl:5"]
    take_back = outs["chat-1"]
    assert (take_back.reward, take_back.verdict) == (1.0, "refused")
    assert take_back.refusal is not None and take_back.refusal.rule == CONFIRMED_BY
    assert take_back.refusal.reason == ("the customer's answer at turn 4 is not an explicit "
                                        "yes (to the agent's message at turn 3)")
    before_auth = outs["chat-2"].refusal
    assert before_auth is not None
    assert (before_auth.tool, before_auth.state, before_auth.rule) == (
        "get_order_details", "authenticating",
        "TOOLS_BY_STATE['authenticating']: get_order_details is not listed")
    assert [(outs[k].verdict, outs[k].reason) for k in ("chat-3", "chats.jsonl:4",
                                                        "chats.jsonl:5")] == [
        ("unreadable", "messages is str, not a list"),
        ("unreadable", "line 4 is not JSON: Expecting value"),
        ("unreadable", "line 5 is list, not an object")]


def test_a_proposal_that_does_not_name_the_call_does_not_confirm_it() -> None:
    rec = Recorded("made", "s", reward=1.0, items=[
        Hear(1, "I'm Ana Lee, 10001; cancel my order please"),
        Act(2, "find_user_id_by_name_zip",
            {"first_name": "Ana", "last_name": "Lee", "zip": "10001"}, "ana_lee_1"),
        Act(3, "get_order_details", {"order_id": "#W0000001"},
            {"order_id": "#W0000001", "user_id": "ana_lee_1", "status": "pending",
             "payment_history": [{"payment_method_id": "paypal_1"}]}),
        Say(4, "Shall I cancel your order #W0000001?"),
        Hear(5, "yes"),
        Act(6, "cancel_pending_order", {"order_id": "#W0000001", "reason": "no longer needed"},
            {"order_id": "#W0000001"}),
    ])
    [o] = replay_recorded(build(), [rec], SHADOW)
    assert o.verdict == "refused" and o.refusal is not None
    assert o.refusal.reason == "the proposal at turn 4 does not name reason 'no longer needed'"


def test_the_same_write_again_on_the_same_yes_is_refused() -> None:
    cancel = {"order_id": "#W0000001", "reason": "no longer needed"}
    rec = Recorded("made", "s", reward=0.0, items=[
        Hear(1, "I'm Ana Lee, 10001; cancel my order please"),
        Act(2, "find_user_id_by_name_zip",
            {"first_name": "Ana", "last_name": "Lee", "zip": "10001"}, "ana_lee_1"),
        Act(3, "get_order_details", {"order_id": "#W0000001"},
            {"order_id": "#W0000001", "user_id": "ana_lee_1", "status": "pending",
             "payment_history": [{"payment_method_id": "paypal_1"}]}),
        Say(4, "Shall I cancel your order #W0000001, reason: no longer needed?"),
        Hear(5, "yes"),
        Act(6, "cancel_pending_order", cancel, {"order_id": "#W0000001"}),
        Act(7, "cancel_pending_order", cancel, {"order_id": "#W0000001"}),
    ])
    [o] = replay_recorded(build(), [rec], SHADOW)
    assert [w["turn"] for w in o.writes] == [6]
    assert o.verdict == "refused" and o.refusal is not None
    assert (o.refusal.turn, o.refusal.rule) == (7, CONFIRMED_BY)
    assert o.refusal.reason == ("the customer's yes at turn 5 was taken by the same call at "
                                "turn 6: one yes runs a call once")


def test_a_yes_on_a_condition_makes_the_conversation_unmappable() -> None:
    rec = Recorded("made", "s", reward=1.0, items=[
        Hear(1, "I'm Ana Lee, 10001; cancel my order please"),
        Act(2, "find_user_id_by_name_zip",
            {"first_name": "Ana", "last_name": "Lee", "zip": "10001"}, "ana_lee_1"),
        Say(3, "Cancel order #W0000001 for 'no longer needed'?"),
        Hear(4, "If it has not shipped: yes, cancel it."),
        Act(5, "cancel_pending_order", {"order_id": "#W0000001", "reason": "no longer needed"},
            {"order_id": "#W0000001"}),
    ])
    [o] = replay_recorded(build(), [rec], SHADOW)
    assert (o.verdict, o.reason) == ("unmappable", "turn 5: the customer's answer at turn 4 "
                                     "is a yes on a condition; whether it held is not known")


# -- event inference on a workflow of its own ---------------------------------------------

class _No(BaseModel):
    pass


def _forked(second: bool) -> Any:
    events = {"go": "b", **({"other": "c"} if second else {})}
    transitions = {"a": {**events, "end": "done"}, "b": {"end": "done"},
                   **({"c": {"end": "done"}} if second else {})}
    return define_workflow(
        "forked", transitions=transitions,
        tools_by_state={"b": ["look"], **({"c": ["look"]} if second else {})}, initial="a",
        terminal={"done"},
        asks_customer={"a"}, tools=[ToolSpec("look", lambda a, c: "ok", "Look.", _No)])


def _looks() -> Recorded:
    return Recorded("made", "s", items=[Hear(0, "hi"), Act(1, "look", {}, "seen")])


def test_the_one_event_that_allows_the_next_call_is_inferred() -> None:
    [o] = replay_recorded(_forked(False), [_looks()])
    assert (o.verdict, o.state) == ("admitted", "b")
    assert o.inferred == [{"turn": 1, "event": "go", "why": "look is allowed only after it"}]


def test_an_ambiguous_inference_is_unmappable_with_its_reason() -> None:
    [o] = replay_recorded(_forked(True), [_looks()])
    assert (o.verdict, o.reason) == ("unmappable", "turn 1: look needs one of the events go, "
                                     "other from state 'a'; which one the agent meant is not "
                                     "known")


def test_a_workflow_without_prose_rules_gets_the_plain_ones() -> None:
    spec = _forked(False)
    assert isinstance(rules_for("tests.nowhere:SPEC", spec), PlainRules)
    assert rules_for("retail", build()) is SHADOW


# -- the retail desk's prose rules --------------------------------------------------------

@pytest.mark.parametrize(("text", "answer"), [
    ("Yes, please proceed.", "yes"),
    ("YES — please proceed with both actions exactly as listed:\n- Cancel #W1", "yes"),
    ("A. Yes.\n\nPlease submit now.", "yes"),
    ("Um, yes—please go ahead.", "yes"),
    ("Thanks. My confirmations:\n- Yes, please set my default address.", "yes"),
    ("Yes, cancel order #W9373487. Reason: no longer needed.", "yes"),
    ("yes, but make it Suite 2", None),
    ("YES. Actually cancel that", None),
    ("Yes; no.", None),
    ("Please initiate a return for the tablet.", None),
    ("Thanks for checking. I'd like to return it.", None),
    ("No, keep it.", "no"),
    ("Quick check first.\n- If yes: YES — please proceed.\n- If not: switch.", "conditional"),
    ("If that is the cheapest, yes, go ahead.", "conditional"),
    ("", None),
])
def test_the_retail_answer_rule(text: str, answer: str | None) -> None:
    assert SHADOW.answer(text) == answer


def test_the_retail_mentions_accept_names_options_and_orders_that_ship_there() -> None:
    order = {"order_id": "#W1", "items": [{"name": "Lamp", "item_id": "11"},
                                          {"name": "Mug", "item_id": "12"},
                                          {"name": "Mug", "item_id": "13"}],
             "address": {"address1": "1 Elm St", "city": "Austin", "zip": "78701"},
             "payment_history": [{"payment_method_id": "credit_card_1"}]}
    product = {"variants": {"21": {"options": {"color": "blue", "size": "L", "vegan": "no"}}}}
    user = {"payment_methods": {"credit_card_1": {"last_four": "4321"}, "credit_card_2": {}}}
    seen = Seen((("get_order_details", {"order_id": "#W1"}, order),
                 ("get_product_details", {"product_id": "P"}, product),
                 ("get_user_details", {"user_id": "u"}, user)))
    found = {m.what: m for m in SHADOW.mentions(
        "exchange_delivered_order_items",
        {"order_id": "#W1", "item_ids": ["11", "12"], "new_item_ids": ["21"],
         "payment_method_id": "credit_card_1"}, seen)}
    assert found["order '#W1'"].named_in("order W1")
    assert found["item '11'"].named_in("the Lamp")
    assert not found["item '12'"].named_in("the Mug")  # two mugs: the id is needed
    assert found["new item '21'"].named_in("the blue one in size L")
    assert not found["new item '21'"].named_in("the blue one")
    assert found["payment method 'credit_card_1'"].named_in("the card ending 4321")
    assert found["payment method 'credit_card_1'"].named_in("your original payment method")
    assert not found["payment method 'credit_card_1'"].named_in("your credit card")
    [address] = SHADOW.mentions("modify_user_address", {
        "user_id": "u", "address1": "1 Elm St", "city": "Austin", "zip": "78701"}, seen)
    assert address.named_in("the address of order #W1")
    assert address.named_in("1 elm st, Austin, TX 78701")
    assert not address.named_in("your address in Austin")


# -- the command line ---------------------------------------------------------------------

def test_the_command_writes_json_and_markdown_and_exits_0(cli: Cli, tmp_path: Path) -> None:
    result = cli("shadow", str(DATA / "tau2_results.json"), str(DATA / "chats.jsonl"),
                 "--workflow", "retail", "--json", "out.json", "--markdown", "out.md")
    assert result.code == 0, result
    report = json.loads((tmp_path / "out.json").read_text())
    assert len(report["conversations"]) == 8
    first = report["conversations"][0]
    assert {k: first[k] for k in ("source", "simulation_id", "task_id", "trial", "reward",
                                  "verdict")} == {
        "source": "tau2_results.json", "simulation_id": "sim-confirmed", "task_id": "1",
        "trial": 0, "reward": 1.0, "verdict": "admitted"}
    refused = report["conversations"][1]["refusal"]
    assert {k: refused[k] for k in ("turn", "tool", "state", "rule")} == {
        "turn": 6, "tool": "cancel_pending_order", "state": "serving", "rule": CONFIRMED_BY}
    summary = report["summary"]
    assert summary["matrix"]["passed"] == {"admitted": 1, "refused": 2, "unmappable": 0,
                                           "unreadable": 0}
    assert summary["refusals_by_rule"] == {
        CONFIRMED_BY: 2, "TOOLS_BY_STATE['authenticating']: get_order_details is not listed": 1}
    assert [r["simulation_id"] for r in summary["refused_in_passed"]] == ["sim-no-yes",
                                                                          "chat-1"]
    assert summary["writes_covered_by_a_shared_yes"] == 2
    assert set(report["files"]) == {"tau2_results.json", "chats.jsonl"}
    markdown = (tmp_path / "out.md").read_text()
    assert "| passed | 1 | 2 | 0 | 0 | 3 |" in markdown
    assert "| failed | 1 | 0 | 0 | 0 | 1 |" in markdown
    assert "| passed | 1 | 2 | 0 | 0 | 3 |" in result.out


def test_a_file_of_no_known_shape_and_bad_arguments_exit_2(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "odd.json").write_text('{"results": []}')
    error_line(cli("shadow", "odd.json", "--workflow", "retail"), 2,
               "odd.json is none of the shapes fsm shadow reads")
    (tmp_path / "empty.jsonl").write_text("not json\nnor this\n")
    error_line(cli("shadow", "empty.jsonl", "--workflow", "retail"), 2,
               "neither JSON nor JSONL")
    error_line(cli("shadow", "missing.json", "--workflow", "retail"), 2,
               "no such file: missing.json")
    error_line(cli("shadow", str(DATA / "chats.jsonl"), "--workflow", "nope"), 2,
               "unknown workflow 'nope'")


def test_two_messages_in_a_row_are_one_and_text_beside_a_call_goes_with_it(
        tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"id": "x", "messages": [
        {"role": "user", "content": "hi"}, {"role": "user", "content": "I am Ana Lee, 10001"},
        {"role": "assistant", "content": "Let me look you up.", "tool_calls": [
            {"id": "1", "function": {"name": "find_user_id_by_name_zip", "arguments":
                                     '{"first_name": "Ana", "last_name": "Lee", '
                                     '"zip": "10001"}'}}]},
        {"role": "tool", "tool_call_id": "1", "content": "ana_lee_1"},
        {"role": "assistant", "content": "Found you."},
        {"role": "assistant", "content": "What can I do?"},
        {"role": "user", "content": "nothing, thanks"}]}) + "\n")
    [rec] = read_file(log)
    assert [type(i).__name__ for i in rec.items] == ["Hear", "Act", "Say", "Hear"]
    assert isinstance(rec.items[1], Act) and rec.items[1].text == "Let me look you up."
    assert isinstance(rec.items[2], Say) and rec.items[2].text == "Found you.\n\nWhat can I do?"
    assert "the agent's messages at turns 4 and 5 are read as one" in rec.notes
    assert "the customer's messages at turns 0 and 1 are read as one" in rec.notes
    [o] = replay_recorded(build(), [rec], SHADOW)
    assert (o.verdict, o.state) == ("admitted", "serving")
