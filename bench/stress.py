"""Stress: the timing-sensitive tests, several times in a row, beside CPU burners.

The tests marked ``stress`` (tests/conftest.py marks every test that waits on threads,
processes, servers, leases or clocks) run ``--runs`` times in a row, each time as
``make test`` runs them (``pytest -n auto``), while ``--burners`` processes spin on the
CPU beside them. A test that passes only on a quiet machine fails here.

    python bench/stress.py                      # make stress: 5 runs, 2 burners
    python bench/stress.py --runs 2 --burners 1 -- tests/services/worker

It prints a row per run (passed, failed, seconds), the tests that failed with the run
they failed in, and the slowest tests (their longest time in any run); ``--json-out``
writes the same. Exit 1 when any test failed, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: A burner: one process that keeps one CPU busy until it is stopped (or for an hour at
#: most, so that no burner outlives a stress run that was itself killed).
BURN = "import time\nend = time.monotonic() + 3600\nwhile time.monotonic() < end: pass\n"


@dataclass
class Run:
    """One pass over the selected tests."""

    run: int
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0
    exit_code: int = 0
    failures: list[str] = field(default_factory=list)


@contextmanager
def burners(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` processes that spin on the CPU while the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", BURN], start_new_session=True)
             for _ in range(count)]
    try:
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def read_junit(path: Path, run: Run) -> dict[str, float]:
    """Counts and failures of ``run`` from a JUnit XML report; the time of every test."""
    times: dict[str, float] = {}
    if not path.exists():
        return times
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        times[name] = float(case.get("time") or 0.0)
        if case.find("failure") is not None:
            run.failed += 1
            run.failures.append(name)
        elif case.find("error") is not None:
            run.errors += 1
            run.failures.append(name)
        elif case.find("skipped") is not None:
            run.skipped += 1
        else:
            run.passed += 1
    return times


def one_run(number: int, marker: str, workers: str, extra: list[str],
            work: Path) -> tuple[Run, dict[str, float]]:
    """The selected tests once, as ``make test`` runs them; the run and each test's time."""
    report = work / f"run-{number}.xml"
    cmd = [sys.executable, "-m", "pytest", "-n", workers, "-m", marker, "-p", "no:cacheprovider",
           f"--junitxml={report}", "-q", "--no-header", "-rN", *extra]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    run = Run(run=number, seconds=round(time.monotonic() - t0, 1), exit_code=proc.returncode)
    times = read_junit(report, run)
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not run.failures):
        run.failures.append(f"pytest exited {proc.returncode}: "
                            + " | ".join(proc.stdout.strip().splitlines()[-3:]))
    if run.failures:
        (work / f"run-{number}.log").write_text(proc.stdout)
    return run, times


def print_table(runs: list[Run], slowest: list[tuple[str, float]]) -> None:
    print(f"{'run':>3}  {'passed':>6}  {'failed':>6}  {'errors':>6}  {'seconds':>8}")
    for r in runs:
        print(f"{r.run:>3}  {r.passed:>6}  {r.failed:>6}  {r.errors:>6}  {r.seconds:>8.1f}")
    failures = [(r.run, name) for r in runs for name in r.failures]
    print(f"\n{len(failures)} failure(s) in {len(runs)} run(s)")
    for number, name in failures:
        print(f"  run {number}: {name}")
    print("\nslowest tests (longest time in any run, s):")
    for name, seconds in slowest:
        print(f"  {seconds:7.2f}  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="passes over the tests (default 5)")
    parser.add_argument("--burners", type=int, default=2,
                        help="CPU-burning processes beside the tests (default 2)")
    parser.add_argument("--marker", default="stress",
                        help="the tests to run, as a pytest -m expression (default: stress)")
    parser.add_argument("--workers", default="auto", help="pytest -n (default auto)")
    parser.add_argument("--top", type=int, default=15, help="how many slowest tests to list")
    parser.add_argument("--json-out", type=Path, help="write runs, failures and times here")
    parser.add_argument("--logs", type=Path, default=ROOT / "test-artifacts",
                        help="where the output of a run with failures is kept "
                             "(default test-artifacts/)")
    parser.add_argument("pytest_args", nargs="*",
                        help="more pytest arguments, after --, e.g. a folder of tests")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.burners < 0 or args.top < 0:
        parser.error(f"--runs must be at least 1 and --burners, --top at least 0 "
                     f"(got {args.runs}, {args.burners}, {args.top})")
    runs: list[Run] = []
    longest: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="fsm-stress-") as tmp, burners(args.burners):
        work = Path(tmp)
        for number in range(1, args.runs + 1):
            run, times = one_run(number, args.marker, args.workers, args.pytest_args, work)
            runs.append(run)
            for name, seconds in times.items():
                longest[name] = max(seconds, longest.get(name, 0.0))
            print(f"run {number}: {run.passed} passed, {run.failed} failed, "
                  f"{run.errors} errors in {run.seconds:.1f} s", flush=True)
            for name in run.failures:
                print(f"  failed: {name}", flush=True)
                log = work / f"run-{number}.log"
                if log.exists():
                    kept = args.logs / f"stress-run-{number}.log"
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    kept.write_text(log.read_text())
    slowest = sorted(longest.items(), key=lambda kv: -kv[1])[:args.top]
    print()
    print_table(runs, slowest)
    failed = sum(len(r.failures) for r in runs)
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "runs": [asdict(r) for r in runs], "burners": args.burners,
            "marker": args.marker, "workers": args.workers, "failures": failed,
            "tests_per_run": max((r.passed + r.failed + r.errors + r.skipped for r in runs),
                                 default=0),
            "slowest": [{"test": n, "seconds": s} for n, s in slowest],
        }, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
