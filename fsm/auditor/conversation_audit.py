"""Auditing a run's conversation: its replies, its reply token and its confirmations.

Every reply the log says the run read is a kept reply with the same text (by hash), read
at that step and shown to the model as the customer's words; every reply marked read is
in the log; the reply token's hash is the one the run's start recorded; every write
bound to a confirmation names a reply of the log that confirmed exactly that call, once.
"""

from __future__ import annotations

from typing import Any

from fsm.records import Event, RunState, call_subject, fingerprint, text_hash
from fsm.records.conversation import AwaitingCustomer, Reply
from fsm.records.transcript import CustomerReply, read_all
from fsm.store.roles import Conversations


def conversation_problems(store: Conversations, run: RunState, events: list[Event],
                          messages: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(problems, notes) of the run's conversation; both empty for a run without one."""
    start = events[0].detail if events and events[0].kind == "start" else {}
    replies = store.replies(run.run_id) if _talks(run, events, start) else []
    problems = _replies(replies, events, messages)
    problems += _token(store, run, start)
    problems += _confirmations(events)
    problems += _waiting(run, events)
    unread = [r.seq for r in replies if r.read_step is None]
    notes = [f"replies kept but not read yet: {', '.join(map(str, unread))}"] if unread else []
    return problems, notes


def _talks(run: RunState, events: list[Event], start: dict[str, Any]) -> bool:
    return bool(start.get("reply_token_sha256")) or run.status == "awaiting_customer" or \
        any(e.kind in ("ask", "reply", "unanswered") for e in events)


def _replies(replies: list[Reply], events: list[Event],
             messages: list[dict[str, Any]]) -> list[str]:
    out = []
    kept: dict[Any, Reply] = {r.seq: r for r in replies}
    logged = {e.detail.get("seq"): e for e in events if e.kind == "reply"}
    shown: dict[Any, str] = {m.reply: m.content for m in read_all(messages)
                             if isinstance(m, CustomerReply)}
    for seq, e in logged.items():
        r = kept.get(seq)
        if r is None:
            out.append(f"event seq {e.seq}: the log reads reply {seq}, which the replies "
                       "table lacks")
        elif text_hash(r.text) != e.detail.get("sha256"):
            out.append(f"event seq {e.seq}: reply {seq}'s text differs from what the log "
                       "recorded when the run read it (changed after it was read)")
        elif r.read_step != e.step:
            out.append(f"event seq {e.seq}: reply {seq} is marked read at step "
                       f"{r.read_step}, the log reads it at step {e.step}")
        elif shown.get(seq) != r.text:
            out.append(f"event seq {e.seq}: the transcript does not show reply {seq} as the "
                       "customer wrote it")
    out += [f"reply {r.seq} is marked read at step {r.read_step}, but the log never read it"
            for r in replies if r.read_step is not None and r.seq not in logged]
    return out


def _token(store: Conversations, run: RunState, start: dict[str, Any]) -> list[str]:
    recorded = start.get("reply_token_sha256")
    kept = store.reply_token(run.run_id)
    if recorded is None and kept is None:
        return []
    if recorded != kept:
        return ["the run's reply token differs from the one its start recorded (replaced "
                "outside the run)" if kept else
                "the run's start recorded a reply token, but the token table has none"]
    return []


def _confirmations(events: list[Event]) -> list[str]:
    out = []
    confirmed = {e.detail.get("seq"): e for e in events
                 if e.kind == "reply" and isinstance(e.detail.get("confirms"), dict)}
    used: dict[Any, int] = {}
    for e in events:
        c = e.detail.get("confirmed") if e.kind == "tool" else None
        if not isinstance(c, dict):
            continue
        yes = confirmed.get(c.get("reply"))
        if yes is None or yes.seq > e.seq:
            out.append(f"event seq {e.seq}: {e.tool} names reply {c.get('reply')} as its "
                       "confirmation, but no earlier reply of the log confirmed a proposal")
            continue
        if yes.detail["confirms"].get("hash") != c.get("hash"):
            out.append(f"event seq {e.seq}: {e.tool} ran on a confirmation other than the one "
                       f"reply {c.get('reply')} gave")
        args = e.detail.get("args")
        if isinstance(args, dict) and fingerprint(call_subject(e.tool, args)) != c.get("hash"):
            out.append(f"event seq {e.seq}: {e.tool} {args} is not the call the customer "
                       f"confirmed in reply {c.get('reply')}")
        if c.get("reply") in used:
            out.append(f"event seq {e.seq}: reply {c.get('reply')}'s confirmation was used "
                       f"again (first at event seq {used[c.get('reply')]})")
        used.setdefault(c.get("reply"), e.seq)
    return out


def _waiting(run: RunState, events: list[Event]) -> list[str]:
    if run.status != "awaiting_customer" or not isinstance(run.pending, AwaitingCustomer):
        return []
    asks = [e for e in events if e.kind == "ask"]
    if not asks or asks[-1].detail.get("asked") != fingerprint(run.pending.subject()):
        return ["the run waits for its customer on a request its log never asked "
                "(changed outside a step)"]
    return []
