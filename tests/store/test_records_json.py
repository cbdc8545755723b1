"""Rows are encoded once: the fast paths give exactly the text of the plain definitions.

``canonical`` uses a C encoder built once, an event's row hash is computed from its detail's
text spliced into the rest of the row, and a commit's row hashes are taken over the text
the store writes. Each must equal what ``json.dumps`` and ``Event.compute_hash`` give, or
every audit of an older log would fail.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm.records import (
    GENESIS,
    Event,
    RunState,
    StepCommit,
    ViewRecord,
    canonical,
    chain,
    chained,
    check_plain_json,
    covered_rows,
    fingerprint,
    snapshot_hash,
    snapshot_json,
    verify_chain,
)
from fsm.records.transcript import read_all
from fsm.store._columns import EVENT_COLUMNS, run_from


def plain(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4)
    | st.dictionaries(st.integers(min_value=-5, max_value=20), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_canonical_is_json_dumps_with_sorted_keys_and_no_spaces(value: Any) -> None:
    assert canonical(value) == plain(value)


def test_canonical_matches_on_the_odd_cases() -> None:
    odd = ["\x00\u2028é\"\\", (1, 2), {"when": dt.date(2026, 12, 1)}, 1e16, 1e-05, -0.0,
           float("nan"), {"b": [], "a": {}}, "", 2**70]
    for value in odd:
        assert canonical(value) == plain(value), value


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_plain_json_is_what_json_dumps_accepts_without_nan(value: Any) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        with pytest.raises(ValueError):
            check_plain_json(value)
    else:
        check_plain_json(value)


def test_plain_json_refuses_what_is_not_json() -> None:
    circular: list[Any] = []
    circular.append(circular)
    for bad, error in [({"a": {1, 2}}, TypeError), ([object()], TypeError),
                       ({"x": float("inf")}, ValueError), (circular, RecursionError)]:
        with pytest.raises(error):
            check_plain_json(bad)


events = st.builds(
    Event,
    run_id=st.text(min_size=1, max_size=8),
    step=st.integers(min_value=0, max_value=10**6),
    time=st.floats(allow_nan=True, allow_infinity=True),
    kind=st.sampled_from(["policy", "tool", "transition", "pause", "decision", "stop"]),
    state_before=st.none() | st.text(max_size=8),
    state_after=st.none() | st.text(max_size=8),
    tool=st.none() | st.text(max_size=8),
    event=st.none() | st.text(max_size=8),
    reason=st.none() | st.text(max_size=20),
    cost_micros=st.integers(min_value=0, max_value=2**53),
    tokens=st.integers(min_value=0, max_value=2**53),
    reviewer=st.none() | st.text(max_size=8),
    detail=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(events, min_size=1, max_size=4), st.integers(min_value=0, max_value=1000))
def test_a_chained_event_hashes_what_compute_hash_defines(evs: list[Event], seq: int) -> None:
    rows = chained(evs, GENESIS, seq)
    prev = GENESIS
    for i, (ev, row) in enumerate(zip(evs, rows, strict=True)):
        stored = ev.model_copy(update={"seq": seq + i, "prev_hash": prev, "hash": row.hash})
        assert stored.compute_hash() == row.hash
        assert row.detail_json == plain(ev.model_dump(mode="json")["detail"])
        values = dict(zip(EVENT_COLUMNS, row.row(EVENT_COLUMNS), strict=True))
        assert values["detail"] == row.detail_json and values["seq"] == seq + i
        prev = row.hash
    # The dict form (the memory store's) is the same chain, and verifies from the start.
    if seq == 0:
        assert verify_chain([Event.model_validate(b) for b in chain(evs, GENESIS, 0)]) is None


def test_a_commits_row_hashes_are_over_the_text_the_store_writes() -> None:
    run = RunState(run_id="r", workflow="w", definition_hash="h", state="s",
                   facts={"amount": 1200, "note": "é"}, message_count=2)
    messages = [{"role": "assistant", "tool": "t", "args": {"b": 1, "a": [1.5, None]}},
                {"role": "tool", "tool": "t", "result": {"text": "ünïcode"}}]
    view = ViewRecord(step=1, state="s", tools=["t"], events=[], message_count=0)
    c = StepCommit(run=run, expected_version=0, messages=read_all(messages), view=view)
    rows = covered_rows(c, 0)
    assert rows["snapshot"] == snapshot_hash(run)
    assert rows["messages"] == [0, 2, fingerprint(messages)]
    assert rows["view"] == [1, fingerprint(view.model_dump(mode="json"))]
    assert c.message_bodies == [plain(m) for m in messages]
    # What the store writes reads back as the same rows.
    again = RunState.model_validate({**json.loads(c.snapshot), "version": 0})
    assert again == run.model_copy(update={"version": 0})
    assert ViewRecord.model_validate_json(c.view_body or "") == view


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_a_snapshot_reads_back_as_the_same_text(facts: dict[Any, Any]) -> None:
    """The audit hashes the snapshot of the run it loads: that must be the text stored,
    whatever the facts held (int keys, NaN, huge ints, unicode)."""
    run = RunState(run_id="r", workflow="w", definition_hash="h", state="s", facts=facts,
                   created_at=1796130234.43562, updated_at=1e16)
    text = StepCommit(run=run, expected_version=0).snapshot
    loaded = run_from(text, 7)
    assert snapshot_json(loaded) == text
    assert snapshot_hash(loaded) == snapshot_hash(run)


def test_an_event_changed_after_validation_still_hashes_as_defined() -> None:
    ev = Event(run_id="r", step=1, time=5.0, kind="policy", detail={"a": 1})
    ev.time, ev.tokens = 7, True  # type: ignore[assignment]  # no validation on assignment
    (row,) = chained([ev], GENESIS, 0)
    stored = ev.model_copy(update={"seq": 0, "prev_hash": GENESIS, "hash": row.hash})
    assert stored.compute_hash() == row.hash
