"""The sign-in throttle's memory is bounded: names and addresses are forgotten once their
failures leave the window, and no more than ``capacity`` are remembered at once, however
many fresh names are tried; the limits hold all the same."""

from __future__ import annotations

import tracemalloc

from fsm.web.auth import Throttle


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_fresh_names_from_many_addresses_never_grow_the_table_past_its_capacity() -> None:
    clock = Clock()
    throttle = Throttle(clock=clock, capacity=1_000)
    largest = 0
    for i in range(40_000):
        assert throttle.attempt(f"user-{i}", f"10.0.{i // 250 % 256}.{i % 250}") == 0.0
        clock.now += 0.01  # 400 s in all: more than a window
        largest = max(largest, len(throttle))
    assert largest == 1_000


def test_what_is_remembered_is_forgotten_once_the_window_has_passed() -> None:
    clock = Clock()
    throttle = Throttle(clock=clock)
    for i in range(3_000):
        throttle.attempt(f"fresh-{i}", f"192.0.2.{i % 200}")
    assert len(throttle) == 3_000 + 200
    clock.now += throttle.window + 1
    throttle.attempt("late", "198.51.100.1")
    assert len(throttle) == 2  # only the last attempt's name and address


def test_the_memory_of_many_fresh_names_stays_flat() -> None:
    """Ten times as many fresh names leave the same memory held (the table is capped)."""
    def held(names: int) -> int:
        clock = Clock()
        throttle = Throttle(clock=clock, capacity=2_000)
        tracemalloc.start()
        try:
            for i in range(names):
                throttle.attempt(f"name-{i}", f"203.0.113.{i % 250}")
            return tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()

    small, large = held(4_000), held(40_000)
    assert large < small * 1.5, (small, large)


def test_the_limits_still_hold_per_name_and_per_address() -> None:
    clock = Clock()
    throttle = Throttle(clock=clock, capacity=50)
    for _ in range(5):
        assert throttle.attempt("priya", "192.0.2.1") == 0.0
    assert throttle.attempt("Priya", "192.0.2.2") > 0  # the name is spent, whatever address
    for i in range(15):
        assert throttle.attempt(f"other-{i}", "192.0.2.1") == 0.0
    assert throttle.attempt("someone", "192.0.2.1") > 0  # the address has had its 20
    throttle.succeeded("other-14", "192.0.2.1")
    assert throttle.attempt("someone", "192.0.2.1") == 0.0  # a right password gives one back
    clock.now += throttle.window + 1
    assert throttle.attempt("priya", "192.0.2.1") == 0.0
