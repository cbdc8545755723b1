"""Profile: where the CPU of a refund step goes.

Drives small refunds (order A-1001, the kettle: seven steps each, from ``get_order`` to
``send_reply``) with the workflow's scripted clerk on an SQLite store without flushing
(``synchronous=OFF``, so the disk does not blur the CPU figures), under ``cProfile``
(only ``Engine.start`` is profiled, not the setup), and prints the functions that cost
most — by own time and by cumulative time, in percent of the profiled time — and the
own time summed by module.

    python bench/profile_step.py               # 200 runs, the top 25
    python bench/profile_step.py --runs 50 --top 10
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from fsm import Engine, SQLiteStore
from workflows.refund import Shop, build, clerk


class FreshShop:
    """The shop the workflow's tools reach: a new one for each run, so that every run can
    refund the same kettle, while one workflow definition serves all runs (as in a worker)."""

    def __init__(self) -> None:
        self.shop = Shop().seed_demo()

    def get(self, ctx: object = None) -> Shop:
        return self.shop

    def renew(self) -> None:
        self.shop.close()
        self.shop = Shop().seed_demo()


def profile(runs: int, workdir: Path) -> tuple[pstats.Stats, int]:
    """Profile ``runs`` small refunds; the statistics and the number of steps taken."""
    store = SQLiteStore(str(workdir / "profile.db"), synchronous="OFF")
    shop = FreshShop()
    spec = build(shop)
    profiler = cProfile.Profile()
    steps = 0
    try:
        for i in range(runs + 5):
            shop.renew()
            engine = Engine(spec, store, clerk)
            measured = i >= 5  # the first runs fill caches and are not counted
            if measured:
                profiler.enable()
            run = engine.start("Order A-1001: kettle arrived broken", user="asha",
                               run_id=f"r{i}")
            if measured:
                profiler.disable()
                steps += run.step
            assert run.status == "done", run
    finally:
        shop.shop.close()
        store.close()
    return pstats.Stats(profiler), steps


def _short(filename: str) -> str:
    """A file's path from its package: fsm/..., workflows/..., a library's, the stdlib's."""
    for marker in ("/site-packages/", "/fsm/", "/workflows/"):
        if marker in filename:
            prefix = "" if marker == "/site-packages/" else marker.strip("/") + "/"
            return prefix + filename.rsplit(marker, 1)[1]
    if "/lib/python3" in filename:
        return filename.rsplit("/lib/python3", 1)[1].split("/", 1)[1]
    return filename


def _where(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    return name if filename == "~" else f"{_short(filename)}:{line}({name})"


def _module(key: tuple[str, int, str]) -> str:
    """What a function belongs to, for the per-module sums: an fsm module, else a package."""
    filename, _, name = key
    if filename == "~":
        for lib in ("sqlite3", "pydantic_core", "json", "hashlib"):
            if lib in name:
                return f"{lib} (C)"
        return "builtins (C)"
    short = _short(filename)
    if short.startswith(("fsm/", "workflows/")):
        return short
    return short.split("/")[0].removesuffix(".py")


def report(stats: pstats.Stats, steps: int, top: int) -> str:
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    lines = [f"{steps} steps profiled, {total * 1000 / steps:.3f} ms CPU per step under "
             "cProfile (which slows Python code more than C code)", "",
             f"top {top} by own time:"]
    by_own = sorted(raw.items(), key=lambda kv: -kv[1][2])[:top]
    for key, (_, calls, own, _cum, _) in by_own:
        lines.append(f"  {own / total:6.1%}  {calls / steps:7.1f} calls/step  {_where(key)}")
    lines += ["", f"top {top} by cumulative time (what a call costs with everything it calls):"]
    for key, (_, calls, _own, cum, _) in sorted(raw.items(), key=lambda kv: -kv[1][3])[:top]:
        lines.append(f"  {cum / total:6.1%}  {calls / steps:7.1f} calls/step  {_where(key)}")
    modules: dict[str, float] = defaultdict(float)
    for key, value in raw.items():
        modules[_module(key)] += value[2]
    lines += ["", "own time by module:"]
    for name, own in sorted(modules.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {own / total:6.1%}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="refund runs to profile")
    parser.add_argument("--top", type=int, default=25, help="rows of each list")
    parser.add_argument("--dump", default=None, help="also write the raw profile here")
    a = parser.parse_args(argv)
    if a.runs < 1 or a.top < 1:
        print("error: --runs and --top must be at least 1", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="fsm-profile-"))
    try:
        stats, steps = profile(a.runs, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if a.dump:
        stats.dump_stats(a.dump)
    print(report(stats, steps, a.top))
    return 0


if __name__ == "__main__":
    os.environ.pop("FSM_FAULT", None)
    sys.exit(main())
