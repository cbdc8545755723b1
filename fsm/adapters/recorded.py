"""The policy a run is driven with, built again in a later process (a worker, the inbox,
``fsm resume``), and the request a past step sent, rebuilt from the log."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from fsm.definition.registry import default_policy, load_policy
from fsm.definition.spec import WorkflowSpec
from fsm.policy import View
from fsm.records import Event
from fsm.settings import Settings


class Recorded(NamedTuple):
    """A policy as a run's log records it: a model (with its base URL, timeout and
    settings), a ``module:attr`` policy, or neither (the workflow's default policy)."""

    policy: str | None
    model: str | None
    base_url: str | None
    timeout: float | None
    settings: Mapping[str, Any] = {}


def recorded_choice(start: Mapping[str, Any], name: str | None = None) -> Recorded:
    """The policy named ``name``, else the one ``start`` records (the detail of a start or
    ``policy_set`` event, see :func:`fsm.records.policy_record`): ``model:NAME``,
    ``module:attr`` or ``default``."""
    name = name or str(start.get("policy") or "default")
    if name.startswith("model:"):
        settings = start.get("settings")
        return Recorded(None, name.removeprefix("model:"), start.get("base_url"),
                        start.get("timeout"), settings if isinstance(settings, Mapping) else {})
    return Recorded(None if name == "default" else name, None, None, None)


def model_policy(spec: WorkflowSpec, model: str, *, base_url: str | None = None,
                 timeout: float | None = None, settings: Mapping[str, Any] | None = None,
                 events: Iterable[Event] = (), config: Settings | None = None,
                 awaited: bool = False) -> Any:
    """An :class:`~fsm.adapters.openai.OpenAIPolicy` with recorded ``settings`` (see
    :meth:`~fsm.adapters.openai.OpenAIPolicy.settings`), knowing what the run's log
    ``events`` say about its server; ``config`` gives the key, the prices and the tool
    choice (:class:`fsm.settings.Settings`). ``awaited``: the
    :class:`~fsm.adapters.openai.AsyncOpenAIPolicy` (for an event loop's driver)."""
    from fsm.adapters.openai import (
        DEFAULT_MAX_OUTPUT_TOKENS,
        DEFAULT_TIMEOUT,
        AsyncOpenAIPolicy,
        OpenAIPolicy,
    )

    given = dict(settings or {})
    policy = (AsyncOpenAIPolicy if awaited else OpenAIPolicy)(
        spec, model, base_url=base_url,
        timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
        max_output_tokens=given.get("max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS),
        force=given.get("force"), server=str(given.get("server") or "auto"),
        options=given.get("options") or None, settings=config)
    policy.remember(events)
    return policy


def recorded_policy(ref: str, spec: WorkflowSpec, start: Mapping[str, Any],
                    name: str | None = None, events: Iterable[Event] = (),
                    config: Settings | None = None, awaited: bool = False) -> Any:
    """The policy :func:`recorded_choice` names: a model is an :class:`OpenAIPolicy` with
    the recorded base URL, timeout and settings, told what ``events`` (the run's log)
    learnt about its server; ``default`` is the workflow's own default policy (``None``
    when it ships none). ``awaited`` makes a model's policy the async one."""
    chosen = recorded_choice(start, name)
    if chosen.model is not None:
        return model_policy(spec, chosen.model, base_url=chosen.base_url,
                            timeout=chosen.timeout, settings=chosen.settings, events=events,
                            config=config, awaited=awaited)
    if chosen.policy is not None:
        return load_policy(chosen.policy)
    return default_policy(ref)


def sent_body(view: View, events: Iterable[Event], model: str | None = None) -> dict[str, Any]:
    """The request body the policy call of ``view``'s step sent, rebuilt from that step's
    ``policy`` event (its last one: after a fallback, what the last attempt sent).

    ``model`` rebuilds it for another model, or for a step whose log records no request
    (a rule-based policy, an older run): then shaped for a server of no known family.
    Raises ``LookupError`` when neither is there.
    """
    from fsm.adapters.translate import Shape, body_for, request_body

    logged = [e for e in events if e.kind == "policy" and e.step == view.step
              and isinstance(e.detail.get("request"), Mapping)]
    if logged:
        shape = Shape.from_record(logged[-1].detail["request"])
        if model is not None:
            shape = Shape(**{**shape.__dict__, "model": model})
        return body_for(view, shape)
    if model is None:
        raise LookupError(f"step {view.step} records no model request")
    return request_body(view, model)
