"""The long kill loop: refund runs whose ``fsm`` processes are SIGKILLed at random moments.

Each iteration starts a refund (small or large, alternating) with the installed
``fsm`` console script, kills processes at random moments, resumes (and approves
a paused large refund) until the run ends, then checks what the short version in
``tests/runtime/test_crash.py`` checks: one payment per refunded item, one policy event
per step, one tool event per write key, the gateway called at most once more per
kill, an intact audit, and the ending of a run that never crashed.

    python bench/kill_loop.py                    # 50 iterations
    python bench/kill_loop.py -n 500 --seed 7    # longer; prints a line per failure
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from fsm import RunNotFound, SQLiteStore
from fsm.auditor.audit import audit
from fsm.testing import state_path
from workflows.refund import Shop

FSM = str(Path(sys.executable).with_name("fsm"))
RUN = "k"
CASES = [
    ("Order A-1001: the kettle arrived broken, please refund it", "asha", 35_000),
    ("Order A-1002: my headphones stopped working, I want my money back", "ravi", 180_000),
]
PATH = ["collecting", "verifying", "deciding", "refunding", "replying", "done"]


def status(db: str) -> str:
    store = SQLiteStore(db)
    try:
        return store.load_run(RUN).status
    except RunNotFound:
        return "new"
    finally:
        store.close()


def command(db: str, goal: str, user: str) -> list[str] | None:
    now = status(db)
    if now in ("done", "handed_over", "failed", "budget_exhausted"):
        return None
    if now == "new":
        return ["run", "refund", goal, "--user", user, "--run-id", RUN]
    if now == "awaiting_approval":
        return ["approve", RUN, "--reviewer", "priya", "--note", "receipt checked"]
    return ["resume", RUN]


def one(db: str, goal: str, user: str, rnd: random.Random, max_kills: int,
        window: tuple[float, float]) -> int:
    """Drive one run to its end, killing up to ``max_kills`` processes; the kills."""
    kills = 0
    env = {k: v for k, v in os.environ.items() if k not in ("FSM_FAULT", "FSM_DB")}
    for _ in range(max_kills + 10):
        argv = command(db, goal, user)
        if argv is None:
            return kills
        proc = subprocess.Popen([FSM, *argv, "--db", db], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        if kills < max_kills and rnd.random() < 0.8:
            time.sleep(rnd.uniform(*window))
            proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        if proc.returncode == -signal.SIGKILL:
            kills += 1
        elif proc.returncode != 0:
            raise AssertionError(f"fsm {' '.join(argv)} exited {proc.returncode}: {err}")
    raise AssertionError("the run did not end")


def check(db: str, amount: int, kills: int) -> list[str]:
    """What is wrong with the finished run (empty when nothing is)."""
    store, shop = SQLiteStore(db), Shop(db)
    problems = []
    run = store.load_run(RUN)
    large = amount > 50_000
    want = PATH[:3] + ["awaiting_approval"] + PATH[3:] if large else PATH
    if (run.status, state_path(store, RUN)) != ("done", want):
        problems.append(f"ended {run.status} via {state_path(store, RUN)}")
    ledger = [(p["amount_paise"], p["idempotency_key"]) for p in shop.ledger()]
    if ledger != [(amount, f"{RUN}:6")]:
        problems.append(f"ledger {ledger}")
    events = store.events(RUN)
    steps = [e.step for e in events if e.kind == "policy"]
    if steps != list(range(1, 8)):
        problems.append(f"policy events at steps {steps}")
    keys = Counter(e.detail.get("key") for e in events if e.kind == "tool" and e.detail.get("key"))
    if set(keys.values()) != {1} or not {f"{RUN}:6", f"{RUN}:7"} <= set(keys):
        problems.append(f"tool events per key {dict(keys)}")
    calls = Counter(c["idempotency_key"] for c in shop.calls())
    if any(n > 1 + kills for n in calls.values()) or set(calls) != {f"{RUN}:6", f"{RUN}:7"}:
        problems.append(f"gateway calls {dict(calls)} after {kills} kills")
    problems += audit(store, RUN).problems
    store.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Kill refund runs at random moments.")
    parser.add_argument("-n", "--iterations", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-kills", type=int, default=4, help="kills per run at most")
    parser.add_argument("--window", default="0.25,0.6",
                        help="kill between these many seconds after a process starts "
                             "(it imports for ~0.3 s, then works for ~0.1 s)")
    a = parser.parse_args(argv)
    rnd = random.Random(a.seed)
    failures, total_kills, t0 = 0, 0, time.monotonic()
    for i in range(a.iterations):
        goal, user, amount = CASES[i % 2]
        db = os.path.join(tempfile.mkdtemp(prefix="fsm-kill-"), "runs.db")
        lo, hi = (float(x) for x in a.window.split(","))
        kills = one(db, goal, user, rnd, a.max_kills, (lo, hi))
        total_kills += kills
        problems = check(db, amount, kills)
        if problems:
            failures += 1
            print(f"iteration {i} ({db}, {kills} kills): " + "; ".join(problems), flush=True)
    print(f"{a.iterations} runs, {total_kills} kills, {failures} failures, "
          f"{time.monotonic() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
