"""The policy a run started with, built again in a later process (a worker, the inbox)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fsm.adapters.openai import DEFAULT_TIMEOUT, OpenAIPolicy
from fsm.registry import default_policy, load_policy
from fsm.spec import WorkflowSpec


def recorded_policy(ref: str, spec: WorkflowSpec, start: Mapping[str, Any],
                    name: str | None = None) -> Any:
    """The policy named ``name``, else the one the run's start event records (``start``
    is its detail): ``model:NAME`` is an :class:`OpenAIPolicy` with the recorded base
    URL and timeout, ``module:attr`` that policy, ``default`` the workflow's own default
    policy (``None`` when it ships none)."""
    name = name or str(start.get("policy") or "default")
    if name.startswith("model:"):
        timeout = start.get("timeout")
        return OpenAIPolicy(spec, name.removeprefix("model:"), base_url=start.get("base_url"),
                            timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
    if name != "default":
        return load_policy(name)
    return default_policy(ref)
