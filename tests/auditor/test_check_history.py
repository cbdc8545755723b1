"""The history check replays stored runs against a candidate definition, running nothing:
it catches a renamed tool, a removed state, a tightened guard, a changed schema under a
pending call and a map that would strand a run, and passes an additive change."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deploykit import (
    V2_REFUND_DESCRIPTION,
    removed_state,
    renamed_tool,
    tighter_guard,
    v1,
    v2,
)
from payoutkit import PAY, SmallAmount, payout
from refund_scripts import actions, small_refund

from fsm import Engine, MemoryStore, SQLiteStore, Store, check_history
from fsm.testing import ScriptedPolicy
from workflows.refund import clerk
from workflows.refund.shop import Shop

LARGE = "Order A-1002: my headphones stopped working, I want my money back"
SMALL = "Order A-1001: the kettle arrived broken"


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Store, Shop]]:
    """A small refund paid (its long results kept as artifacts) and a large one waiting
    for a person, both on version 1."""
    path = str(tmp_path / "runs.db")
    with SQLiteStore(path) as store, Shop(path).seed_demo() as shop:
        # A scripted model: the clerk reads results, which are only excerpts here.
        Engine(v1(shop), store, ScriptedPolicy(actions(small_refund())), result_cap=40).start(
            SMALL, user="asha", run_id="small")
        assert store.load_run("small").status == "done"
        Engine(v1(shop), store, clerk).start(LARGE, user="ravi", run_id="large")
        yield store, shop


def problems(store: Store, candidate: Any, **options: Any) -> dict[str, list[str]]:
    before = {r.run_id: (r.version, len(store.events(r.run_id))) for r in store.list_runs()}
    report = check_history(store, candidate, **options)
    after = {r.run_id: (r.version, len(store.events(r.run_id))) for r in store.list_runs()}
    assert after == before  # nothing ran, nothing was written
    assert report.ok == (not report.broken)
    return {r.run_id: r.problems for r in report.runs}


def test_an_additive_change_passes(recorded: tuple[Store, Shop]) -> None:
    store, shop = recorded
    kept = [m["result"] for m in store.messages("small") if "artifact" in str(m.get("result"))]
    assert len(kept) >= 2  # the results the guards need were kept aside, as artifacts
    report = check_history(store, v2(shop))
    assert report.ok, report.lines()
    assert report.lines()[0] == (f"checked 2 run(s) of refund against version 2 (definition "
                                 f"{v2().definition_hash}): 0 would break")
    assert v2(shop).tools["refund_item"].description == V2_REFUND_DESCRIPTION


def test_a_renamed_tool_breaks_the_runs_that_called_it(recorded: tuple[Store, Shop]) -> None:
    store, shop = recorded
    found = problems(store, renamed_tool(shop))
    assert found == {"small": [
        "step 6: the run called 'refund_item', which the candidate does not have (its "
        "tools: get_order, get_policy, issue_refund, send_reply)"], "large": []}


def test_a_removed_state_breaks_the_paths_through_it_and_the_runs_waiting_there(
        recorded: tuple[Store, Shop]) -> None:
    store, shop = recorded
    found = problems(store, removed_state(shop))
    assert found == {"small": [], "large": [
        "step 5: 'large_refund' moved the run 'deciding' → 'awaiting_approval'; the "
        "candidate's tables send it to 'handed_over'",
        "it waits for a person in 'awaiting_approval', which the candidate does not have"]}


def test_a_tightened_guard_breaks_what_it_now_refuses(recorded: tuple[Store, Shop]) -> None:
    store, shop = recorded
    found = problems(store, tighter_guard(shop))
    assert found == {"small": [
        "step 5: the candidate's guard of 'small_refund' (amount ≤ ₹300 and ≤ refundable) "
        "does not pass on what the run had then"], "large": []}


def test_a_map_that_would_strand_a_waiting_run_is_reported(recorded: tuple[Store, Shop]) -> None:
    store, shop = recorded
    found = problems(store, v2(shop), state_map={"awaiting_approval": "deciding"})
    assert found["large"][-1] == (
        "it waits for a person in 'deciding', where the candidate does not wait that way")
    found = problems(store, v2(shop), state_map={"awaiting_approval": "refunding"})
    assert found["large"][0].startswith("step 5: 'large_refund' moved the run 'deciding' → "
                                        "'refunding'; the candidate's tables send it to "
                                        "'awaiting_approval'")


def test_a_pending_call_whose_schema_changed_is_reported() -> None:
    store, out = MemoryStore(), []  # type: ignore[var-annotated]
    one = payout(out, version="1")
    big = [PAY[0], {"tool": "pay", "args": {"amount": 500}}]
    Engine(one, store, ScriptedPolicy(big)).start("pay 500", run_id="q")
    found = problems(store, payout(out, version="2", args=SmallAmount))
    assert found["q"] == [
        "its pending call pay is refused by the candidate: its arguments are not valid under "
        "the schema of pay: amount: Input should be less than or equal to 100"]
    assert problems(store, payout(out, version="2b", description="Pay, in paise.")) == {
        "q": []}


def test_runs_can_be_named_or_sampled(recorded: tuple[Store, Shop]) -> None:
    store, shop = recorded
    assert list(problems(store, v2(shop), runs=["large"])) == ["large"]
    first = list(problems(store, v2(shop), sample=1, seed=3))
    assert len(first) == 1 and list(problems(store, v2(shop), sample=1, seed=3)) == first
