"""Bugs in workflow code fail fast, and tools that fail are not mistaken for loops.

A guard, a ``remember`` hook or a ``presentation`` function that raises fails the run on
that step with a one-line reason and the traceback in the log (the model never loops on
it); a tool that raised may be called again with the same arguments a bounded number of
times; a write that fails after an earlier write of the run succeeded hands the run over
with both facts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli_inproc import Cli
from pydantic import BaseModel

from fsm import Engine, Guard, MemoryStore, Presentation, ToolSpec, define_workflow
from fsm.auditor.audit import audit
from fsm.cli import exits
from fsm.runtime.gate import MAX_FAILED_CALLS
from fsm.testing import ScriptedPolicy


class Account(BaseModel):
    account: str


def look(args: Account, ctx: Any) -> dict[str, Any]:
    return {"account": args.account, "balance": 500}


def reading(**options: Any) -> Any:
    """Look an account up, then ``close`` it (the guard reads what ``remember`` kept)."""
    return define_workflow(
        "closing", transitions={"reading": {"close": "done"}}, terminal={"done"},
        tools_by_state={"reading": ["look"]}, initial="reading",
        tools=[ToolSpec("look", look, "Look.", Account,
                        remember=options.pop("remember",
                                             lambda a, r, f: {"account": r}))],
        guards={"close": Guard("the account has no balance left",
                               options.pop("guard",
                                           lambda f, p: f["account"]["balance"] == 0))},
        **options)


LOOK = {"tool": "look", "args": {"account": "K-1"}}
CLOSE = {"tool": "advance", "args": {"event": "close"}}


def test_a_guard_that_raises_fails_the_run_at_once_instead_of_burning_the_budget() -> None:
    store = MemoryStore()
    spec = reading(guard=lambda f, p: f["acount"]["balance"] == 0)   # the typo
    run = Engine(spec, store, ScriptedPolicy([LOOK] + [CLOSE] * 60)).start("close K-1",
                                                                           run_id="g")
    assert run.status == "failed" and run.step == 2 and run.used.steps == 2
    assert run.reason == ("event 'close' in state 'reading': its guard (the account has no "
                          "balance left) raised KeyError: 'acount'")
    bug = store.events("g")[-1].detail["bug"]
    assert bug["in"] == "the guard of 'close'"
    assert 'f["acount"]' in bug["traceback"] and bug["traceback"].endswith("KeyError: 'acount'\n")
    assert audit(store, "g").ok


def test_a_remember_hook_that_raises_fails_the_run_after_recording_the_result() -> None:
    store = MemoryStore()
    spec = reading(remember=lambda a, r, f: {"owner": r["owner"]})
    run = Engine(spec, store, ScriptedPolicy([LOOK, CLOSE])).start("close K-1", run_id="r")
    assert (run.status, run.step) == ("failed", 1)
    assert run.reason == ("look: the remember hook of 'look' raised KeyError: 'owner' reading "
                          "its result")
    assert store.messages("r")[-1]["result"] == {"account": "K-1", "balance": 500}
    assert store.events("r")[-1].detail["bug"]["in"] == "the remember hook of 'look'"


def test_a_presentation_that_raises_fails_the_run_when_it_would_pause() -> None:
    """Shown without its amount, a request would escape every release limit."""
    class Pay(BaseModel):
        cents: int

    spec = define_workflow(
        "paying", transitions={"paying": {"paid": "done"}}, terminal={"done"},
        tools_by_state={"paying": ["pay"]}, initial="paying",
        tools=[ToolSpec("pay", lambda a, c: "ok", "Pay.", Pay, write=True, approval=True,
                        emits=lambda r: "paid", emits_events=("paid",))],
        presentation=Presentation(amount=lambda tool, args: args["amount_cents"]))
    store = MemoryStore()
    run = Engine(spec, store, ScriptedPolicy([{"tool": "pay", "args": {"cents": 5}}])).start(
        "pay", run_id="p")
    assert (run.status, run.pending) == ("failed", None)
    assert run.reason == "the presentation raised KeyError: 'amount_cents'"
    assert store.approvals("p", pending_only=False) == []


def test_a_workflow_bug_exits_3_from_the_command_line(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "buggy.py").write_text(
        "from fsm import Guard, define_workflow\n"
        "SPEC = define_workflow('buggy', transitions={'a': {'go': 'done'}}, tools_by_state={},"
        " initial='a', terminal={'done'}, guards={'go': Guard('x', lambda f, p: f['acount'])})\n"
        "def policy(view):\n"
        "    return {'tool': 'advance', 'args': {'event': 'go'}}\n")
    done = cli("run", "buggy:SPEC", "go", "--policy", "buggy:policy", "--run-id", "b")
    assert done.code == exits.FAILED, done
    assert "its guard (x) raised KeyError: 'acount'" in done.out + done.err
    history = cli("history", "b", "--json")
    assert '"traceback": "Traceback (most recent call last)' in history.out


# -- the repetition rule counts calls that succeeded ------------------------------------

def flaky(fails: int) -> tuple[ToolSpec, list[str]]:
    calls: list[str] = []

    def fetch(args: Account, ctx: Any) -> dict[str, Any]:
        calls.append(args.account)
        if len(calls) <= fails:
            raise ConnectionResetError("the bank's server reset the connection")
        return {"account": args.account}

    return ToolSpec("fetch", fetch, "Fetch.", Account), calls


def fetching(tool: ToolSpec) -> Any:
    return define_workflow(
        "fetching", transitions={"fetching": {}}, terminal=set(), finish_states={"fetching"},
        tools_by_state={"fetching": ["fetch"]}, initial="fetching", tools=[tool])


FETCH = {"tool": "fetch", "args": {"account": "K-1"}}


def test_a_tool_that_raised_may_be_called_again_with_the_same_arguments() -> None:
    tool, calls = flaky(fails=MAX_FAILED_CALLS - 1)
    store = MemoryStore()
    run = Engine(fetching(tool), store, ScriptedPolicy(
        [FETCH] * MAX_FAILED_CALLS + [{"final": "fetched"}])).start("fetch", run_id="f")
    assert (run.status, run.answer) == ("done", "fetched")
    assert calls == ["K-1"] * MAX_FAILED_CALLS
    assert [e.kind for e in store.events("f")].count("refusal") == 0


def test_failed_calls_with_the_same_arguments_are_bounded_and_successes_not_repeated() -> None:
    tool, calls = flaky(fails=100)
    run = Engine(fetching(tool), MemoryStore(), ScriptedPolicy([FETCH] * 20)).start(
        "fetch", run_id="f")
    assert run.status == "failed" and run.reason == \
        "repetition loop: fetch repeated with the same arguments"
    assert len(calls) == MAX_FAILED_CALLS

    tool, calls = flaky(fails=0)
    store = MemoryStore()
    run = Engine(fetching(tool), store, ScriptedPolicy([FETCH, FETCH, {"final": "ok"}])).start(
        "fetch", run_id="s")
    assert run.status == "done" and calls == ["K-1"]
    assert store.messages("s")[4]["error"].startswith(
        "repeated call: 'fetch' was already called with these arguments")


# -- a write that fails after another write of the run succeeded -------------------------

class Amount(BaseModel):
    cents: int


def test_a_write_that_fails_after_an_earlier_write_hands_the_run_over_with_both() -> None:
    def credit(args: Amount, ctx: Any) -> str:
        raise PermissionError("credit refused by the bank")

    spec = define_workflow(
        "cancelling", transitions={"working": {"finish": "done"}}, terminal={"done"},
        tools_by_state={"working": ["cancel", "credit"]}, initial="working",
        tools=[ToolSpec("cancel", lambda a, c: "cancelled", "Cancel.", write=True),
               ToolSpec("credit", credit, "Credit.", Amount, write=True)])
    store = MemoryStore()
    run = Engine(spec, store, ScriptedPolicy([
        {"tool": "cancel", "args": {}}, {"tool": "credit", "args": {"cents": 900}},
        {"tool": "credit", "args": {"cents": 900}}])).start("cancel and credit", run_id="w")
    assert (run.status, run.step) == ("handed_over", 2)
    assert run.reason == ("credit failed (PermissionError: credit refused by the bank) after "
                          "cancel of this run succeeded (w:1); a person finishes or undoes it")
    assert [(e.tool, e.status, e.error) for e in store.effects("w")] == [
        ("cancel", "DONE", None),
        ("credit", "DONE", "PermissionError: credit refused by the bank")]
    assert audit(store, "w").ok


def test_a_write_that_fails_cleanly_after_an_earlier_write_is_an_answer_the_model_reads(
) -> None:
    """A write declared ``fails_cleanly`` changed nothing when it failed: the run goes on
    (the retail desk's writes: one transaction each, rolled back by their failure)."""
    tried: list[int] = []

    def credit(args: Amount, ctx: Any) -> str:
        tried.append(args.cents)
        if args.cents > 500:
            raise ValueError("over the limit")
        return "credited"

    spec = define_workflow(
        "cancelling", transitions={"working": {"finish": "done"}}, terminal={"done"},
        tools_by_state={"working": ["cancel", "credit"]}, initial="working",
        tools=[ToolSpec("cancel", lambda a, c: "cancelled", "Cancel.", write=True),
               ToolSpec("credit", credit, "Credit.", Amount, write=True,
                        fails_cleanly=True)])
    store = MemoryStore()
    run = Engine(spec, store, ScriptedPolicy([
        {"tool": "cancel", "args": {}}, {"tool": "credit", "args": {"cents": 900}},
        {"tool": "credit", "args": {"cents": 400}},
        {"tool": "advance", "args": {"event": "finish"}}])).start("cancel and credit",
                                                                  run_id="c")
    assert (run.status, tried) == ("done", [900, 400])
    assert [(e.tool, e.error) for e in store.effects("c")] == [
        ("cancel", None), ("credit", "ValueError: over the limit"), ("credit", None)]
    assert audit(store, "c").ok


def test_a_first_write_that_fails_is_an_answer_the_model_reads() -> None:
    tool, calls = flaky(fails=1)
    write = ToolSpec("fetch", tool.fn, "Fetch.", Account, write=True)
    run = Engine(fetching(write), MemoryStore(), ScriptedPolicy(
        [FETCH, FETCH, {"final": "ok"}])).start("fetch", run_id="one")
    assert run.status == "done" and len(calls) == 2
