"""Benchmark: the same agent loop on fsm, LangGraph and Apache Burr.

The workload (``bench/workload.py``): N rounds of a tool-using agent loop, where one
round is one scripted policy decision (call ``fetch(i)``), one call of a read-only tool
(a result of about 200 bytes) and one durable checkpoint to SQLite. Every system
writes through a connection in WAL mode with ``synchronous=FULL`` (an fsync per
commit), so every round survives a crash before the next one starts.

What one round is, per system:

- **fsm** (``peer_fsm.py``): one engine step of a one-state workflow — budgets, view,
  policy, gate (tool allowed here, arguments validated, repeat check), tool, and one
  SQLite transaction with the run snapshot, the two new messages, the view record and
  the hash-chained events. One commit per round.
- **LangGraph** (``peer_langgraph.py``, ``langgraph`` + ``langgraph-checkpoint-sqlite``):
  one super-step of a one-node ``StateGraph`` (policy and tool in the node, messages
  in an ``operator.add`` list channel) under a ``SqliteSaver``, invoked with
  ``durability="sync"``. Two commits per round: the node's writes, then a checkpoint
  holding the whole state.
- **Burr** (``peer_burr.py``, ``apache-burr``): one action (policy and tool, messages
  appended to the state) under a ``SQLitePersister``, which inserts the whole state as
  JSON and commits after every action. One commit per round.

LangGraph and Burr each run in their own virtual environment under ``bench/.peers/``
(created on first use with ``python -m venv`` and pip, pinned versions). Each
measurement is a fresh process that warms up on 5 rounds first; the runs are
interleaved (every size, every system in a rotating order, then the next repetition)
so that a noisy neighbour hits all systems alike. A round is timed from one policy
decision to the next; bytes are the database and its WAL after a checkpoint, less
free pages.

    python bench/peers.py                      # N = 10, 100, 500, 1000; 5 repetitions
    python bench/peers.py --quick              # N = 10, 50; once
    python bench/peers.py --systems fsm --no-plot
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEERS_DIR = HERE / ".peers"
DEFAULT_PLOT = HERE / "peers.png"


@dataclass(frozen=True)
class System:
    name: str
    label: str
    script: str
    pins: tuple[str, ...]  # empty: runs in this interpreter (the project's environment)


SYSTEMS = {
    "fsm": System("fsm", "fsm", "peer_fsm.py", ()),
    "langgraph": System("langgraph", "LangGraph", "peer_langgraph.py",
                        ("langgraph==1.2.22", "langgraph-checkpoint-sqlite==3.1.2")),
    "burr": System("burr", "Burr", "peer_burr.py", ("apache-burr==0.43.0",)),
}


class UsageError(Exception):
    """An argument that cannot be used."""


# -- arguments ------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 10, 50, one repetition")
    parser.add_argument("--sizes", default=None, help="comma-separated N (default 10,100,500,1000)")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (median; default 5)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated, from: {', '.join(SYSTEMS)}")
    parser.add_argument("--synchronous", default="FULL",
                        help="SQLite synchronous: OFF, NORMAL, FULL")
    parser.add_argument("--plot", default=str(DEFAULT_PLOT), help="PNG to draw the figures into")
    parser.add_argument("--no-plot", action="store_true", help="draw no PNG")
    parser.add_argument("--json-out", default=None, help="also write the JSON to this file")
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    a = parser.parse_args(argv)
    a.sizes = _positive_ints(a.sizes or ("10,50" if a.quick else "10,100,500,1000"), "--sizes")
    a.repeat = a.repeat if a.repeat is not None else (1 if a.quick else 5)
    if a.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, not {a.repeat}")
    a.systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    unknown = [s for s in a.systems if s not in SYSTEMS]
    if unknown or not a.systems:
        raise UsageError(f"unknown system(s) {', '.join(map(repr, unknown)) or 'none given'} "
                         f"for --systems (allowed: {', '.join(SYSTEMS)})")
    a.synchronous = a.synchronous.upper()
    if a.synchronous not in ("OFF", "NORMAL", "FULL"):
        raise UsageError(f"--synchronous must be OFF, NORMAL or FULL, not {a.synchronous!r}")
    return a


def _positive_ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(s) for s in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v < 2 for v in values):
        raise UsageError(f"{flag} takes comma-separated whole numbers of at least 2, "
                         f"not {text!r}")
    return values


# -- environments ---------------------------------------------------------------------------------

def interpreter(system: System, progress: Any = None) -> Path:
    """The Python that runs ``system``: this one for fsm, else its own venv, made on demand."""
    if not system.pins:
        return Path(sys.executable)
    home = PEERS_DIR / f"{system.name}-venv"
    python = home / "bin" / "python"
    stamp = home / (".installed-" + hashlib.sha256(" ".join(system.pins).encode()).hexdigest()[:12])
    if stamp.exists():
        return python
    if progress:
        progress(f"installing {', '.join(system.pins)} into {home} ...")
    shutil.rmtree(home, ignore_errors=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(home)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *system.pins], check=True)
    stamp.touch()
    return python


def run_one(python: Path, system: System, rounds: int, synchronous: str,
            workdir: Path) -> dict[str, Any]:
    """One measurement in a fresh process; its database is removed afterwards."""
    db = workdir / f"{system.name}-{rounds}.db"
    try:
        proc = subprocess.run(
            [str(python), str(HERE / system.script), "--rounds", str(rounds), "--db", str(db),
             "--synchronous", synchronous],
            capture_output=True, text=True, cwd=str(HERE), check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{system.name} N={rounds} failed:\n{proc.stderr.strip()}")
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    finally:
        for path in workdir.glob(f"{system.name}-{rounds}.db*"):
            path.unlink()


# -- measuring ------------------------------------------------------------------------------------

class Progress:
    """One line on stderr, rewritten in place on a terminal, one line per update in a log."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def __call__(self, text: str) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K" + text)
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def measure(a: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    progress = Progress()
    systems = [SYSTEMS[s] for s in a.systems]
    pythons = {s.name: interpreter(s, progress) for s in systems}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        s.name: {str(n): [] for n in a.sizes} for s in systems}
    total, done = a.repeat * len(a.sizes) * len(systems), 0
    for rep in range(a.repeat):
        for k, n in enumerate(a.sizes):
            turn = (rep + k) % len(systems)
            for system in systems[turn:] + systems[:turn]:
                done += 1
                progress(f"[{done:>3}/{total}] {system.label:<9} N={n:<5} "
                         f"repetition {rep + 1}/{a.repeat}")
                runs[system.name][str(n)].append(
                    run_one(pythons[system.name], system, n, a.synchronous, workdir))
    progress.done()
    sqlite = next(iter(next(iter(runs.values())).values()))[0]["sqlite"]
    return summarise(runs, a.synchronous, sqlite)


def summarise(runs: dict[str, dict[str, list[dict[str, Any]]]], synchronous: str,
              sqlite: str) -> dict[str, Any]:
    """Medians per system and N, and each system's ratios to fsm's figures."""
    result: dict[str, Any] = {"synchronous": synchronous, "sqlite": sqlite,
                              "python": sys.version.split()[0], "systems": {}}
    for name, by_n in runs.items():
        rows = {}
        for n, samples in by_n.items():
            rows[n] = {key: statistics.median(s[key] for s in samples)
                       for key in ("ms_per_round", "ms_per_round_median",
                                   "ms_per_round_incl_setup", "bytes")}
            rows[n]["bytes_per_round"] = rows[n]["bytes"] / int(n)
            rows[n]["samples"] = len(samples)
        result["systems"][name] = rows
    base = result["systems"].get("fsm")
    for rows in result["systems"].values():
        for n, row in rows.items():
            if base and n in base:
                row["ms_ratio_to_fsm"] = row["ms_per_round"] / base[n]["ms_per_round"]
                row["bytes_ratio_to_fsm"] = row["bytes"] / base[n]["bytes"]
    return result


# -- reporting ------------------------------------------------------------------------------------

def table(r: dict[str, Any]) -> str:
    """The figures as a Markdown table: one row per N and system."""
    lines = [f"agent loop, one durable checkpoint per round — synchronous={r['synchronous']}, "
             f"SQLite {r['sqlite']}, Python {r['python']}", "",
             "| N | system | ms/round | median | × fsm | bytes on disk | bytes/round | × fsm |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    sizes = sorted({int(n) for rows in r["systems"].values() for n in rows})
    for n in sizes:
        for name, rows in r["systems"].items():
            row = rows.get(str(n))
            if row is None:
                continue
            ms_x = f"{row['ms_ratio_to_fsm']:.1f}×" if "ms_ratio_to_fsm" in row else "–"
            b_x = f"{row['bytes_ratio_to_fsm']:.1f}×" if "bytes_ratio_to_fsm" in row else "–"
            lines.append(f"| {n:,} | {SYSTEMS[name].label} | {row['ms_per_round']:.2f} | "
                         f"{row['ms_per_round_median']:.2f} | {ms_x} | {row['bytes']:,.0f} | "
                         f"{row['bytes_per_round']:,.0f} | {b_x} |")
    return "\n".join(lines)


def series(r: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Per system, the lines to draw: N, ms per round and bytes, in order of N."""
    out = {}
    for name, rows in r["systems"].items():
        ns = sorted(rows, key=int)
        out[SYSTEMS[name].label] = {"n": [float(n) for n in ns],
                                    "ms_per_round": [rows[n]["ms_per_round"] for n in ns],
                                    "bytes": [float(rows[n]["bytes"]) for n in ns]}
    return out


def plot(r: dict[str, Any], path: Path) -> None:
    """Two panels, log-log: ms per round against N, and bytes on disk against N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = series(r)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    for label, s in lines.items():
        left.plot(s["n"], s["ms_per_round"], marker="o", label=label)
        right.plot(s["n"], s["bytes"], marker="o", label=label)
    for ax, title, unit in ((left, "time per round", "ms per round"),
                            (right, "database size after N rounds", "bytes on disk")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N (rounds)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"agent loop with a durable SQLite checkpoint per round "
                 f"(synchronous={r['synchronous']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    try:
        a = parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    workdir = Path(a.dir or tempfile.mkdtemp(prefix="fsm-peers-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        result = measure(a, workdir)
    finally:
        if a.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(result), end="\n\n")
    blob = json.dumps(result, indent=2)
    if a.json_out:
        Path(a.json_out).write_text(blob + "\n")
    if not a.no_plot:
        plot(result, Path(a.plot))
        print(f"figures drawn in {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
