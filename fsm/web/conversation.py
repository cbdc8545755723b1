"""The chat endpoint of ``fsm serve``: a customer's front end reads the conversation of a
run and sends replies to it, authenticated per run by the run's reply token.

``GET /chat/{run_id}`` is the conversation as the customer sees it; ``POST
/chat/{run_id}/replies`` with ``{"text": ..., "asked": ...}`` (JSON) gives the run a
reply, through the same :meth:`~fsm.runtime.engine.Engine.reply` path as ``fsm reply``.
Both need ``Authorization: Bearer TOKEN``, the token given out when the run started
(only its hash is kept; compared in constant time): knowing a run's id is not enough.
A refused request is a 4xx whose JSON names the problem (``{"error": code, "message":
...}``) and changes nothing; refused replies are kept where auditors read them.

A request without the run's token proves nothing about who sent it, so its refusals are
rate-limited and counted rather than kept one row each: a few per run and per address in
any five minutes are kept (the next one kept says how many were refused unkept before it);
past that, the request is refused with 429 and only counted.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from fsm.definition.spec import WorkflowSpec
from fsm.errors import FSMError, InboxRefused, ReplyRefused, RunNotFound
from fsm.records import Event, RunState, utc
from fsm.records.conversation import REPLY_MAX, AwaitingCustomer, token_matches
from fsm.records.transcript import CustomerReply, read_all
from fsm.runtime.conversation.judging import asked_hash, summary
from fsm.runtime.engine import Engine
from fsm.store.base import Store
from fsm.store.people import Refusal
from fsm.store.roles import Conversations, RunReads
from fsm.web.auth import Throttle
from fsm.web.decisions import Workflows

#: The largest request body read (bytes): room for a reply of REPLY_MAX characters, each
#: escaped in JSON, and the rest of the object.
BODY_MAX = REPLY_MAX * 12 + 1024

#: The HTTP status of each refusal of a reply.
STATUS = {"empty": 400, "nul": 400, "not_text": 400, "body": 400, "too_long": 413,
          "media": 415, "no_token": 401, "token": 403, "unknown_run": 404, "finished": 409,
          "not_waiting": 409, "stale": 409, "definition": 409, "busy": 503,
          "throttled": 429}
#: Refusals of requests that did not prove they are the customer's.
UNAUTHENTICATED = ("no_token", "token")


def ChatRefused(code: str, message: str) -> InboxRefused:  # noqa: N802 - reads as a class
    """The refusal of a chat request: its code and the status that goes with it."""
    return InboxRefused(code, message, STATUS.get(code, 400))


# -- the conversation as the customer sees it ------------------------------------------------

@dataclass(frozen=True)
class Said:
    """One message of the conversation."""

    #: ``customer`` or ``agent``.
    by: str
    text: str
    #: The reply's number (a customer's reply), else ``None``.
    reply: int | None = None
    #: What the agent asked the customer to confirm (``{"tool", "args"}``), if anything.
    confirm: dict[str, Any] | None = None


def conversation(events: list[Event], messages: list[dict[str, Any]],
                 answer: str | None = None) -> list[Said]:
    """What the agent and the customer said, in order: the customer's first message, each
    question or proposal the agent asked, each reply the run read, and the final answer."""
    typed = read_all(messages)
    replies: dict[Any, str] = {m.reply: str(m.content) for m in typed
                               if isinstance(m, CustomerReply)}
    out: list[Said] = []
    if typed and typed[0].role == "user":
        out.append(Said("customer", str(getattr(typed[0], "content", ""))))
    for e in events:
        if e.kind == "ask":
            out.append(Said("agent", str(e.detail.get("message") or ""),
                            confirm=e.detail.get("args") or None))
        elif e.kind == "reply":
            seq = e.detail.get("seq")
            out.append(Said("customer", replies.get(seq, ""), reply=seq))
    if answer:
        out.append(Said("agent", answer))
    return out


def asked(spec: WorkflowSpec | None, run: RunState) -> dict[str, Any] | None:
    """What the run waits on its customer for, as JSON (``None``: it waits for no reply)."""
    p = run.pending
    if run.status != "awaiting_customer" or not isinstance(p, AwaitingCustomer):
        return None
    return {"message": p.message, "confirm": p.args or None,
            "summary": summary(spec, p, run.facts) if spec is not None else "",
            "hash": asked_hash(p), "events": p.events,
            "expires_at": utc(p.expires_at) if p.expires_at is not None else None}


class Talked(RunReads, Conversations, Protocol):
    """What a conversation's page reads: the run, its log and transcript, its replies."""


def conversation_data(store: Talked, spec: WorkflowSpec | None, run: RunState
                      ) -> dict[str, Any]:
    """The JSON of ``GET /chat/{run_id}``."""
    events = store.events(run.run_id)
    said = conversation(events, store.messages(run.run_id), run.answer)
    unread = [r.seq for r in store.replies(run.run_id, unread_only=True)]
    return {"run_id": run.run_id, "status": run.status, "state": run.state,
            "waiting": run.status == "awaiting_customer", "asked": asked(spec, run),
            "messages": [{k: v for k, v in asdict(s).items() if v is not None} for s in said],
            "unread": unread}


# -- the routes ------------------------------------------------------------------------------

class ChatRoutes:
    """``GET /chat/{run_id}`` and ``POST /chat/{run_id}/replies``."""

    def __init__(self, store: Store, workflows: Workflows, clock: Any,
                 throttle: Throttle | None = None) -> None:
        self.store = store
        self.workflows = workflows
        self.clock = clock
        #: How many unauthenticated refusals are kept as rows, per run and per address.
        self.throttle = throttle or Throttle(attempts=3, per_address=30, window=300.0)
        #: run id → unauthenticated refusals counted and not kept since its last kept one.
        self.unkept: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    async def read(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            run = await run_in_threadpool(self._authorised, request, run_id)
            spec = await run_in_threadpool(self.workflows.spec, self.store, run)
            data = await run_in_threadpool(conversation_data, self.store, spec, run)
        except InboxRefused as exc:
            return _refused(exc.code, str(exc))
        return JSONResponse(data)

    async def reply(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            run = await run_in_threadpool(self._authorised, request, run_id)
            text, seen = await _reply_body(request)
            data = await run_in_threadpool(self._keep, request, run, text, seen)
        except InboxRefused as exc:
            if exc.code in UNAUTHENTICATED:
                wait = await run_in_threadpool(self._unauthenticated, request, run_id, exc)
                if wait > 0:
                    return _refused("throttled", "too many requests without this run's reply "
                                    "token; nothing was read or kept", retry_after=wait)
            elif exc.code != "unknown_run":
                await run_in_threadpool(self._remember, request, run_id, exc)
            return _refused(exc.code, str(exc))
        except ClientDisconnect:
            return _refused("body", "the request was not read to its end; nothing was kept")
        return JSONResponse(data, status_code=202)

    # -- in a thread ---------------------------------------------------------------------

    def _authorised(self, request: Request, run_id: str) -> RunState:
        """The run, for a request that carries its reply token; else the refusal."""
        if "\x00" in run_id:
            raise ChatRefused("body", "the run id in the address contains a NUL character")
        try:
            run = self.store.load_run(run_id)
        except RunNotFound:
            raise ChatRefused("unknown_run", f"no run {run_id[:64]!r}") from None
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ChatRefused("no_token", "this endpoint needs the run's reply token: send "
                              "Authorization: Bearer TOKEN")
        if not token_matches(token.strip(), self.store.reply_token(run_id)):
            raise ChatRefused("token", f"the reply token is not run {run_id!r}'s; nothing "
                              "was read or kept")
        request.state.token = token.strip()
        return run

    def _keep(self, request: Request, run: RunState, text: str, seen: str | None
              ) -> dict[str, Any]:
        spec = self.workflows.spec(self.store, run)
        if spec is None:
            raise ChatRefused("definition", f"{self.workflows.unloadable(run)}; nothing was "
                              "kept")
        with Engine(spec, self.store, self._policy(spec, run), clock=self.clock,
                    hooks=self.workflows.hooks) as engine:
            try:
                kept = engine.accept_reply(run.run_id, text, token=request.state.token,
                                           asked=seen)
            except ReplyRefused as exc:
                raise ChatRefused(exc.code, str(exc)) from None
            try:
                after = engine.deliver(run.run_id, drive=engine.policy is not None)
            except FSMError:
                after = self.store.load_run(run.run_id)  # kept: the next driver reads it
        data = conversation_data(self.store, spec, after)
        read = any(r.seq == kept.seq and r.read_step is not None
                   for r in self.store.replies(run.run_id))
        return {**data, "reply": kept.seq, "read": read}

    def _policy(self, spec: WorkflowSpec, run: RunState) -> Any:
        """The policy the run started with, to drive it on; ``None`` when this server
        cannot build it (the reply is then kept for a worker)."""
        try:
            return self.workflows.policy(spec, run, self.store.events(run.run_id))
        except FSMError:
            return None

    def _unauthenticated(self, request: Request, run_id: str, exc: InboxRefused) -> float:
        """A request without the run's token: kept while the throttle lets it (0 is
        returned), else only counted (the seconds until one is kept again)."""
        address = request.client.host if request.client else ""
        wait = self.throttle.attempt(run_id, address)
        with self._lock:
            if wait > 0:
                self.unkept[run_id] = self.unkept.get(run_id, 0) + 1
                self.unkept.move_to_end(run_id)
                while len(self.unkept) > self.throttle.capacity:
                    self.unkept.popitem(last=False)
                return wait
            before = self.unkept.pop(run_id, 0)
        more = f" ({before} more refused before it were counted, not kept)" if before else ""
        self._remember(request, run_id, exc, more)
        return 0.0

    def _remember(self, request: Request, run_id: str, exc: InboxRefused,
                  more: str = "") -> None:
        """Keep a refused reply where an auditor reads it (the run's refused attempts)."""
        try:
            self.store.add_refusal(Refusal(
                run_id=run_id, account="(customer)", action="reply", code=exc.code,
                reason=str(exc)[:500 - len(more)] + more, at=self.clock(),
                remote=request.client.host if request.client else ""))
        except FSMError:
            pass


async def _reply_body(request: Request) -> tuple[str, str | None]:
    """The reply's text and the request it answers (``asked``), from a JSON body."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise ChatRefused("media", "send the reply as JSON (Content-Type: application/json): "
                          '{"text": "...", "asked": "..."}; nothing was kept')
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > BODY_MAX:
            raise ChatRefused("too_long", f"the request body is over {BODY_MAX} bytes; a reply "
                              f"holds at most {REPLY_MAX} characters; nothing was kept")
    try:
        body = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ChatRefused("not_text", "the request body is not UTF-8 text; nothing was kept") \
            from None
    except ValueError as exc:
        raise ChatRefused("body", f"the request body is not JSON ({exc}); nothing was kept") \
            from None
    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
        raise ChatRefused("body", 'the body must be a JSON object with the reply as "text": '
                          '{"text": "..."}; nothing was kept')
    seen = body.get("asked")
    if seen is not None and not isinstance(seen, str):
        raise ChatRefused("body", '"asked" must be the hash of the request the customer was '
                          "shown (from GET /chat/RUN), as text; nothing was kept")
    return body["text"], seen


def _refused(code: str, message: str, retry_after: float = 0.0) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if code in UNAUTHENTICATED else {}
    if retry_after > 0:
        headers["Retry-After"] = str(math.ceil(retry_after))
    return JSONResponse({"error": code, "message": message}, status_code=STATUS.get(code, 400),
                        headers=headers or None)
