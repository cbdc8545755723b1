"""The test suite's figures: how many tests ``make test`` and ``make test-core`` run, and
how long each took when last measured, kept in ``bench/suite.json`` and written into the
README and ``docs/how-to/setup.md`` between ``<!-- figures:tests -->`` markers.

    python bench/suite_figures.py --measure                 # make figures: run both, write
    python bench/suite_figures.py --from-logs ALL.log CORE.log   # pytest output of a run
    python bench/suite_figures.py --from-ci CI.log          # what .ci/run printed
    python bench/suite_figures.py --render                  # the pages from suite.json

``tests/docs/test_suite_figures.py`` checks that both pages say what ``suite.json`` says
and that its counts are the tests collected now, so a count cannot go stale.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "bench" / "suite.json"
PAGES = (ROOT / "README.md", ROOT / "docs" / "how-to" / "setup.md")
START, END = "<!-- figures:tests -->", "<!-- /figures:tests -->"
#: The markers ``make test-core`` leaves out, and its ``-m`` expression.
CORE_LEAVES_OUT = ("postgres", "services")
CORE = " and ".join(f"not {m}" for m in CORE_LEAVES_OUT)
#: pytest's closing line: "1903 passed, 2 deselected in 357.12s (0:05:57)".
SUMMARY = re.compile(r"^=*\s*(?P<text>[^=]*?\b(?P<passed>\d+) passed[^=]*? in "
                     r"(?P<s>[\d.]+)s(?: \([\d:]+\))?)\s*=*$")


#: The tests that check this record: they cannot pass in the run that measures it before
#: the record is written, and are counted, not held against the run.
SELF = "tests/docs/test_suite_figures.py::"


def summary(output: str) -> tuple[str, int, float]:
    """The closing line of a pytest run, its count of tests and its seconds. A run with
    any failure but this record's own checks is refused."""
    failed = [x for x in output.splitlines() if x.startswith(("FAILED ", "ERROR "))]
    others = [x for x in failed if not x.split(" ", 1)[1].startswith(SELF)]
    for line in reversed(output.splitlines()):
        m = SUMMARY.match(line.strip())
        if m:
            if others or re.search(r"\d+ error", m["text"]) or (
                    re.search(r"\d+ failed", m["text"]) and not failed):
                raise SystemExit(f"the run did not pass: {m['text']}")
            return m["text"], int(m["passed"]) + len(failed), float(m["s"])
    raise SystemExit("no pytest summary line ('N passed in S s') in the output")


def measure(marker: str | None) -> str:
    """The output of the suite run as ``make test`` (or ``make test-core``) runs it."""
    cmd = [sys.executable, "-m", "pytest", "-n", "auto", "-p", "no:cacheprovider"]
    if marker:
        cmd += ["-m", marker]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    sys.stdout.write(proc.stdout[-2000:])
    # The whole output, for reading what failed.
    log = ROOT / "test-artifacts" / f"suite-{'core' if marker else 'all'}.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text(proc.stdout)
    return proc.stdout


def record(all_output: str, core_output: str, python: str | None = None,
           core_python: str | None = None) -> dict[str, object]:
    text, tests, seconds = summary(all_output)
    core_text, core_tests, core_seconds = summary(core_output)
    here = platform.python_version()
    return {"tests": tests, "seconds": seconds, "summary": text,
            "core_tests": core_tests, "core_seconds": core_seconds, "core_summary": core_text,
            "python": python or here, "core_python": core_python or python or here,
            "cores": os.cpu_count(), "measured": dt.date.today().isoformat()}


#: A step of .ci/run: "== make test (python3, Python 3.11) (at 95 s)" or
#: "== make test-core with /path/python3.12 (at 700 s)".
CI_STEP = re.compile(r"^== make (?P<what>test-core|test)\b(?P<rest>.*)$", re.M)


def from_ci(log: str) -> dict[str, object]:
    """The figures of a ``.ci/run`` log: its ``make test`` and its first ``make test-core``."""
    steps = list(CI_STEP.finditer(log))
    parts: dict[str, tuple[str, str]] = {}
    for i, m in enumerate(steps):
        end = steps[i + 1].start() if i + 1 < len(steps) else len(log)
        version = re.search(r"(?:Python |python)(\d+\.\d+)", m["rest"])
        parts.setdefault(m["what"], (log[m.end():end], version[1] if version else ""))
    if set(parts) != {"test", "test-core"}:
        raise SystemExit("the log has no 'make test' and 'make test-core' steps of .ci/run")
    (all_out, python), (core_out, core_python) = parts["test"], parts["test-core"]
    return record(all_out, core_out, python, core_python)


def render(f: dict[str, Any]) -> str:
    """The paragraph both pages carry, from the recorded figures."""
    tests, core = int(f["tests"]), int(f["core_tests"])
    return (
        f"`make test` runs all of it: {tests:,} tests, {tests - core:,} of them the "
        "PostgreSQL, worker, inbox and browser tests, in one process per core "
        "(pytest-xdist; every test has its own folder, database schema, ports and "
        f"servers). Last measured on the shared {f['cores']}-core machine "
        f"({f['measured']}, Python {f['python']}), it took "
        f"{float(f['seconds']):.0f} s. `make test-core` leaves "
        f"those {tests - core:,} out (`pytest -m \"{CORE}\"`): {core:,} tests in "
        f"{float(f['core_seconds']):.0f} s (Python {f['core_python']}). "
        "`make figures` measures both again and rewrites this paragraph; a test checks "
        "that its counts are the tests that exist.")


def write_pages(f: dict[str, object]) -> None:
    block = f"{START}\n{render(f)}\n{END}"
    for page in PAGES:
        text = page.read_text()
        start, end = text.index(START), text.index(END) + len(END)
        page.write_text(text[:start] + block + text[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--measure", action="store_true", help="run both suites now")
    how.add_argument("--from-logs", nargs=2, type=Path, metavar=("ALL_LOG", "CORE_LOG"),
                     help="the output of make test and of make test-core")
    how.add_argument("--from-ci", type=Path, metavar="CI_LOG", help="what .ci/run printed")
    how.add_argument("--render", action="store_true", help="rewrite the pages from suite.json")
    args = parser.parse_args(argv)
    if args.render:
        figures = json.loads(FIGURES.read_text())
    elif args.measure:
        figures = record(measure(None), measure(CORE))
    elif args.from_ci:
        if not args.from_ci.is_file():
            parser.error(f"no such log: {args.from_ci}")
        figures = from_ci(args.from_ci.read_text(errors="replace"))
    else:
        missing = [str(p) for p in args.from_logs if not p.is_file()]
        if missing:
            parser.error(f"no such log: {', '.join(missing)}")
        figures = record(*(p.read_text(errors="replace") for p in args.from_logs))
    FIGURES.write_text(json.dumps(figures, indent=2) + "\n")
    write_pages(figures)
    print(render(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
