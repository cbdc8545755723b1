"""What the audit checks beside the log's own rows: rows no step wrote (transcript
messages past the run's count, a pending approval its run does not wait on), rows the
log's rows refer to (artifacts, the notifications a commit wrote), and the chain of the
run's refused decision attempts. Each check returns its findings, one line each."""

from __future__ import annotations

from fsm.errors import StoreError
from fsm.records import GENESIS, Approval, Event, RunState, text_hash
from fsm.runtime.review import waiting_on
from fsm.store.people import Refusal, refusal_link
from fsm.store.roles import People, RunReads


def unwritten_messages(store: RunReads, run: RunState) -> list[str]:
    """Transcript rows past the messages the run's steps wrote (the run row counts them):
    written outside a step. Nothing reads them (a run's transcript is its counted rows),
    and the next step writes its own messages over them."""
    extra = store.messages(run.run_id, run.message_count)
    if not extra:
        return []
    first, last = run.message_count, run.message_count + len(extra) - 1
    which = f"message {first}" if first == last else f"messages {first}..{last}"
    return [f"the transcript has {len(extra)} message(s) after the {run.message_count} the "
            f"run's steps wrote ({which}, added outside a step; nothing reads them)"]


def artifacts(store: RunReads, run: RunState) -> list[str]:
    """Every artifact a transcript message refers to (a tool result too large to keep
    whole) is still there, with the content its name is the hash of."""
    out = []
    for i, msg in enumerate(store.messages(run.run_id, 0, run.message_count)):
        result = msg.get("result") if isinstance(msg, dict) else None
        ref = result.get("artifact") if isinstance(result, dict) else None
        if not isinstance(ref, str) or not ref.startswith("artifact:"):
            continue
        sha = ref.removeprefix("artifact:")
        content = store.artifact(sha)
        if content is None:
            out.append(f"artifact {sha[:12]}, the whole result of message {i}, was removed")
        elif text_hash(content) != sha:
            out.append(f"artifact {sha[:12]}, the whole result of message {i}, was changed "
                       "(its content no longer has the hash it is named by)")
    return out


def unwaited(rows: list[Approval], run: RunState) -> list[str]:
    """A pending approval is the one its run waits on: a run decides (or expires) each
    request before it moves on, so any other pending row was written outside a step."""
    return [f"approval {a.approval_id} is pending in the approvals table, but the run does "
            f"not wait on it (it is {run.status} in state {run.state!r}): the row was written "
            "outside a step" for a in rows if a.decision is None and waiting_on(run, a) is None]


def notifications(store: People, run_id: str, events: list[Event]) -> list[str]:
    """Every notification a commit wrote with it (the outbox) is still there."""
    written: dict[str, int] = {}
    for e in events:
        rows = e.detail.get("rows")
        keys = rows.get("notifications") if isinstance(rows, dict) else None
        for key in keys if isinstance(keys, list) else ():
            written.setdefault(str(key), e.seq)
    if not written:
        return []
    try:
        kept = {n.key for n in store.notifications(run_id=run_id)}
    except StoreError:
        return []  # a store that keeps no notifications
    return [f"event seq {seq}: the notification {key} its commit wrote was removed"
            for key, seq in written.items() if key not in kept]


def chained(store: People, run_id: str) -> tuple[list[Refusal], list[Refusal]]:
    """The run's refused attempts the chain covers, and those it does not: a row with no
    hash, or one whose hash does not follow the attempts before it. Only the first are
    attempts anyone is known to have made (a store that keeps no chain covers all)."""
    rows = store.refusals(run_id)
    if store.refusal_head(run_id) is None:
        return rows, []
    covered, uncovered, prev = [], [], GENESIS
    for r in rows:
        if r.hash is not None and refusal_link(prev, r) == r.hash:
            covered.append(r)
            prev = r.hash
        else:
            uncovered.append(r)
    return covered, uncovered


def refusals(store: People, run_id: str) -> list[str]:
    """The run's refused decision attempts form a chain whose length and head the run row
    keeps: a changed, removed or inserted attempt no longer fits it, and a row with no
    hash is covered by no chain (written outside fsm, or by a store from before attempts
    were chained): each is named."""
    head = store.refusal_head(run_id)
    if head is None:
        return []  # a store that does not chain them
    count, last = head
    rows = store.refusals(run_id)
    out = [f"refused attempt {r.refusal_id} is covered by no chain (it has no hash): "
           "written outside fsm, or by a store from before refused attempts were chained; "
           "it is not shown as an attempt" for r in rows if r.hash is None]
    prev, linked = GENESIS, 0
    for r in rows:
        if r.hash is None:
            continue
        linked += 1
        if refusal_link(prev, r) != r.hash:
            return out + [f"refused attempt {r.refusal_id} was changed, or an attempt before "
                          "it was removed"]
        prev = r.hash
    if linked != count:
        return out + [f"the run row records {count} refused decision attempts but the "
                      f"web_refusals table has {linked} (rows deleted or added)"]
    if prev != last:
        return out + ["the last refused decision attempt is not the one the run row records "
                      "(attempts deleted or replaced)"]
    return out
