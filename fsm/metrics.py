"""A Prometheus text endpoint for a worker's counts (``GET /metrics`` on loopback)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HELP = {
    "in_flight": "Runs this worker is driving now.",
    "concurrency": "Runs this worker drives at most at once.",
    "steps_per_second": "Steps committed per second over the last 10 seconds.",
    "steps": "Steps committed since the worker started.",
    "taken": "Runs claimed since the worker started.",
    "finished": "Runs driven to a final status.",
    "paused": "Runs left waiting for a person.",
    "dropped": "Runs given up (lease lost, database error).",
    "released": "Runs released on stop after their current step.",
    "expired": "Approvals this worker expired.",
    "approvals_waiting": "Approvals waiting for a person, fleet-wide.",
}


def render(stats: dict[str, Any]) -> str:
    """``stats`` in the Prometheus text exposition format (``fsm_worker_*``)."""
    lines = []
    for key, value in stats.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        name = f"fsm_worker_{key}"
        kind = "gauge" if key in ("in_flight", "concurrency", "steps_per_second",
                                  "approvals_waiting") else "counter"
        lines += [f"# HELP {name} {_HELP.get(key, key)}", f"# TYPE {name} {kind}",
                  f"{name} {value}"]
    return "\n".join(lines) + "\n"


@contextmanager
def serve(stats: Callable[[], dict[str, Any]], host: str, port: int) -> Iterator[int]:
    """Serve ``render(stats())`` until the block ends; yields the bound port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            body = render(stats()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
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
