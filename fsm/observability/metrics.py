"""Prometheus metrics: the runs' steps, tokens and cost (an engine hook), and a worker's
counts, served on ``GET /metrics`` (loopback) in the text format ``prometheus_client``
writes.

Counters end in ``_total``::

    fsm_steps_total{workflow}                 policy calls that counted a step
    fsm_tokens_total{workflow, direction}     model tokens (direction: input, output)
    fsm_cost_micros_total{workflow}           model cost, micro-units of the price table's
                                              currency
    fsm_pauses_total{workflow}                runs left waiting for a person or customer
    fsm_stops_total{workflow, status}         runs stopped (done, failed, handed_over, ...)
    fsm_worker_<count>_total                  a worker's counts (taken, finished, ...)

and the gauges of a worker: ``fsm_worker_in_flight``, ``fsm_worker_leases_held``,
``fsm_worker_concurrency``, ``fsm_worker_steps_per_second`` and
``fsm_worker_approvals_waiting`` (fleet-wide, read from the store at each scrape).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fsm.observability.hooks import Hooks, PauseInfo, PolicyResultInfo, StopInfo

#: A worker's counts (``Worker.stats()`` keys) and what each counts.
COUNTS = {
    "steps": "Steps committed since the worker started.",
    "taken": "Runs claimed since the worker started.",
    "finished": "Runs driven to a final status.",
    "paused": "Runs left waiting for a person.",
    "dropped": "Runs given up (lease lost, database error).",
    "released": "Runs released on stop after their current step.",
    "expired": "Approvals this worker expired.",
    "damaged_rows": "Rows this worker found damaged and skipped (each counted once).",
    "unavailable": "Steps the infrastructure failed (retried later, or handed over).",
}
#: A worker's gauges.
GAUGES = {
    "in_flight": "Runs this worker is driving now.",
    "leases_held": "Run leases this worker holds now, as the store has them (runs in "
                   "flight, and failed runs it keeps until their lease expires).",
    "concurrency": "Runs this worker drives at most at once.",
    "steps_per_second": "Steps committed per second over the last 10 seconds.",
    "approvals_waiting": "Approvals waiting for a person, fleet-wide.",
}


class RunMetrics(Hooks):
    """Counts what the runs an engine drives spend (a hook: ``Engine(..., hooks=[m])``).

    Thread-safe (``prometheus_client`` counters are): one instance serves every engine
    of a worker. Its counters live in ``registry`` (a new one by default, so that two
    workers in one process do not share counts)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.steps = Counter("fsm_steps", "Policy calls that counted a step.", ["workflow"],
                             registry=r)
        self.tokens = Counter("fsm_tokens", "Model tokens spent.", ["workflow", "direction"],
                              registry=r)
        self.cost = Counter("fsm_cost_micros", "Model cost, in micro-units of the price "
                            "table's currency.", ["workflow"], registry=r)
        self.pauses = Counter("fsm_pauses", "Runs left waiting for a person or their "
                              "customer.", ["workflow"], registry=r)
        self.stops = Counter("fsm_stops", "Runs stopped, by status.", ["workflow", "status"],
                             registry=r)

    def after_policy(self, result: PolicyResultInfo) -> None:
        w = result.workflow
        if result.outcome == "action":
            self.steps.labels(w).inc()
        if result.input_tokens:
            self.tokens.labels(w, "input").inc(result.input_tokens)
        if result.output_tokens:
            self.tokens.labels(w, "output").inc(result.output_tokens)
        if result.cost_micros:
            self.cost.labels(w).inc(result.cost_micros)

    def on_pause(self, pause: PauseInfo) -> None:
        self.pauses.labels(pause.workflow).inc()

    def on_stop(self, stop: StopInfo) -> None:
        self.stops.labels(stop.workflow, stop.status).inc()


class StatsCollector(Collector):
    """A worker's :meth:`~fsm.worker.Worker.stats`, read at each scrape."""

    def __init__(self, stats: Callable[[], dict[str, Any]]) -> None:
        self.stats = stats

    def collect(self) -> Iterable[Metric]:
        stats = self.stats()
        if "leases_held" not in stats and "in_flight" in stats:
            stats["leases_held"] = stats["in_flight"]
        for key, value in stats.items():
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue  # unknown now (the database is unreachable): left out
            if key in COUNTS:
                yield CounterMetricFamily(f"fsm_worker_{key}", COUNTS[key], value=value)
            elif key in GAUGES:
                yield GaugeMetricFamily(f"fsm_worker_{key}", GAUGES[key], value=value)


def registry_for(stats: Callable[[], dict[str, Any]],
                 runs: RunMetrics | None = None) -> CollectorRegistry:
    """A registry of a worker's stats (and the run metrics, when given)."""
    registry = runs.registry if runs is not None else CollectorRegistry()
    registry.register(StatsCollector(stats))
    return registry


@contextmanager
def serve(registry: CollectorRegistry, host: str, port: int) -> Iterator[int]:
    """Serve ``registry`` on ``http://host:port/metrics`` until the block ends; yields
    the bound port (``port=0``: a free one)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes are not worth a log line each

    server = ThreadingHTTPServer((host, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="fsm-metrics")
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
