"""Every row of a bundled run is covered by a commit of its log, or the check names it.

Part of the offline bundle checker (:mod:`fsm.auditor.bundle`): Python's standard library
only, no fsm import, so that the checker's files can be copied and run anywhere.

A commit's last event records, in ``detail.rows``, the hashes of the rows it wrote; the
log is one signed chain. So a row is covered when a covering record names it and the
hash holds; a row no record names was written by no commit. Effects are checked against
their claims too (tool, key, step, arguments), approvals against the decisions of the
log, handover rows against the log's desk events, and ``run.json`` against its snapshot.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

#: An approval's fields that its decision sets (the rest is what was requested).
DECISION_FIELDS = ("decision", "reviewer", "note", "decided_at", "approved_args")
#: The fields of ``run.json``: each is the run row's, and each is checked.
RUN_FIELDS = {"run_id", "workflow", "status", "definition_hash", "log_count", "log_head",
              "log_sig", "snapshot"}


def canonical(value: Any) -> str:
    """Canonical JSON, as fsm hashes it: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


@dataclass
class Run:
    """One bundled run's files, parsed."""

    run_id: str
    meta: dict[str, Any]
    events: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    views: list[dict[str, Any]]
    effects: list[dict[str, Any]]
    approvals: list[dict[str, Any]]
    handovers: list[dict[str, Any]]


def _covering(run: Run) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for e in run.events:
        detail = e.get("detail")
        rows = detail.get("rows") if isinstance(detail, dict) else None
        if isinstance(rows, dict):
            out.append((int(e["seq"]), rows))
    return out


def check_rows(run: Run) -> tuple[list[str], int]:
    """The problems of ``run``'s rows, and how many rows were checked."""
    covering = _covering(run)
    problems: list[str] = []
    checked = 0
    for part in (_run_json, _messages, _views, _effects, _approvals, _handovers):
        found, n = part(run, covering)
        problems += [f"run {run.run_id}: {p}" for p in found]
        checked += n
    return problems, checked


def _run_json(run: Run, covering: list[tuple[int, dict[str, Any]]]) -> tuple[list[str], int]:
    meta = run.meta
    out = []
    if set(meta) != RUN_FIELDS:
        out.append(f"run.json has the fields {sorted(meta)}, not {sorted(RUN_FIELDS)}")
    text = str(meta.get("snapshot", ""))
    if not covering or covering[-1][1].get("snapshot") != sha256(text):
        out.append("run.json's snapshot differs from what the log's last commit recorded")
        return out, 1
    snapshot = json.loads(text)
    for name in ("run_id", "workflow", "status", "definition_hash"):
        if meta.get(name) != snapshot.get(name):
            out.append(f"run.json's {name} is {meta.get(name)!r}, its snapshot's "
                       f"{snapshot.get(name)!r}")
    return out, 1


def _messages(run: Run, covering: list[tuple[int, dict[str, Any]]]) -> tuple[list[str], int]:
    out, seen = [], [False] * len(run.messages)
    for seq, rows in covering:
        if "messages" not in rows:
            continue
        start, end, digest = rows["messages"]
        if sha256(canonical(run.messages[start:end])) != digest:
            out.append(f"event seq {seq}: transcript messages {start}..{end - 1} were "
                       "changed, removed or reordered")
        for i in range(max(start, 0), min(end, len(seen))):
            seen[i] = True
    out += [f"transcript message {i} was written by no commit" for i, ok in enumerate(seen)
            if not ok]
    return out, len(seen)


def _views(run: Run, covering: list[tuple[int, dict[str, Any]]]) -> tuple[list[str], int]:
    recorded = {rows["view"][0]: (seq, rows["view"][1]) for seq, rows in covering
                if "view" in rows}
    out, steps = [], [v.get("step") for v in run.views]
    for view in run.views:
        step = view.get("step")
        found = recorded.get(step)
        if found is None or steps.count(step) > 1:
            out.append(f"the view of step {step} was written by no commit")
        elif sha256(canonical(view)) != found[1]:
            out.append(f"event seq {found[0]}: the view of step {step} was changed")
    out += [f"event seq {seq}: the view of step {step} was removed"
            for step, (seq, _) in recorded.items() if step not in steps]
    return out, len(run.views)


def _effects(run: Run, covering: list[tuple[int, dict[str, Any]]]) -> tuple[list[str], int]:
    done = {k: (seq, h) for seq, rows in covering for k, h in (rows.get("effects") or {}).items()}
    claims = {e["hash"]: e for e in run.events if e.get("kind") == "claim"}
    out, keys = [], [e.get("key") for e in run.effects]
    for eff in run.effects:
        key = eff.get("key")
        if keys.count(key) > 1:
            out.append(f"the effect {key} appears more than once")
        out += _claimed(eff, claims, legacy=not claims)
        if eff.get("status") == "DONE":
            found = done.get(key)
            digest = sha256(canonical({"status": "DONE", "result": eff.get("result"),
                                       "error": eff.get("error")}))
            if found is None or found[1] != digest:
                out.append(f"the effect {key} ({eff.get('tool')}): its status, result or "
                           "error is not what a commit recorded")
        elif eff.get("status") != "STARTED" or key in done:
            out.append(f"the effect {key} says {eff.get('status')}, not what a commit wrote")
    out += [f"event seq {seq}: the effect {key} was removed" for key, (seq, _) in done.items()
            if key not in keys]
    return out, len(run.effects)


def _claimed(eff: dict[str, Any], claims: dict[str, dict[str, Any]], *,
             legacy: bool) -> list[str]:
    """The effect row is the call its claim logged: key, tool, step, run and arguments."""
    claim = claims.get(str(eff.get("claim")))
    if claim is None:
        if legacy and eff.get("claim") is None and eff.get("status") == "DONE":
            return []  # a run logged before claims: its commits' hashes cover the row
        return [f"the effect {eff.get('key')} ({eff.get('tool')}): no claim of the log "
                "covers it"]
    detail = claim.get("detail") or {}
    logged = (detail.get("key"), claim.get("tool"), claim.get("step"), claim.get("run_id"),
              detail.get("args_hash"))
    if logged != (eff.get("key"), eff.get("tool"), eff.get("step"), eff.get("run_id"),
                  sha256(canonical(eff.get("args")))):
        return [f"the effect {eff.get('key')} ({eff.get('tool')}): its tool, step or "
                f"arguments differ from its claim (event seq {claim.get('seq')})"]
    return []


def _approvals(run: Run, covering: list[tuple[int, dict[str, Any]]]) -> tuple[list[str], int]:
    asked = {rows["approval"][0]: (seq, rows["approval"][1]) for seq, rows in covering
             if "approval" in rows}
    decided = {rows["decision"][0]: (seq, rows["decision"][1]) for seq, rows in covering
               if "decision" in rows}
    out, ids = [], [a.get("approval_id") for a in run.approvals]
    for a in run.approvals:
        aid = a.get("approval_id")
        request = {k: v for k, v in a.items() if k not in DECISION_FIELDS}
        found = asked.get(aid)
        if found is None or ids.count(aid) > 1:
            out.append(f"approval {aid} was requested by no commit")
        elif sha256(canonical(request)) != found[1]:
            out.append(f"event seq {found[0]}: approval {aid} as requested was changed")
        out += _decision(a, decided.get(aid))
    out += [f"event seq {seq}: approval {aid} was removed" for aid, (seq, _) in asked.items()
            if aid not in ids]
    return out, len(run.approvals)


def _decision(a: dict[str, Any], found: tuple[int, str] | None) -> list[str]:
    aid = a.get("approval_id")
    if found is None:
        if any(a.get(k) is not None for k in DECISION_FIELDS):
            return [f"approval {aid} is decided, but no commit decided it"]
        return []
    decided = {"approval_id": aid, "decision": a.get("decision"),
               "reviewer": a.get("reviewer"), "note": a.get("note"),
               "time": a.get("decided_at"), "args": a.get("approved_args")}
    if sha256(canonical(decided)) != found[1]:
        return [f"event seq {found[0]}: the decision on approval {aid} was changed"]
    return []


def _desk(events: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    out = {}
    for e in events:
        hid = (e.get("detail") or {}).get("handover_id")
        if e.get("kind") == kind and hid:
            out[str(hid)] = e
    return out


def _handovers(run: Run, covering: list[tuple[int, dict[str, Any]]]) -> tuple[list[str], int]:
    stops = _desk(run.events, "stop")
    written = {rows["handover"][0]: (seq, rows["handover"][1]) for seq, rows in covering
               if "handover" in rows}
    out, ids = [], [h.get("handover_id") for h in run.handovers]
    for h in run.handovers:
        hid = str(h.get("handover_id"))
        if stops.get(hid) is None or ids.count(hid) > 1:
            out.append(f"handover {hid} was opened by no event of the log")
        elif hid in written:
            if sha256(canonical(h)) != written[hid][1]:
                out.append(f"event seq {written[hid][0]}: handover {hid}'s row is not what "
                           "its last commit wrote")
        else:  # written before commits recorded the desk's rows: its fields, from the log
            out += _handover_fields(h, hid, run.events, stops[hid])
    out += [f"event seq {e.get('seq')}: handover {hid} has no row" for hid, e in stops.items()
            if hid not in ids]
    return out, len(run.handovers)


def _handover_fields(h: dict[str, Any], hid: str, events: list[dict[str, Any]],
                     stop: dict[str, Any]) -> list[str]:
    takes, closes = _desk(events, "take"), _desk(events, "close")
    out = []
    take, close = takes.get(hid), closes.get(hid)
    logged = (stop.get("run_id"), stop.get("time"), stop.get("state_after"),
              (stop.get("detail") or {}).get("cause"),
              *((take.get("reviewer"), take.get("time")) if take else (None, None)),
              *(((close.get("detail") or {}).get("outcome"),
                 (close.get("detail") or {}).get("note"), close.get("reviewer"),
                 close.get("time")) if close else (None, None, None, None)))
    row = tuple(h.get(k) for k in ("run_id", "handed_at", "state", "cause", "taken_by",
                                   "taken_at", "outcome", "note", "closed_by", "closed_at"))
    if row != logged:
        out.append(f"handover {hid}: its row differs from what the log's stop, take and "
                   f"close events (seq {stop.get('seq')}…) say")
    return out
