"""The suite's figures in the README and the set-up page are the ones ``bench/suite.json``
records (``make figures`` writes all three), and its counts are the tests that exist now:
a test added or removed without measuring again fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from paths import ROOT, bench_script

#: Prints how many tests pytest collects, and how many of them are in the core.
COUNTER = '''
LEFT_OUT = set({left_out!r})
def pytest_collection_finish(session):
    core = sum(not LEFT_OUT & {{m.name for m in item.iter_markers()}}
               for item in session.items)
    print(f"\\nCOUNTED {{len(session.items)}} {{core}}")
'''


def test_both_pages_say_what_suite_json_records() -> None:
    figures = bench_script("suite_figures")
    recorded = json.loads(figures.FIGURES.read_text())
    block = f"{figures.START}\n{figures.render(recorded)}\n{figures.END}"
    for page in figures.PAGES:
        assert block in page.read_text(), f"{page.name}: run `make figures` (or --render)"
    for key in ("summary", "core_summary"):
        assert " passed" in recorded[key] and " in " in recorded[key]


def test_the_recorded_counts_are_the_tests_collected_now(tmp_path: Path) -> None:
    figures = bench_script("suite_figures")
    recorded = json.loads(figures.FIGURES.read_text())
    (tmp_path / "fsm_count_tests.py").write_text(COUNTER.format(left_out=figures.CORE_LEAVES_OUT))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-p", "fsm_count_tests"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("COUNTED "))
    tests, core = (int(n) for n in line.split()[1:])
    assert (recorded["tests"], recorded["core_tests"]) == (tests, core), (
        "bench/suite.json is stale: run `make figures`")


def test_a_summary_line_is_read_and_a_failed_run_is_refused() -> None:
    figures = bench_script("suite_figures")
    assert figures.summary("....\n1579 passed, 324 deselected in 200.51s (0:03:20)\n") == (
        "1579 passed, 324 deselected in 200.51s (0:03:20)", 1579, 200.51)
    # Only this record's own checks may fail in the run that measures it (the record
    # does not exist yet); any other failure refuses the run.
    own = ("FAILED tests/docs/test_suite_figures.py::test_x - FileNotFoundError\n"
           "1 failed, 1902 passed in 300.00s\n")
    assert figures.summary(own) == ("1 failed, 1902 passed in 300.00s", 1903, 300.0)
    try:
        figures.summary("FAILED tests/runtime/test_y.py::test_y - boom\n"
                        "1 failed, 1902 passed in 300.00s\n")
    except SystemExit as exc:
        assert "did not pass" in str(exc)
    else:
        raise AssertionError("a failed run was recorded")


def test_a_ci_log_gives_make_test_and_the_first_core_run_with_their_pythons() -> None:
    log = ("== make check (at 2 s)\nAll checks passed!\n"
           "== make test (python3, Python 3.11) (at 80 s)\n....\n"
           "2100 passed in 400.10s (0:06:40)\n"
           "== make test-core with /opt/py/bin/python3.12 (at 500 s)\n...\n"
           "1700 passed, 400 deselected in 250.00s (0:04:10)\n"
           "== make test-core with /opt/py/bin/python3.13 (at 800 s)\n...\n"
           "1700 passed, 400 deselected in 260.00s (0:04:20)\n== make taubench (at 1100 s)\n")
    figures = bench_script("suite_figures").from_ci(log)
    assert (figures["tests"], figures["seconds"], figures["python"]) == (2100, 400.1, "3.11")
    assert (figures["core_tests"], figures["core_seconds"], figures["core_python"]) == (
        1700, 250.0, "3.12")
