"""OpenTelemetry traces of runs, following the GenAI semantic conventions (v1.41.0).

Needs the ``otel`` extra (``pip install 'fsm[otel]'``). :class:`Tracing` is an engine
hook; ``fsm`` commands and workers install it themselves when the standard ``OTEL_*``
variables ask for traces (see :func:`fsm.observability.telemetry.from_environ`). Spans of one run::

    invoke_workflow {workflow}   one per driven segment (a start, a resume, a decision);
                                 ``invoke_agent {name}`` for a single agent (fsm.Agent)
      chat {model}               one per policy call (a policy that is not a model
                                 names itself: chat workflows.refund.clerk.clerk)
      execute_tool {tool}        one per tool call
      fsm commit                 one per step's transaction
        fsm decision             a person's decision (or an expiry) the commit logs
        fsm refusal              a refusal the commit logs
      fsm pause                  the run left waiting for a person or its customer

Every span of a run is in one trace whose id is derived from the run id (a run
resumed in another process, on another machine, continues the same trace), under
the run's root context, to which each segment also links; ``gen_ai.conversation.id``
is the run id. Every span has the run id, step, state and definition version
(``fsm.*``); the segment, commit, decision, refusal and pause spans the run version too.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from fsm.observability.hooks import (
    CommitInfo,
    DriveInfo,
    Hooks,
    PauseInfo,
    PolicyCallInfo,
    PolicyResultInfo,
    StepInfo,
    ToolCallInfo,
    ToolResultInfo,
)

#: The version of the GenAI semantic conventions these spans follow.
SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"


def run_context(run_id: str) -> SpanContext:
    """The run's root context: its trace id and span id, derived from the run id."""
    digest = hashlib.sha256(f"fsm-run:{run_id}".encode()).digest()
    return SpanContext(trace_id=int.from_bytes(digest[:16], "big") or 1,
                       span_id=int.from_bytes(digest[16:24], "big") or 1, is_remote=True,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _where(view: StepInfo) -> dict[str, Any]:
    """Where the run is: on every span of it."""
    return {"gen_ai.conversation.id": view.run_id, "fsm.run.id": view.run_id,
            "fsm.definition.version": view.definition_version, "fsm.step": view.step,
            "fsm.state": view.state}


class _Open:
    """The spans open for one run (a run is driven by one thread at a time)."""

    def __init__(self, segment: Any, ctx: Any) -> None:
        self.segment = segment
        self.ctx = ctx
        self.chat: Any = None
        self.tool: Any = None
        self.commit: Any = None
        #: Context tokens attached on this thread (a chat or tool span is current while
        #: the policy or the tool runs, so that their own instrumentation nests in it).
        self.tokens: list[Any] = []


class Tracing(Hooks):
    """Emits the spans of the runs an engine drives (``Engine(..., hooks=[Tracing()])``).

    ``provider`` is the tracer provider to use (default: the global one, as the
    application configured it)."""

    def __init__(self, provider: Any = None) -> None:
        self.provider = provider
        get = provider.get_tracer if provider is not None else trace.get_tracer
        self.tracer = get("fsm", schema_url=SCHEMA_URL)
        self._open: dict[str, _Open] = {}
        self._lock = threading.Lock()

    # -- segments ---------------------------------------------------------------------

    def before_drive(self, drive: DriveInfo) -> None:
        root = run_context(drive.run_id)
        parent = trace.set_span_in_context(NonRecordingSpan(root))
        operation = "invoke_agent" if drive.agent else "invoke_workflow"
        span = self.tracer.start_span(
            f"{operation} {drive.workflow}", context=parent, kind=SpanKind.INTERNAL,
            links=[Link(root, {"fsm.link": "run"})],
            attributes={"gen_ai.operation.name": operation,
                        "gen_ai.agent.name" if drive.agent else "gen_ai.workflow.name":
                            drive.workflow, **_where(drive),
                        "fsm.definition.hash": drive.definition_hash,
                        "fsm.segment": drive.kind, "fsm.run.version": drive.run_version,
                        "fsm.status.before": drive.status})
        with self._lock:
            self._open[drive.run_id] = _Open(span, trace.set_span_in_context(span))

    def after_drive(self, drive: DriveInfo) -> None:
        with self._lock:
            found = self._open.pop(drive.run_id, None)
        if found is None:
            return
        for token in reversed(found.tokens):
            otel_context.detach(token)
        for left in (found.chat, found.tool, found.commit):
            if left is not None:  # cut short (an exception): ended with the segment
                left.set_status(Status(StatusCode.ERROR, drive.error or "not finished"))
                left.end()
        span = found.segment
        span.set_attributes({"fsm.status": drive.status, "fsm.state": drive.state,
                             "fsm.step": drive.step, "fsm.run.version": drive.run_version})
        if drive.error:
            span.set_attribute("error.type", drive.error)
            span.set_status(Status(StatusCode.ERROR, drive.error))
        span.end()

    def _child(self, run_id: str, name: str, kind: SpanKind, attributes: Mapping[str, Any],
               ) -> tuple[_Open | None, Any]:
        found = self._open.get(run_id)
        parent = found.ctx if found is not None else trace.set_span_in_context(
            NonRecordingSpan(run_context(run_id)))
        return found, self.tracer.start_span(name, context=parent, kind=kind,
                                             attributes=attributes)

    def _current(self, found: _Open | None, span: Any) -> None:
        if found is not None:
            found.tokens.append(otel_context.attach(trace.set_span_in_context(span)))

    def _done(self, found: _Open | None) -> None:
        if found is not None and found.tokens:
            otel_context.detach(found.tokens.pop())

    # -- policy calls -------------------------------------------------------------------

    def before_policy(self, call: PolicyCallInfo) -> None:
        found, span = self._child(call.run_id, f"chat {call.policy}", SpanKind.CLIENT, {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "fsm",
            "gen_ai.request.model": call.policy, **_where(call)})
        if found is not None:
            found.chat = span
        self._current(found, span)

    def after_policy(self, result: PolicyResultInfo) -> None:
        found = self._open.get(result.run_id)
        span = found.chat if found is not None else None
        if span is None:
            return
        self._done(found)
        assert found is not None
        found.chat = None
        if result.model:
            span.update_name(f"chat {result.model}")
            span.set_attributes({"gen_ai.request.model": result.model,
                                 "gen_ai.provider.name": "openai"})
        span.set_attributes({"gen_ai.usage.input_tokens": result.input_tokens,
                             "gen_ai.usage.output_tokens": result.output_tokens,
                             "fsm.cost_micros": result.cost_micros, "fsm.calls": result.calls,
                             "fsm.policy.outcome": result.outcome})
        if result.tool:
            span.set_attribute("fsm.action.tool", result.tool)
        if result.outcome != "action":
            span.set_attribute("error.type", result.outcome)
            span.set_status(Status(StatusCode.ERROR, result.error or result.outcome))
        span.end()

    # -- tool calls ---------------------------------------------------------------------

    def before_tool(self, call: ToolCallInfo) -> None:
        found, span = self._child(call.run_id, f"execute_tool {call.tool}", SpanKind.INTERNAL, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool,
            "gen_ai.tool.call.id": call.call_id, "gen_ai.tool.type": "function",
            "fsm.tool.write": call.write, "fsm.tool.args_hash": call.args_hash,
            **_where(call)})
        if found is not None:
            found.tool = span
        self._current(found, span)

    def after_tool(self, result: ToolResultInfo) -> None:
        found = self._open.get(result.run_id)
        span = found.tool if found is not None else None
        if span is None:
            return
        self._done(found)
        assert found is not None
        found.tool = None
        if result.error is not None:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, result.error[:200]))
        span.end()

    # -- commits, decisions, refusals, pauses ---------------------------------------------

    def before_commit(self, commit: CommitInfo) -> None:
        found, span = self._child(commit.run_id, "fsm commit", SpanKind.INTERNAL, {
            **_where(commit), "fsm.run.expected_version": commit.expected_version})
        if found is not None:
            found.commit = span

    def after_commit(self, commit: CommitInfo) -> None:
        found = self._open.get(commit.run_id)
        span = found.commit if found is not None else None
        if span is None:  # a commit outside a segment (a run's creation)
            found, span = self._child(commit.run_id, "fsm commit", SpanKind.INTERNAL,
                                      _where(commit))
        elif found is not None:
            found.commit = None
        span.set_attributes({"fsm.run.version": commit.run_version, "fsm.status": commit.status,
                             "fsm.events": [e.kind for e in commit.events],
                             "fsm.initial": commit.initial})
        for e in commit.events:
            if e.kind not in ("decision", "refusal"):
                continue
            where = {**_where(commit), "fsm.run.version": commit.run_version,
                     "fsm.status": commit.status, "fsm.tool": e.tool or ""}
            inside = trace.set_span_in_context(span)
            if e.kind == "decision":
                self._instant("fsm decision", inside, {
                    **where, "fsm.decision": str(e.detail.get("decision", "")),
                    "fsm.reviewer": e.reviewer or "",
                    "fsm.approval.id": str(e.detail.get("approval_id", ""))})
            else:
                self._instant("fsm refusal", inside, {
                    **where, "fsm.reason": e.reason or "", "fsm.event": e.event or ""})
        span.end()

    def _instant(self, name: str, parent: Any, attributes: Mapping[str, Any]) -> None:
        self.tracer.start_span(name, context=parent, attributes=attributes).end()

    def on_pause(self, pause: PauseInfo) -> None:
        found = self._open.get(pause.run_id)
        parent = found.ctx if found is not None else trace.set_span_in_context(
            NonRecordingSpan(run_context(pause.run_id)))
        self._instant("fsm pause", parent, {
            **_where(pause), "fsm.status": pause.status, "fsm.run.version": pause.run_version,
            "fsm.approval.id": pause.approval_id or "", "fsm.tool": pause.tool or ""})


def provider_from_environ(environ: Mapping[str, str]) -> Any:
    """A tracer provider configured by the standard variables: ``OTEL_TRACES_EXPORTER``
    (``console``, ``otlp``, comma-separated; ``otlp`` when only an endpoint is set),
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (OTLP over
    HTTP with protobuf), ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider(resource=Resource.create())
    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    for name in names:
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider
