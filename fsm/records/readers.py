"""What a run's log says: how it started, the policy it is driven with, the states it
went through."""

from __future__ import annotations

from typing import Any

from fsm.records.models import (
    Event,
)


def start_detail(events: list[Event]) -> dict[str, Any]:
    """What a run's start event records (the workflow's name, the policy, a model's base
    URL and timeout); empty when its log does not begin with one."""
    return events[0].detail if events and events[0].kind == "start" else {}


def policy_record(events: list[Event]) -> dict[str, Any]:
    """The policy a run is driven with: the detail of its last ``policy_set`` event, else
    what its start event records (``policy``, and for a model ``base_url``, ``timeout``
    and ``settings``)."""
    for e in reversed(events):
        if e.kind == "policy_set":
            return e.detail
    return start_detail(events)


def same_policy(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when two policy records (see :func:`policy_record`) name the same policy
    with the same base URL, timeout and settings."""
    keys = ("policy", "base_url", "timeout", "settings")
    return all(a.get(k) == b.get(k) for k in keys)


def started_as(events: list[Event], workflow: str) -> str:
    """How a run's workflow was named when it started (``fsm run`` records the registered
    name or ``module:attr`` in the start event), else the workflow's own name."""
    ref = start_detail(events).get("workflow_ref")
    return str(ref) if ref else workflow


def state_path(events: list[Event]) -> list[str]:
    """The workflow states a run went through, from its log (the initial state first)."""
    path = [events[0].state_after or ""] if events else []
    path += [e.state_after or "" for e in events if e.kind == "transition"]
    return path
