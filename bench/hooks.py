"""Benchmark: what the engine hooks, metrics and tracing cost per step.

The N-step loop of ``bench/steps.py`` (a trivial policy, one read-only tool, every step
committed to SQLite, here without flushing: ``synchronous=OFF``, so that the figures are
CPU) driven in turn with no hook, with a hook that does nothing at every point, with the
Prometheus run metrics, and with OpenTelemetry tracing (an SDK tracer provider whose
batch processor hands the spans to an exporter that drops them: the cost of making
spans, without the network). The median time per step of each, and its ratio to the
run without hooks measured in the same run.

    python bench/hooks.py              # N=1000, 5 repetitions
    python bench/hooks.py --quick      # N=200, 2 repetitions
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from steps import RUN, Policy, loop_spec  # noqa: E402

from fsm import Budgets, Engine, Hooks, SQLiteStore  # noqa: E402
from fsm.observability.hooks import POINTS  # noqa: E402


class Every(Hooks):
    """A hook at every point that does nothing: the engine builds every view."""


for _point in POINTS:
    setattr(Every, _point, lambda self, view: None)


def _metrics() -> list[Hooks]:
    from fsm.observability.metrics import RunMetrics

    return [RunMetrics()]


def _tracing() -> list[Hooks]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from fsm.observability.otel import Tracing

    class Dropped(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    return [Tracing(provider)]


KINDS: dict[str, Callable[[], list[Hooks]]] = {
    "none": lambda: [], "no-op hook": lambda: [Every()], "metrics": _metrics,
    "tracing": _tracing,
}


def per_step(path: Path, steps: int, hooks: list[Hooks]) -> float:
    """Median ms from one policy call to the next over an N-step run."""
    policy = Policy()
    with SQLiteStore(str(path), synchronous="OFF") as store:
        engine = Engine(loop_spec(), store, policy, budgets=Budgets(max_steps=steps),
                        max_repeats=None, hooks=hooks)
        engine.start("go", run_id=RUN, drive=False)
        run = engine.resume(RUN)
    assert run.used.steps == steps, run
    gaps = [b - a for a, b in zip(policy.calls, policy.calls[1:], strict=False)]
    return statistics.median(gaps) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=200, 2 repetitions")
    parser.add_argument("--steps", type=int, default=None, help="N (default 1000)")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (median)")
    parser.add_argument("--json", action="store_true", help="print only the JSON")
    a = parser.parse_args(argv)
    n = a.steps or (200 if a.quick else 1000)
    repeat = a.repeat or (2 if a.quick else 5)
    kinds = {name: make for name, make in KINDS.items()
             if name != "tracing" or _has_otel()}
    with tempfile.TemporaryDirectory(prefix="fsm-bench-hooks-") as tmp:
        work = Path(tmp)
        per_step(work / "warm.db", 50, [])
        for name, make in kinds.items():
            per_step(work / f"warm-{name}.db", 50, make())
        times: dict[str, list[float]] = {name: [] for name in kinds}
        for i in range(repeat):  # each kind in turn, so that a slow moment hits them all
            for name, make in kinds.items():
                times[name].append(per_step(work / f"{name}-{i}.db", n, make()))
    ms = {name: statistics.median(t) for name, t in times.items()}
    result = {"steps": n, "repeat": repeat, "ms_per_step": ms,
              "ratio_to_none": {name: ms[name] / ms["none"] for name in ms}}
    if not a.json:
        print(f"CPU per step (synchronous=OFF), N={n}, median of {repeat}:")
        for name in ms:
            print(f"  {name:<11} {ms[name]:.3f} ms  ({result['ratio_to_none'][name]:.2f}x "
                  "no hooks)")
        if "tracing" not in ms:
            print("  tracing     (the otel extra is not installed)")
        print()
    print(json.dumps(result, indent=2))
    return 0


def _has_otel() -> bool:
    import importlib.util

    return importlib.util.find_spec("opentelemetry") is not None


if __name__ == "__main__":
    os.environ.pop("FSM_FAULT", None)
    sys.exit(main())
