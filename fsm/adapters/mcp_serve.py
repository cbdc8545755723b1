"""A workflow's runs served over MCP (``fsm mcp serve WORKFLOW``): any MCP host drives them.

The host is the run's policy: each ``tools/call`` is one action of one step, through
the same gate, claims, approvals and log as a run the CLI drives (it is the same run: the
CLI, the inbox and ``fsm audit`` see it). The tools a host lists are those of the run's
current state, plus:

- ``start`` (``goal``): a new run of the workflow, which this connection then drives;
- ``continue`` (``run_id``): drive an existing run (one that waited for a person);
- ``advance`` (``event`` and its payload): fire an event the state offers the model;
- ``reply`` (``text``), while the run waits for its customer: the customer's answer.

``notifications/tools/list_changed`` goes out whenever a call moves the run to another
state or status. A call the state does not allow is an error result naming the rule, as
the model would read it; nothing runs. A write that needs the customer's yes is asked
through MCP elicitation when the client supports it (the text fsm renders from the exact
call); otherwise the result says what to confirm, and ``reply`` carries the answer. A
call that needs a person's approval returns what waits and the run id; once a person
decides (``fsm approve``, the inbox), ``continue`` goes on from there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fsm.definition.spec import WorkflowSpec
from fsm.definition.tools import ADVANCE
from fsm.errors import FSMError
from fsm.policy import Action, PolicyUnavailable, View
from fsm.records import RunState
from fsm.runtime.conversation.judging import summary, waiting_request
from fsm.runtime.engine import Engine
from fsm.store.base import Store

#: The tools of the run's lifecycle, beside the state's own.
START, CONTINUE, REPLY = "start", "continue", "reply"
STOPPED = ("done", "failed", "budget_exhausted", "handed_over")
#: Statuses in which the host's call is the run's next action.
DRIVEN = ("running", "model_unavailable")


#: How a run's log names the policy of a run an MCP host drives (``fsm approve`` loads it).
POLICY = "fsm.adapters.mcp_serve:HostPolicy"


class HostPolicy:
    """The policy of a run an MCP host drives: the action the host's call carries. Asked
    when the host asked nothing (a person's decision driving the run on), it answers that
    the run waits for its host: the run stops as ``model_unavailable``, and the host's
    next call continues it."""

    def __init__(self) -> None:
        self.pending: Action | None = None

    def __call__(self, view: View) -> Action:
        action, self.pending = self.pending, None
        if action is None:
            raise PolicyUnavailable("the run waits for its MCP host's next call")
        return action


@dataclass(frozen=True)
class Answer:
    """What a call returns to the host: text, whether it is an error, and whether the
    tools changed; ``confirm`` is what the customer is asked to confirm, if anything."""

    text: str
    error: bool = False
    changed: bool = False
    confirm: str | None = None


class Served:
    """One connection's view of a workflow's runs: the run it drives and its tools."""

    def __init__(self, spec: WorkflowSpec, store: Store, *, ref: str, user: str = "mcp") -> None:
        self.spec, self.store, self.user, self.ref = spec, store, user, ref
        self.policy = HostPolicy()
        self.engine = Engine(spec, store, self.policy)
        self.run_id: str | None = None

    def close(self) -> None:
        self.engine.close()

    def run(self) -> RunState | None:
        return self.store.load_run(self.run_id) if self.run_id is not None else None

    # -- what the host sees -------------------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        """The tools to list now: ``{"name", "description", "inputSchema"}`` each."""
        run = self.run()
        out = [_start_tool(), _continue_tool()]
        if run is None or run.status in STOPPED:
            return out
        if run.status == "awaiting_customer":
            return [*out, _reply_tool()]
        if run.status not in DRIVEN:
            return out
        spec = self.engine.definition_of(run)
        for name in spec.allowed_tools(run.state):
            schema = spec.tools[name].schema()
            out.append({"name": name, "description": schema["description"],
                        "inputSchema": schema["parameters"]})
        events = spec.model_events(run.state)
        if events:
            out.append(_advance_tool(events))
        return out

    # -- calls --------------------------------------------------------------------------

    def call(self, name: str, args: dict[str, Any]) -> Answer:
        before = self._shape()
        try:
            answer = self._dispatch(name, args)
        except FSMError as exc:
            answer = Answer(str(exc), error=True)
        changed = self._shape() != before
        return Answer(answer.text, answer.error, changed, answer.confirm)

    def _shape(self) -> tuple[str | None, str | None, str | None]:
        run = self.run()
        return (self.run_id, run.state if run else None, run.status if run else None)

    def _dispatch(self, name: str, args: dict[str, Any]) -> Answer:
        if name == START:
            return self._start(str(args.get("goal") or ""), args.get("run_id"),
                               str(args.get("user") or self.user))
        if name == CONTINUE:
            self.run_id = str(args.get("run_id") or self.run_id or "")
            return self._told(self.run(), "")
        if self.run_id is None:
            return Answer("no run yet: call start with the goal first", error=True)
        if name == REPLY:
            run = self.engine.reply(self.run_id, str(args.get("text") or ""), drive=False)
            return self._told(run, "")
        return self._act(Action(tool=name, args=args))

    def _start(self, goal: str, run_id: Any, user: str) -> Answer:
        rid = str(run_id) if run_id else None
        meta = {"workflow_ref": self.ref, "policy": POLICY}
        if self.spec.converses:
            run = self.engine.start_conversation(goal, user=user, run_id=rid, drive=False,
                                                 meta=meta).run
        else:
            run = self.engine.start(goal, user=user, run_id=rid, drive=False, meta=meta)
        self.run_id = run.run_id
        return self._told(run, f"run {run.run_id} started")

    def _act(self, action: Action) -> Answer:
        assert self.run_id is not None
        run = self.run()
        if run is None or run.status not in DRIVEN:
            return self._told(run, "nothing runs now")
        seen = len(self.store.messages(self.run_id))
        self.policy.pending = action
        self.engine.step(self.run_id)
        self.policy.pending = None
        said = [m for m in self.store.messages(self.run_id, seen) if m.get("role") == "tool"]
        last = said[-1] if said else {}
        run = self.run()
        if "error" in last:
            return Answer(str(last["error"]), error=True)
        text = _text(last.get("result")) if last else ""
        return self._told(run, text)

    def _told(self, run: RunState | None, text: str) -> Answer:
        """``text``, with what the run waits for now, if anything."""
        if run is None:
            return Answer(text or "no such run", error=not text)
        where = f"run {run.run_id}: state {run.state}, status {run.status}"
        if run.status == "awaiting_approval":
            what = self._approval(run)
            return Answer(f"{text}\n{where}: waits for a person's approval of {what}; once "
                          f"decided (fsm approve {run.run_id}, or the inbox), call continue "
                          f"with run_id {run.run_id}".strip())
        pending = waiting_request(run)
        if pending is not None and pending.args:
            asked = summary(self.engine.definition_of(run), pending, run.facts)
            return Answer(f"{text}\n{where}: the customer must confirm: {asked}; call reply "
                          f"with their answer".strip(), confirm=asked)
        if run.status in STOPPED and run.reason:
            where += f" ({run.reason})"
        return Answer(f"{text}\n{where}".strip())

    def _approval(self, run: RunState) -> str:
        pending = run.pending
        tool = getattr(pending, "tool", None)
        args = getattr(pending, "args", {}) or {}
        spec = self.engine.definition_of(run)
        return spec.presentation.describe(tool, args, run.facts) if tool else \
            f"the event of state {run.state}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)


def _start_tool() -> dict[str, Any]:
    return {"name": START, "description": "Start a new run of the workflow with this goal "
            "(the customer's first message); this connection then drives it.",
            "inputSchema": {"type": "object", "properties": {
                "goal": {"type": "string", "description": "what the run is for"},
                "run_id": {"type": "string", "description": "an id for it (optional)"},
                "user": {"type": "string", "description": "whom the run serves (optional)"}},
                "required": ["goal"]}}


def _continue_tool() -> dict[str, Any]:
    return {"name": CONTINUE, "description": "Drive an existing run from where it is (e.g. "
            "after a person approved what it waited for).",
            "inputSchema": {"type": "object", "properties": {
                "run_id": {"type": "string", "description": "the run's id"}},
                "required": ["run_id"]}}


def _reply_tool() -> dict[str, Any]:
    return {"name": REPLY, "description": "The customer's answer to what the run asked them.",
            "inputSchema": {"type": "object", "properties": {
                "text": {"type": "string", "description": "the customer's words"}},
                "required": ["text"]}}


def _advance_tool(events: list[str]) -> dict[str, Any]:
    return {"name": ADVANCE, "description": "Fire a workflow event (with its payload's "
            "fields, if it has any).",
            "inputSchema": {"type": "object", "properties": {
                "event": {"type": "string", "enum": events}}, "required": ["event"],
                "additionalProperties": True}}


# -- the MCP server ---------------------------------------------------------------------------

#: What a client that supports elicitation is asked to fill in for the customer's yes.
CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {
    "type": "boolean", "title": "Confirm",
    "description": "yes: run exactly this; no: do not"}}, "required": ["confirm"]}


def server(spec: WorkflowSpec, store: Store, *, ref: str, user: str = "mcp") -> Any:
    """The MCP server (the SDK's low-level ``Server``) of ``spec``'s runs in ``store``.
    One :class:`Served` answers every call: the server drives one run at a time, the one
    last started or continued (a host drives several by calling ``continue``)."""
    import mcp_types as types
    from mcp.server import Server

    one = Served(spec, store, ref=ref, user=user)

    def served(ctx: Any) -> Served:
        return one

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name=t["name"], description=t["description"],
                       input_schema=t["inputSchema"]) for t in served(ctx).tools()])

    async def call_tool(ctx: Any, params: Any) -> Any:
        here = served(ctx)
        answer = here.call(params.name, dict(params.arguments or {}))
        if answer.confirm is not None and _elicits(ctx):
            answer = await _ask_customer(ctx, here, answer)
        if answer.changed:
            await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[types.TextContent(type="text", text=answer.text)],
                                    is_error=answer.error)

    return Server(f"fsm-{spec.name}", on_list_tools=list_tools, on_call_tool=call_tool)


def _elicits(ctx: Any) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and getattr(caps, "elicitation", None) is not None


async def _ask_customer(ctx: Any, here: Served, answer: Answer) -> Answer:
    """Ask the customer, through the client, to confirm what the run waits on; their
    answer is the run's reply."""
    result = await ctx.session.elicit_form(
        f"Please confirm: {answer.confirm}", CONFIRM_SCHEMA,
        related_request_id=ctx.request_id)
    yes = result.action == "accept" and bool((result.content or {}).get("confirm"))
    replied = here.call(REPLY, {"text": "yes" if yes else "no"})
    said = "the customer confirmed" if yes else "the customer did not confirm"
    return Answer(f"{said}: {answer.confirm}\n{replied.text}", replied.error,
                  True, None)


async def serve_stdio(spec: WorkflowSpec, store: Store, *, ref: str) -> None:
    """Serve over this process's stdin and stdout until the client goes."""
    from mcp.server.stdio import stdio_server

    app = server(spec, store, ref=ref)
    async with stdio_server() as (read, write):
        await app.run(read, write, app.create_initialization_options())


def serve_http(spec: WorkflowSpec, store: Store, *, ref: str, port: int) -> None:
    """Serve streamable HTTP on 127.0.0.1:``port`` (``/mcp``) until stopped."""
    import uvicorn

    app = server(spec, store, ref=ref)
    uvicorn.run(app.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")
