"""OpenTelemetry traces of runs (the ``otel`` extra): the spans of a refund run paused,
decided in another process, resumed and paid; OTLP over HTTP to a receiver on
loopback; and nothing of OpenTelemetry imported when the extra is absent."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from crashkit import FSM_BIN, ROOT, process_env
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fsm import Engine, SQLiteStore
from fsm.observability.otel import Tracing, run_context
from workflows.refund import build, clerk
from workflows.refund.shop import Shop

LARGE = "Order A-1002: my headphones stopped working, I want my money back"


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    yield spans, provider
    provider.shutdown()


def test_a_refund_paused_decided_elsewhere_resumed_and_paid_is_one_linked_trace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        exporter: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    spans, provider = exporter
    db = str(tmp_path / "runs.db")
    monkeypatch.setenv("FSM_DB", db)  # the refund workflow's shop follows the runs
    with SQLiteStore(db) as store:
        with Engine(build(), store, clerk, hooks=[Tracing(provider)]) as engine:
            run = engine.start(LARGE, user="ravi", run_id="r1")
        assert run.status == "awaiting_approval"
        # The decision, in another process that prints its spans (OTEL_TRACES_EXPORTER).
        decided = subprocess.run(
            [FSM_BIN, "approve", "r1", "--reviewer", "priya", "--no-drive", "--db", db],
            env=process_env({"FSM_DB": db, "OTEL_TRACES_EXPORTER": "console",
                             "OTEL_SERVICE_NAME": "fsm-approver"}),
            cwd=str(ROOT), capture_output=True, text=True, timeout=120)
        assert decided.returncode == 0, decided.stderr
        with Engine(build(), store, clerk, hooks=[Tracing(provider)]) as engine:
            run = engine.resume("r1")
        assert run.status == "done"
        paid = [(p["order_id"], p["amount_paise"]) for p in Shop(db).ledger()]
        key = next(e.detail["key"] for e in store.events("r1")
                   if e.kind == "tool" and e.tool == "refund_item")
    assert paid == [("A-1002", 180_000)]

    root = run_context("r1")
    finished = spans.get_finished_spans()
    assert {s.context.trace_id for s in finished} == {root.trace_id}
    segments = [s for s in finished if s.name == "invoke_workflow refund"]
    assert [s.attributes["fsm.status"] for s in segments] == ["awaiting_approval", "done"]
    for s in segments:
        assert s.parent is not None and s.parent.span_id == root.span_id
        assert [link.context.span_id for link in s.links] == [root.span_id]
        assert s.attributes["gen_ai.operation.name"] == "invoke_workflow"
        assert s.attributes["gen_ai.conversation.id"] == "r1"
    chats = [s for s in finished if s.name.startswith("chat ")]
    assert {s.name for s in chats} == {"chat workflows.refund.clerk.clerk"}
    assert all(s.attributes["gen_ai.request.model"] == "workflows.refund.clerk.clerk"
               and s.attributes["gen_ai.usage.input_tokens"] == 0 for s in chats)
    assert {s.parent.span_id for s in chats if s.parent} <= \
        {s.context.span_id for s in segments}
    tools = {s.attributes["gen_ai.tool.name"]: s for s in finished
             if s.name.startswith("execute_tool ")}
    assert set(tools) == {"get_order", "get_policy", "refund_item", "send_reply"}
    assert tools["refund_item"].attributes["gen_ai.tool.call.id"] == key
    # The refund was paid in the second segment, after the decision.
    assert tools["refund_item"].parent.span_id == segments[1].context.span_id  # type: ignore[union-attr]
    [pause] = [s for s in finished if s.name == "fsm pause"]
    assert (pause.attributes["fsm.state"], pause.attributes["fsm.run.id"]) == \
        ("awaiting_approval", "r1")
    commits = [s for s in finished if s.name == "fsm commit"]
    versions = [s.attributes["fsm.run.version"] for s in commits]
    assert versions == sorted(versions) and max(versions) == run.version  # type: ignore[type-var]
    assert all(s.attributes["fsm.definition.version"] for s in commits)
    # Every span of the run says where it is: its run, step, state and definition.
    for s in finished:
        assert s.attributes["gen_ai.conversation.id"] == s.attributes["fsm.run.id"] == "r1"
        assert s.attributes["fsm.state"] and s.attributes["fsm.definition.version"], s.name
        assert isinstance(s.attributes["fsm.step"], int), s.name
    assert tools["refund_item"].attributes["fsm.state"] == "refunding"

    # The other process's decision: a span of the same trace, printed as JSON.
    printed = _printed_spans(decided.stdout)
    [decision] = [s for s in printed if s["name"] == "fsm decision"]
    assert decision["context"]["trace_id"] == f"0x{root.trace_id:032x}"
    assert decision["attributes"]["fsm.decision"] == "approved"
    assert decision["attributes"]["fsm.reviewer"] == "priya"
    assert decision["resource"]["attributes"]["service.name"] == "fsm-approver"


def _printed_spans(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects ConsoleSpanExporter printed among a command's output."""
    decoder, found, i = json.JSONDecoder(), [], 0
    while (i := stdout.find("{", i)) != -1:
        try:
            value, end = decoder.raw_decode(stdout, i)
        except json.JSONDecodeError:
            i += 1
            continue
        if isinstance(value, dict) and "context" in value:
            found.append(value)
        i = end
    return found


class _Receiver(BaseHTTPRequestHandler):
    got: list[ExportTraceServiceRequest] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).got.append((self.path, self.headers["Content-Type"], request))  # type: ignore[arg-type]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_command_sends_its_spans_over_otlp_http_to_a_receiver_on_loopback(
        tmp_path: Path) -> None:
    _Receiver.got = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        db = str(tmp_path / "runs.db")
        done = subprocess.run(
            [FSM_BIN, "run", "refund", "Order A-1001: the kettle arrived broken",
             "--user", "asha", "--run-id", "k1", "--policy", "crashkit:metered_clerk",
             "--db", db],
            env=process_env({"FSM_DB": db, "OTEL_SERVICE_NAME": "fsm-test",
                             "OTEL_EXPORTER_OTLP_ENDPOINT":
                                 f"http://127.0.0.1:{server.server_address[1]}"}),
            cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    assert _Receiver.got, "no spans arrived"
    spans, services = [], set()
    for path, kind, request in _Receiver.got:  # type: ignore[misc]
        assert (path, kind) == ("/v1/traces", "application/x-protobuf")
        for rs in request.resource_spans:
            services |= {a.value.string_value for a in rs.resource.attributes
                         if a.key == "service.name"}
            for ss in rs.scope_spans:
                assert ss.scope.name == "fsm"
                assert ss.schema_url.endswith("/1.41.0")
                spans += list(ss.spans)
    assert services == {"fsm-test"}

    def attrs(span: Any) -> dict[str, Any]:
        out = {}
        for a in span.attributes:
            v = a.value
            out[a.key] = v.string_value or v.int_value or v.bool_value
        return out

    names = [s.name for s in spans]
    assert "invoke_workflow refund" in names and "execute_tool refund_item" in names
    chats = [attrs(s) for s in spans if s.name.startswith("chat ")]
    assert chats and all(c["gen_ai.usage.input_tokens"] == 120 and
                         c["gen_ai.usage.output_tokens"] == 30 and c["fsm.cost_micros"] == 45
                         and c["gen_ai.conversation.id"] == "k1" for c in chats)
    root = run_context("k1")
    assert {s.trace_id for s in spans} == {root.trace_id.to_bytes(16, "big")}
    [segment] = [attrs(s) for s in spans if s.name == "invoke_workflow refund"]
    assert segment["fsm.status"] == "done"


def test_without_the_extra_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    """The extra hidden from a new interpreter: a run with OTEL_* set says so once and
    imports nothing; with the extra present and no OTEL_* set, nothing is imported
    either."""
    script = """
import sys

if sys.argv[1] == "absent":
    sys.modules["opentelemetry"] = None  # as if not installed: importing it fails
from fsm.cli import run
code = run(["run", "refund", "Order A-1001: broken", "--user", "asha",
            "--policy", "crashkit:metered_clerk", "--db", sys.argv[2]])
loaded = sorted(m for m, v in sys.modules.items() if m.startswith("opentelemetry") and v)
print("CODE", code, "LOADED", loaded)
"""
    for mode, otel in (("absent", {"OTEL_TRACES_EXPORTER": "console"}), ("present", {})):
        db = str(tmp_path / f"{mode}.db")
        env = process_env({"FSM_DB": db, **otel})
        for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT"):
            if name not in otel:
                env.pop(name, None)
        out = subprocess.run([sys.executable, "-c", script, mode, db], env=env, cwd=str(ROOT),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "CODE 0 LOADED []" in out.stdout, (mode, out.stdout, out.stderr)
        if mode == "absent":
            assert "the otel extra is not installed" in out.stderr


def test_an_agent_s_segments_are_invoke_agent_spans(
        exporter: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    from fsm import Agent
    from fsm.observability.hooks import scope

    spans, provider = exporter
    tracing = Tracing(provider)
    with scope(tracing):  # the Agent makes its engine itself
        agent = Agent(lambda history: {"final": "ok"}, [], run_id="a1")
    agent.start("say ok")
    [segment] = [s for s in spans.get_finished_spans() if s.name.startswith("invoke_")]
    assert segment.name == "invoke_agent agent"
    assert segment.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert segment.attributes["gen_ai.agent.name"] == "agent"
    assert segment.attributes["gen_ai.conversation.id"] == "a1"


def test_an_exporter_fsm_does_not_have_is_refused_in_one_line(tmp_path: Path) -> None:
    """A misspelt ``OTEL_TRACES_EXPORTER`` would send nothing and say nothing: the command
    refuses it (the usage exit) before it does anything."""
    db = tmp_path / "runs.db"
    out = subprocess.run(
        [FSM_BIN, "run", "refund", "Order A-1001: broken", "--user", "asha", "--db", str(db)],
        env=process_env({"FSM_DB": str(db), "OTEL_TRACES_EXPORTER": "otlp,consol"}),
        cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.splitlines() == [
        "error: OTEL_TRACES_EXPORTER='otlp,consol' names 'consol': the exporters are "
        "console, otlp (comma-separated), or none"]
    assert not db.exists()
