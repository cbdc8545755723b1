"""Benchmark: how long the ``fsm`` command takes to start, against ``python -c pass``.

Four commands, each run several times in a fresh process, in turn (best and median wall
time): ``python -c pass`` (the interpreter's own start, the baseline), ``python -c "import
typer"`` (the CLI framework alone), ``python -c "import fsm.cli"`` and ``fsm --help``.
Then the modules that ``import fsm.cli`` spends most on, from ``python -X importtime``
(cumulative, the slowest first).

    python bench/imports.py             # make bench
    python bench/imports.py --repeat 3 --top 10

Target: ``fsm --help`` in at most 150 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_MS = 150.0


def wall_ms(commands: dict[str, list[str]], repeat: int) -> dict[str, list[float]]:
    """Wall times in ms of each command, each run in a new process, the commands taken in
    turn so that a busy moment of the machine hits them all alike."""
    out: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            out[name].append((time.perf_counter() - t0) * 1000)
    return out


def importtime(module: str) -> list[tuple[str, int, int]]:
    """``(module, self µs, cumulative µs)`` for every module ``import module`` loads."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                          capture_output=True, text=True, check=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((name.rstrip(), int(own), int(cumulative)))
    return rows


def top_level(rows: list[tuple[str, int, int]], top: int) -> list[tuple[str, int]]:
    """The slowest imports by cumulative time, excluding ``fsm.cli`` itself."""
    named = [(name.strip(), cum) for name, _, cum in rows if name.strip() != "fsm.cli"]
    return sorted(named, key=lambda r: -r[1])[:top]


def fsm_script() -> list[str]:
    """The ``fsm`` console script beside this interpreter, else ``python -m fsm``."""
    script = Path(sys.executable).with_name("fsm")
    return [str(script)] if script.exists() else [sys.executable, "-m", "fsm"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs of each command")
    parser.add_argument("--top", type=int, default=15, help="slowest imports to list")
    parser.add_argument("--json", action="store_true", help="print only the JSON")
    a = parser.parse_args(argv)
    if a.repeat < 1 or a.top < 0:
        print("error: --repeat must be at least 1 and --top at least 0", file=sys.stderr)
        return 2
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import typer": [sys.executable, "-c", "import typer"],
        "import fsm.cli": [sys.executable, "-c", "import fsm.cli"],
        "fsm --help": [*fsm_script(), "--help"],
    }
    for cmd in commands.values():  # the first run fills the bytecode caches
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    times = wall_ms(commands, a.repeat)
    rows = importtime("fsm.cli")
    total_us = next((cum for name, _, cum in rows if name.strip() == "fsm.cli"), 0)
    result = {
        "ms": {name: {"best": min(t), "median": statistics.median(t)}
               for name, t in times.items()},
        "importtime_fsm_cli_ms": total_us / 1000,
        "slowest_imports_ms": {name: cum / 1000 for name, cum in top_level(rows, a.top)},
        "target_ms": TARGET_MS,
    }
    base = result["ms"]["python -c pass"]["best"]
    result["help_over_baseline_ms"] = result["ms"]["fsm --help"]["best"] - base
    result["help_within_target"] = result["ms"]["fsm --help"]["best"] <= TARGET_MS
    if not a.json:
        print(f"start-up time, {a.repeat} runs each (best / median wall ms)")
        for name, t in result["ms"].items():
            extra = "" if name == "python -c pass" else f"  (+{t['best'] - base:.0f} ms)"
            print(f"  {name:<16} {t['best']:7.1f} / {t['median']:7.1f}{extra}")
        verdict = "yes" if result["help_within_target"] else "NO"
        print(f"  fsm --help within {TARGET_MS:.0f} ms: {verdict}")
        print(f"python -X importtime -c 'import fsm.cli': {total_us / 1000:.1f} ms; "
              "slowest imports (cumulative ms):")
        for name, ms in result["slowest_imports_ms"].items():
            print(f"  {ms:7.1f}  {name}")
        print()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
