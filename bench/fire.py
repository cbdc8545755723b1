"""Benchmark: the cost of firing one event through the compiled workflow machine.

Fires ``verified`` (its guard reads one fact) from ``verifying`` of the
refund workflow N times through :func:`fsm.definition.machine.machine_for`, and, for
comparison, the same trigger on a ``transitions`` machine that adds and removes a
model around every fire (how fsm fired events before the permanent model).

    python bench/fire.py [N]
"""

from __future__ import annotations

import sys
import time

from transitions import Machine

from fsm.definition.machine import machine_for
from workflows.refund import Shop, build


class _Token:
    state: str


def per_fire_us(fn, n: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    shop = Shop()
    try:
        spec = build(shop)
        facts = {"policy": {"eligible": True}}
        machine = machine_for(spec)
        now = per_fire_us(lambda: machine.fire("verifying", "verified", facts, {}), n)
        # The old way: a throwaway model added and removed around each fire.
        inner = machine._machine

        def add_remove() -> None:
            token = _Token()
            inner.add_model(token, initial="verifying")
            try:
                inner.events["verified"].trigger(token, facts=facts, payload={})
            finally:
                inner.remove_model(token)

        before = per_fire_us(add_remove, n)
        assert isinstance(inner, Machine)
        print(f"fire, permanent model:       {now:7.1f} µs")
        print(f"fire, add/remove per event:  {before:7.1f} µs  ({before / now:.1f}x)")
    finally:
        shop._db.close()


if __name__ == "__main__":
    main()
