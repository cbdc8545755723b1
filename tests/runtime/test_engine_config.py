"""An engine is configured once, at construction (``EngineConfig``): what the config says
reaches the run's lease row and its budgets; a setting changed afterwards still works for
one release, with a deprecation warning; a bad value is refused in one line."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from fsm import (
    Budgets,
    Engine,
    EngineConfig,
    MemoryStore,
    Retry,
    RunLocked,
    define_workflow,
)
from fsm.policy import View
from fsm.runtime.leases import Heartbeats
from fsm.store.lease import Lease

NOW = 1_000.0


def _spec() -> Any:
    return define_workflow("hello", transitions={"talking": {}}, tools_by_state={},
                           initial="talking", terminal=set(), finish_states={"talking"})


class LeaseSeen:
    """A policy that answers at once, having read the run's lease row mid-step."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.leases: list[Lease | None] = []

    def __call__(self, view: View) -> dict[str, str]:
        self.leases.append(self.store.lease(view.run_id))
        return {"final": "hello"}


def test_the_config_given_at_construction_holds_the_run_s_lease_and_budgets() -> None:
    store = MemoryStore()
    policy = LeaseSeen(store)
    config = EngineConfig(lease_seconds=7.0, owner="desk-1:1:a",
                          budgets=Budgets(max_steps=4))
    with Engine(_spec(), store, policy, config=config, clock=lambda: NOW) as engine:
        run = engine.start("say hello", run_id="r1")
    assert (run.status, run.answer) == ("done", "hello")
    assert policy.leases == [Lease(owner="desk-1:1:a", until=NOW + 7.0)]
    assert run.budgets.max_steps == 4
    assert store.lease("r1") is None  # released at the end
    assert engine.owner == "desk-1:1:a" and engine.lease_seconds == 7.0


def test_the_config_cannot_be_changed_in_place() -> None:
    engine = Engine(_spec(), MemoryStore(), config=EngineConfig(lease_seconds=5.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        engine.config.lease_seconds = 1.0  # type: ignore[misc]
    assert engine.config.lease_seconds == 5.0


def test_an_engine_without_an_owner_gets_one_of_its_own() -> None:
    a, b = Engine(_spec(), MemoryStore()), Engine(_spec(), MemoryStore())
    assert a.config.owner and b.config.owner and a.config.owner != b.config.owner
    assert a.owner == a.config.owner


@pytest.mark.parametrize("name, value", [
    ("lease_seconds", 3.0), ("step_timeout", 9.0), ("owner", "worker-2:9:z"),
    ("budgets", Budgets(max_steps=2)), ("retry", Retry(tries=2)),
])
def test_a_setting_changed_after_construction_warns_and_still_applies(
        name: str, value: Any) -> None:
    store = MemoryStore()
    policy = LeaseSeen(store)
    engine = Engine(_spec(), store, policy, clock=lambda: NOW)
    with pytest.warns(DeprecationWarning, match=rf"setting Engine\.{name} after "
                                                 r"construction is deprecated; give it as "
                                                 rf"Engine\(\.\.\., config=EngineConfig\("
                                                 rf"{name}=\.\.\.\)\)"):
        setattr(engine, name, value)
    assert getattr(engine.config, name) == value and getattr(engine, name) == value
    run = engine.start("say hello", run_id="r1")
    assert run.status == "done"
    lease = policy.leases[0]
    assert lease is not None
    if name == "lease_seconds":
        assert lease.until == NOW + 3.0
    if name == "owner":
        assert lease.owner == "worker-2:9:z"
    if name == "budgets":
        assert run.budgets.max_steps == 2


def test_the_settings_taken_on_their_own_take_the_config_s_place() -> None:
    config = EngineConfig(max_repeats=2, result_cap=100, budgets=Budgets(max_steps=9))
    kept = Engine(_spec(), MemoryStore(), config=config)
    assert (kept.config.max_repeats, kept.config.result_cap) == (2, 100)
    over = Engine(_spec(), MemoryStore(), config=config, max_repeats=None, result_cap=50,
                  budgets=Budgets(max_steps=3))
    assert (over.config.max_repeats, over.config.result_cap) == (None, 50)
    assert over.budgets.max_steps == 3
    assert Engine(_spec(), MemoryStore()).config.max_repeats == 3  # the default


@pytest.mark.parametrize("changes, message", [
    ({"lease_seconds": 0}, "lease_seconds must be a positive number of seconds, not 0"),
    ({"lease_seconds": float("nan")},
     "lease_seconds must be a positive number of seconds, not nan"),
    ({"step_timeout": -1.0},
     "step_timeout must be a positive number of seconds or None, not -1.0"),
    ({"result_cap": 0}, "result_cap must be a positive whole number of characters, not 0"),
    ({"max_repeats": 0}, "max_repeats must be a whole number of 1 or more, or None, not 0"),
    ({"max_repeats": True},
     "max_repeats must be a whole number of 1 or more, or None, not True"),
    ({"owner": ""}, "owner must be a non-empty string or None, not ''"),
])
def test_a_bad_setting_is_refused_in_one_line(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        EngineConfig(**changes)
    assert str(info.value) == message


# -- heartbeats belong to an engine (or a worker), not to the process ---------------------

class Beats:
    """A policy that reads, mid-step, whose heartbeats hold the run's lease."""

    def __init__(self, engines: list[Engine]) -> None:
        self.engines = engines
        self.holding: list[list[bool]] = []

    def __call__(self, view: View) -> dict[str, str]:
        self.holding.append([bool(e.heartbeats._held) for e in self.engines])
        return {"final": "hello"}


def test_each_engine_renews_its_own_leases_and_its_thread_ends_with_them() -> None:
    store = MemoryStore()
    engines: list[Engine] = []
    policy = Beats(engines)
    a = Engine(_spec(), store, policy)
    b = Engine(_spec(), store, policy)
    engines += [a, b]
    assert a.heartbeats is not b.heartbeats
    assert a.start("hi", run_id="a1").status == "done"
    assert b.start("hi", run_id="b1").status == "done"
    assert policy.holding == [[True, False], [False, True]]
    deadline = time.monotonic() + 60  # bounds a failure only
    while a.heartbeats._thread is not None or b.heartbeats._thread is not None:
        assert time.monotonic() < deadline, "a heartbeat thread outlived its leases"
        time.sleep(0.01)


def test_engines_given_one_heartbeats_share_it_and_one_owner_drives_a_run_once() -> None:
    store = MemoryStore()
    shared = Heartbeats()
    config = EngineConfig(owner="w:1:a")
    a = Engine(_spec(), store, config=config, heartbeats=shared)
    b = Engine(_spec(), store, config=config, heartbeats=shared)
    a.start("hi", run_id="r1", drive=False)
    with a._lease("r1"), pytest.raises(RunLocked, match="another thread of this process"):
        with b._lease("r1"):
            pass
    with b._lease("r1"):  # let go: the same owner may drive it again
        pass
