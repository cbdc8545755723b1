"""The policy a run started with, built again in a later process (a worker, the inbox,
``fsm resume``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from fsm.registry import default_policy, load_policy
from fsm.spec import WorkflowSpec


class Recorded(NamedTuple):
    """A policy as a start event records it: a model (with its base URL and timeout), a
    ``module:attr`` policy, or neither (the workflow's default policy)."""

    policy: str | None
    model: str | None
    base_url: str | None
    timeout: float | None


def recorded_choice(start: Mapping[str, Any], name: str | None = None) -> Recorded:
    """The policy named ``name``, else the one the run's start event records (``start``
    is its detail): ``model:NAME``, ``module:attr`` or ``default``."""
    name = name or str(start.get("policy") or "default")
    if name.startswith("model:"):
        return Recorded(None, name.removeprefix("model:"), start.get("base_url"),
                        start.get("timeout"))
    return Recorded(None if name == "default" else name, None, None, None)


def recorded_policy(ref: str, spec: WorkflowSpec, start: Mapping[str, Any],
                    name: str | None = None) -> Any:
    """The policy :func:`recorded_choice` names: a model is an :class:`OpenAIPolicy` with
    the recorded base URL and timeout, ``default`` the workflow's own default policy
    (``None`` when it ships none)."""
    chosen = recorded_choice(start, name)
    if chosen.model is not None:
        from fsm.adapters.openai import DEFAULT_TIMEOUT, OpenAIPolicy

        return OpenAIPolicy(spec, chosen.model, base_url=chosen.base_url,
                            timeout=DEFAULT_TIMEOUT if chosen.timeout is None
                            else chosen.timeout)
    if chosen.policy is not None:
        return load_policy(chosen.policy)
    return default_policy(ref)
