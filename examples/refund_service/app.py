"""A refund desk as an asyncio web service: ``fsm.AsyncEngine`` behind Starlette.

    python examples/refund_service/app.py --db runs.db --port 8000 [--latency 0.5]

The runs are the refund conversation (``refund_chat``) with the rule-based chat clerk
standing in for a model (``--latency`` seconds per answer, awaited). A run waiting on its
model holds no thread, so the service holds many conversations at once.

    POST /runs                 {"message": "...", "customer": "asha"}
        201 {"run_id", "token", "status", "state", "asks"}: the run, driven until it
        waits for its customer or stops; ``token`` is the customer's reply token (shown
        once).
    POST /runs/{run_id}/replies  {"text": "..."}, Authorization: Bearer TOKEN
        200 the run after it read the reply and went on.
    GET  /runs/{run_id}/events   text/event-stream: each event of the run's log as it is
        committed (``id`` is its sequence number; ``Last-Event-ID`` resumes after it),
        until the run stops; ``?follow=0`` ends once the log is read.
    GET  /runs/{run_id}          the run.

Bad input gets ``{"error": "..."}`` in one line, with 400 (bad JSON or fields), 403 (a
wrong token), 404 (no such run) or 409 (a reply the run does not take).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from fsm import AsyncEngine, ReplyRefused, RunNotFound, SQLiteStore, View
from fsm.records import FINAL_STATUSES, RunState
from workflows.refund.conversation import build_conversation, chat_clerk
from workflows.refund.shop import Shop

#: Seconds between reads of a run's log while its events are streamed.
POLL_SECONDS = 0.1
#: Characters of a customer's message or reply, at most (fsm refuses longer replies too).
MESSAGE_MAX = 4000


def make_app(db: str, *, latency: float = 0.0) -> Starlette:
    """The service over the SQLite database ``db`` (its runs and its shop)."""

    async def model(view: View) -> Any:
        await asyncio.sleep(latency)  # a model client's await
        return chat_clerk(view)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        store, shop = SQLiteStore(db), Shop(db).seed_demo()
        async with AsyncEngine(build_conversation(shop), store, model) as engine:
            app.state.engine = engine
            yield
        store.close()

    return Starlette(routes=[
        Route("/runs", start, methods=["POST"]),
        Route("/runs/{run_id}", show, methods=["GET"]),
        Route("/runs/{run_id}/replies", reply, methods=["POST"]),
        Route("/runs/{run_id}/events", events, methods=["GET"]),
        Route("/healthz", lambda _: Response("ok"), methods=["GET"]),
    ], lifespan=lifespan)


def _error(status: int, line: str) -> JSONResponse:
    return JSONResponse({"error": line}, status_code=status)


async def _fields(request: Request, *names: str) -> dict[str, str] | JSONResponse:
    """The JSON object's text fields ``names`` (the first required), or the error."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return _error(400, "the body must be a JSON object, such as "
                           '{"' + names[0] + '": "..."}')
    if not isinstance(body, dict):
        return _error(400, f"the body must be a JSON object, not {type(body).__name__}")
    unknown = sorted(set(body) - set(names))
    if unknown:
        return _error(400, f"unknown field {unknown[0]!r}; allowed: {', '.join(names)}")
    for name in names:
        value = body.get(name, "")
        if not isinstance(value, str) or len(value) > MESSAGE_MAX:
            return _error(400, f"{name!r} must be text of at most {MESSAGE_MAX} characters")
    if not str(body.get(names[0], "")).strip():
        return _error(400, f"{names[0]!r} is required (non-empty text)")
    return {name: str(body.get(name, "")) for name in names}


def _shown(run: RunState) -> dict[str, Any]:
    asks = run.pending.message if run.pending is not None and \
        run.status == "awaiting_customer" else None
    return {"run_id": run.run_id, "status": run.status, "state": run.state, "asks": asks,
            "answer": run.answer, "reason": run.reason}


async def start(request: Request) -> Response:
    fields = await _fields(request, "message", "customer")
    if isinstance(fields, Response):
        return fields
    engine: AsyncEngine = request.app.state.engine
    talk = await engine.start_conversation(fields["message"], user=fields["customer"])
    return JSONResponse({**_shown(talk.run), "token": talk.token}, status_code=201)


async def show(request: Request) -> Response:
    engine: AsyncEngine = request.app.state.engine
    try:
        return JSONResponse(_shown(await engine.load(request.path_params["run_id"])))
    except RunNotFound as exc:
        return _error(404, str(exc))


async def reply(request: Request) -> Response:
    fields = await _fields(request, "text")
    if isinstance(fields, Response):
        return fields
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return _error(403, "send the run's reply token: Authorization: Bearer TOKEN")
    engine: AsyncEngine = request.app.state.engine
    try:
        run = await engine.reply(request.path_params["run_id"], fields["text"], token=token)
    except ReplyRefused as exc:
        status = {"unknown_run": 404, "token": 403, "no_token": 403, "empty": 400,
                  "too_long": 400, "nul": 400, "not_text": 400}.get(exc.code, 409)
        return _error(status, str(exc))
    return JSONResponse(_shown(run))


async def events(request: Request) -> Response:
    engine: AsyncEngine = request.app.state.engine
    run_id = request.path_params["run_id"]
    try:
        await engine.load(run_id)
    except RunNotFound as exc:
        return _error(404, str(exc))
    after = request.headers.get("last-event-id", "")
    if after and not after.isdigit():
        return _error(400, f"Last-Event-ID must be an event's sequence number, not {after!r}")
    follow = request.query_params.get("follow", "1")
    if follow not in ("0", "1"):
        return _error(400, f"follow must be 0 or 1, not {follow!r}")
    return StreamingResponse(_stream(engine, run_id, int(after) if after else -1,
                                     follow == "1"),
                             media_type="text/event-stream",
                             headers={"cache-control": "no-store"})


async def _stream(engine: AsyncEngine, run_id: str, after: int, follow: bool
                  ) -> AsyncIterator[str]:
    """The run's events after sequence number ``after``, as server-sent events."""
    while True:
        run = await engine.load(run_id)  # read before the log: a stop is in what follows
        for event in await engine.events(run_id):
            if event.seq > after:
                after = event.seq
                yield f"id: {event.seq}\nevent: {event.kind}\ndata: " \
                      f"{event.model_dump_json()}\n\n"
        if not follow or run.status in FINAL_STATUSES:
            return
        await asyncio.sleep(POLL_SECONDS)


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="SQLite file of the runs and the shop")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency", type=float, default=0.0,
                        help="seconds the stand-in model takes per answer")
    args = parser.parse_args(argv)
    if args.latency < 0:
        parser.error(f"--latency must be 0 or more seconds, not {args.latency}")
    uvicorn.run(make_app(args.db, latency=args.latency), host="127.0.0.1", port=args.port,
                log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
