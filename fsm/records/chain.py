"""The hash chain: what each commit's last event covers, events placed in a run's
chain (:func:`chained`), and its check (:func:`verify_chain`)."""

from __future__ import annotations

import json
import json.encoder
import math
from typing import Any, NamedTuple

from pydantic import TypeAdapter

from fsm.records.jsonic import (
    canonical,
    fingerprint,
    text_hash,
)
from fsm.records.models import (
    GENESIS,
    Approval,
    Event,
    RunState,
    StepCommit,
    snapshot_json,
)

# -- what the log covers ----------------------------------------------------------------
#
# The last event of every commit carries ``detail["rows"]``: the hashes of the other rows
# the commit wrote (the run snapshot, its messages, the view, finished effects, a new
# approval, a decision). The log is hash-chained, so a later change to any of those rows
# no longer matches its hash, and the audit says which.

def snapshot_hash(run: RunState) -> str:
    """The hash of a run row's snapshot as stored (the version is the store's)."""
    return text_hash(snapshot_json(run))


def effect_hash(result: Any, error: str | None) -> str:
    return fingerprint({"status": "DONE", "result": result, "error": error})


def approval_hash(approval: Approval) -> str:
    """The hash of an approval row as requested (its decision fields not yet set)."""
    request = approval.model_dump(mode="json", exclude={"decision", "reviewer", "note",
                                                        "decided_at", "approved_args"})
    return fingerprint(request)


def decision_hash(approval_id: str, decision: str | None, reviewer: str | None,
                  note: str | None, at: float | None,
                  args: dict[str, Any] | None = None) -> str:
    return fingerprint({"approval_id": approval_id, "decision": decision,
                        "reviewer": reviewer, "note": note, "time": at, "args": args})


def covered_rows(c: StepCommit, first_message: int) -> dict[str, Any]:
    """The hashes of what ``c`` writes besides its events (see above), over the very
    text the store writes."""
    rows: dict[str, Any] = {"snapshot": text_hash(c.snapshot)}
    if c.messages:
        # The canonical JSON of the list is its rows' texts joined: fingerprint(messages).
        rows["messages"] = [first_message, first_message + len(c.messages),
                            text_hash("[" + ",".join(c.message_bodies) + "]")]
    if c.view is not None:
        rows["view"] = [c.view.step, text_hash(c.view_body or "")]
    if c.effects_done:
        rows["effects"] = {k: effect_hash(r, e) for k, (r, e) in c.effects_done.items()}
    if c.new_approval is not None:
        rows["approval"] = [c.new_approval.approval_id, approval_hash(c.new_approval)]
    if c.handover is not None:
        rows["handover"] = [c.handover.handover_id,
                            fingerprint(c.handover.model_dump(mode="json"))]
    if c.decision is not None:
        d = c.decision
        rows["decision"] = [d.approval_id,
                            decision_hash(d.approval_id, d.decision, d.reviewer, d.note, d.time,
                                          d.args)]
    return rows


class ChainedEvent(NamedTuple):
    """An event placed in a run's chain: its position, its links, its detail as stored."""

    event: Event
    seq: int
    prev_hash: str
    hash: str
    #: ``canonical(event.detail)``: the text a SQL store writes.
    detail_json: str

    def row(self, columns: tuple[str, ...]) -> tuple[Any, ...]:
        """The values of ``columns`` (the detail as its JSON text)."""
        values = dict(self.event.__dict__)
        values.update(seq=self.seq, prev_hash=self.prev_hash, hash=self.hash,
                      detail=self.detail_json)
        return tuple(map(values.__getitem__, columns))

    def body(self) -> dict[str, Any]:
        """The row as a JSON-ready dict, hash included."""
        return {**self.event.model_dump(mode="json"), "seq": self.seq,
                "prev_hash": self.prev_hash, "hash": self.hash}


_DETAIL = TypeAdapter(dict[str, Any])
_TEXT = json.encoder.encode_basestring  # as canonical() writes a string


def _text(value: str | None) -> str:
    return "null" if value is None else _TEXT(value)


def _body_json(ev: Event, seq: int, prev_hash: str, detail_json: str) -> str:
    """``canonical(body)`` of ``ev`` at ``seq`` after ``prev_hash``, from the detail's text,
    written out key by key in sorted order: every field but the detail is a string, an
    int, a finite float or null, which ``canonical`` writes as ``encode_basestring``,
    ``repr`` and ``null``. (:meth:`Event.compute_hash` is the plain definition; the tests
    hold the two equal.)"""
    if not (type(ev.time) is float and math.isfinite(ev.time)  # noqa: E721
            and type(ev.step) is type(ev.cost_micros) is type(ev.tokens) is int):
        # Set after validation, or not finite: as JSON mode has it.
        return canonical({**ev.model_dump(mode="json", exclude={"hash"}), "seq": seq,
                          "prev_hash": prev_hash})
    return (f'{{"cost_micros":{int.__repr__(ev.cost_micros)},"detail":{detail_json},'
            f'"event":{_text(ev.event)},"kind":{_TEXT(ev.kind)},'
            f'"prev_hash":{_TEXT(prev_hash)},"reason":{_text(ev.reason)},'
            f'"reviewer":{_text(ev.reviewer)},"run_id":{_TEXT(ev.run_id)},'
            f'"seq":{int.__repr__(seq)},"state_after":{_text(ev.state_after)},'
            f'"state_before":{_text(ev.state_before)},"step":{int.__repr__(ev.step)},'
            f'"time":{float.__repr__(ev.time)},"tokens":{int.__repr__(ev.tokens)},'
            f'"tool":{_text(ev.tool)}}}')


def chained(events: list[Event], prev_hash: str, next_seq: int) -> list[ChainedEvent]:
    """``events`` continuing a run's chain from ``prev_hash`` at ``next_seq``, each hashed
    over exactly what a store keeps."""
    out = []
    for seq, ev in enumerate(events, start=next_seq):
        # The detail as JSON mode dumps it (str keys, null for NaN), as the audit reads it.
        detail = canonical(_DETAIL.dump_python(ev.detail, mode="json"))
        link = text_hash(prev_hash + _body_json(ev, seq, prev_hash, detail))
        out.append(ChainedEvent(ev, seq, prev_hash, link, detail))
        prev_hash = link
    return out


def chain(events: list[Event], prev_hash: str, next_seq: int) -> list[dict[str, Any]]:
    """The rows of ``events`` continuing a run's chain: JSON-ready dicts with ``seq``,
    ``prev_hash`` and ``hash`` set, hashed over exactly what a store keeps."""
    return [c.body() for c in chained(events, prev_hash, next_seq)]


def verify_chain(events: list[Event]) -> str | None:
    """The first problem in a run's hash chain, or ``None`` when it is intact."""
    prev = GENESIS
    for i, ev in enumerate(events):
        if ev.seq != i:
            return f"event seq {i} is missing (found seq {ev.seq}: rows deleted or reordered)"
        if ev.prev_hash != prev:
            return f"event seq {ev.seq}: prev_hash does not match the previous row"
        if ev.compute_hash() != ev.hash:
            return f"event seq {ev.seq}: hash does not match its contents (row altered)"
        prev = ev.hash
    return None
