"""Context compaction: a shorter view for the model, the full record kept.

``Engine(spec, store, policy, compactor=Compactor())`` asks :meth:`Compactor.plan` at
the start of every step, and the step applies and logs the plan. When the view's
transcript is larger than the threshold, older turns ``messages[1:upto]`` are
replaced *in the view* by one summary message; the goal (message 0) and the most
recent turns stay. Nothing is deleted: the transcript keeps every message, the
compaction is logged as a ``compaction`` event, and each step's view record stores
the compaction in force, so ``view_at(spec, store, run_id, step)`` rebuilds exactly
what the model saw.

The threshold, in characters of canonical JSON, is the constructor's
``threshold_chars``, else the workflow's ``settings["compaction_threshold_chars"]``,
else :data:`DEFAULT_THRESHOLD_CHARS`.

The default summariser is deterministic (no model call): the run's facts (order,
policy, decision...), the workflow path so far, what people said (approvals), and
the tools called with their latest results. :class:`fsm.adapters.summariser.ModelSummariser` asks
the model instead; its usage counts against the run's budgets, and the facts are appended to
its summary verbatim so they survive any paraphrase.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fsm.definition.spec import WorkflowSpec
from fsm.policy import NO_USAGE, PolicyUnavailable, Usage
from fsm.records import Compaction, RunState, canonical, describe, text_json
from fsm.records.transcript import (
    ApprovalNote,
    CustomerReply,
    Message,
    RuntimeNote,
    ToolCall,
    ToolError,
    ToolResult,
    UserMessage,
    read,
    read_all,
)
from fsm.runtime.view import compacted

SETTING = "compaction_threshold_chars"
DEFAULT_THRESHOLD_CHARS = 48_000
_EXCERPT = 300
_PEOPLE = 8


@dataclass(frozen=True)
class Chunk:
    """The older turns a summariser replaces, with the run's context."""

    workflow: str
    state: str
    #: The transcript messages replaced, ``messages[start:end]``.
    messages: list[dict[str, Any]]
    start: int
    end: int
    #: The run's facts (what the workflow's guards and tools rely on).
    facts: dict[str, Any]
    #: ``(event, state after)`` for every transition so far.
    path: list[tuple[str, str]] = field(default_factory=list)
    #: The summary in force until now (it covered ``messages[start:fresh]``), if any.
    previous_summary: str | None = None
    fresh: int = 1

    @property
    def fresh_messages(self) -> list[dict[str, Any]]:
        """The messages no earlier summary covered."""
        return self.messages[self.fresh - self.start:]


@dataclass(frozen=True)
class Plan:
    """A compaction to apply (``None``: logged as skipped), its cost and its log detail."""

    compaction: Compaction | None
    usage: Usage
    detail: dict[str, Any]


@dataclass(frozen=True)
class Summary:
    text: str
    usage: Usage = NO_USAGE
    #: Which summariser wrote it.
    by: str = "deterministic"


Summariser = Callable[[Chunk], Summary]


def view_chars(messages: Sequence[Mapping[str, Any]]) -> int:
    """Estimated size of a view's transcript: characters of canonical JSON."""
    return sum(len(canonical(m)) for m in messages)


class Compactor:
    """Replaces older turns of the view by a summary once it grows past a threshold.

    ``keep_chars`` (default: a third of the threshold) is how much recent transcript
    stays verbatim, never fewer than ``min_keep`` messages; ``summary_chars`` (default:
    a quarter) bounds the deterministic summary, whose run facts are never cut. So a
    compacted view starts well under the threshold and the next compaction comes only
    after the run has grown again. ``facts`` limits the run facts quoted (default: all).
    A compaction that would not make the view smaller is not made.
    """

    def __init__(self, threshold_chars: int | None = None, *, keep_chars: int | None = None,
                 summary_chars: int | None = None, min_keep: int = 4,
                 summariser: Summariser | None = None,
                 facts: Sequence[str] | None = None) -> None:
        self.threshold_chars = threshold_chars
        self.keep_chars = keep_chars
        self.summary_chars = summary_chars
        self.min_keep = max(min_keep, 1)
        self.facts = list(facts) if facts is not None else None
        self.summariser = summariser

    def threshold(self, settings: Mapping[str, Any]) -> int:
        if self.threshold_chars is not None:
            return self.threshold_chars
        return int(settings.get(SETTING, DEFAULT_THRESHOLD_CHARS))

    def plan(self, spec: WorkflowSpec, run: RunState, messages: list[dict[str, Any]],
             path: Callable[[], list[tuple[str, str]]], *,
             limit: int | None = None) -> Plan | None:
        """What to compact in ``run``'s view, or ``None`` when it is small enough.

        ``path`` gives ``(event, state after)`` of every transition so far; it is asked
        only when a summary is written. ``limit`` replaces the threshold.
        """
        limit = self.threshold(spec.settings) if limit is None else limit
        before = view_chars(compacted(messages, run.compaction))
        if before <= limit:
            return None
        upto = self.cut(messages, self.keep_chars or limit // 3)
        previous = run.compaction.upto if run.compaction else 1
        budget = self.summary_chars or limit // 4
        if upto <= previous or view_chars(messages[previous:upto]) <= budget // 2:
            return None  # too little new to fold in: the recent turns alone are that large
        chunk = Chunk(
            workflow=spec.name, state=run.state, messages=messages[1:upto], start=1,
            end=upto, facts=self._facts(run.facts), path=path(),
            previous_summary=run.compaction.summary if run.compaction else None,
            fresh=previous,
        )
        summary, fallback = self._summarise(chunk, budget)
        compaction = Compaction(upto=upto, summary=summary.text)
        after = view_chars(compacted(messages, compaction))
        detail: dict[str, Any] = {
            "upto": upto, "previous_upto": previous if run.compaction else None,
            "chars_before": before, "chars_after": after, "threshold_chars": limit,
            "messages": len(messages), "by": summary.by, "calls": summary.usage.calls,
            "summary": summary.text,
        }
        if fallback:
            detail["fallback"] = fallback
        if after >= before:  # the summary is no shorter than what it replaces
            detail["skipped"] = "the summary would not make the view smaller"
            return Plan(None, summary.usage, detail)
        return Plan(compaction, summary.usage, detail)

    def shrink(self, spec: WorkflowSpec, run: RunState, messages: list[dict[str, Any]],
               path: Callable[[], list[tuple[str, str]]]) -> Plan | None:
        """A compaction to half the view's current size, for a model whose context the
        view overflowed; ``None`` when nothing can be folded away."""
        before = view_chars(compacted(messages, run.compaction))
        return self.plan(spec, run, messages, path, limit=max(before // 2, 1))

    def cut(self, messages: Sequence[Mapping[str, Any]], keep_chars: int) -> int:
        """Index of the first message kept verbatim; tool results stay with their call."""
        start = len(messages)
        kept = 0
        while start > 1:
            size = len(canonical(messages[start - 1]))
            if len(messages) - start >= self.min_keep and kept + size > keep_chars:
                break
            kept += size
            start -= 1
        while 1 < start < len(messages) and read(messages[start]).role == "tool":
            start -= 1
        return start

    def _facts(self, facts: Mapping[str, Any]) -> dict[str, Any]:
        keys = self.facts if self.facts is not None else sorted(facts)
        return {k: facts[k] for k in keys if k in facts}

    def _summarise(self, chunk: Chunk, max_chars: int) -> tuple[Summary, str | None]:
        if self.summariser is None:
            return summarise(chunk, max_chars=max_chars), None
        try:
            return self.summariser(chunk), None
        except Exception as exc:  # a summary is never worth stopping the run for
            plain = summarise(chunk, max_chars=max_chars)
            usage = exc.usage if isinstance(exc, PolicyUnavailable) else NO_USAGE
            return (Summary(plain.text, usage, by="deterministic"),
                    f"summariser: {describe(exc)}")


# -- the deterministic summariser ---------------------------------------------------------

def summarise(chunk: Chunk, *, max_chars: int = 4000) -> Summary:
    """A summary built from the chunk alone, without a model call.

    The run facts, the path and what people said are always kept; the latest tool
    results fill what is left of ``max_chars``, newest first.
    """
    head = [f"Summary of transcript messages {chunk.start}–{chunk.end - 1}, shortened in "
            "this view (the full record is kept). The current state is "
            f"{chunk.state!r}."]
    head += facts_section(chunk)
    if chunk.path:
        head.append("Workflow path so far: "
                    + "; ".join(f"{e} → {s}" for e, s in chunk.path) + ".")
    typed = read_all(chunk.messages)
    people = [m for m in typed if isinstance(m, UserMessage | ApprovalNote | CustomerReply)]
    if people:
        head.append("Said by people:")
        head += [f"- {_excerpt(m.content)}" for m in people[-_PEOPLE:]]
    head.append(_calls_line(typed))
    results = _result_lines(typed)

    def text() -> str:
        return "\n".join(head + (["Latest results:"] + results if results else []))

    while results and len(text()) > max_chars:  # drop the oldest results first
        results = results[1:]
    return Summary(text())


def facts_section(chunk: Chunk) -> list[str]:
    if not chunk.facts:
        return ["Run facts: none recorded yet."]
    return ["Run facts (authoritative):"] + [f"- {k}: {text_json(v)}"
                                             for k, v in chunk.facts.items()]


def _calls_line(messages: Sequence[Message]) -> str:
    calls = Counter(m.tool for m in messages if isinstance(m, ToolCall) and m.tool)
    errors = sum(1 for m in messages if isinstance(m, ToolError))
    refused = sum(1 for m in messages if isinstance(m, RuntimeNote))
    listing = ", ".join(f"{name} ×{n}" for name, n in sorted(calls.items())) or "none"
    return f"Tool calls: {listing}; errors or refusals: {errors + refused}."


def _result_lines(messages: Sequence[Message], last: int = 4) -> list[str]:
    lines = []
    for m in messages:
        if isinstance(m, ToolError):
            outcome = f"error: {m.error}"
        elif isinstance(m, ToolResult):
            outcome = text_json(m.result)
        else:
            continue
        lines.append(f"- {m.tool} → {_excerpt(outcome)}")
    return lines[-last:]


def _excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else text_json(value)
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…"
