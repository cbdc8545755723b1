"""The inbox's routes: parse, check the session and the CSRF token, call the library, render.

No business rule lives here or in a template: rights and decisions are in
:mod:`fsm.web.decisions`, what a page shows in :mod:`fsm.web.pages`.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fsm.errors import InboxRefused, RunNotFound
from fsm.records import STATUSES
from fsm.store.base import Store
from fsm.store.people import Account, Refusal
from fsm.web import desk_routes, pages
from fsm.web.accounts import authenticate, sign_out
from fsm.web.auth import HEADERS, LOGIN_COOKIE, SESSION_COOKIE, Session, Sessions, Throttle, same
from fsm.web.conversation import ChatRoutes
from fsm.web.decisions import Workflows, decide, iso, understood
from fsm.web.forms import NOTE_MAX, check_address, clip, read_form
from fsm.web.story import ticks

HERE = Path(__file__).parent


@dataclass
class Inbox:
    """Everything the routes share."""

    store: Store
    sessions: Sessions
    clock: Callable[[], float] = time.time
    throttle: Throttle = field(default_factory=Throttle)
    workflows: Workflows = field(default_factory=Workflows)
    diagrams: pages.Diagrams = field(default_factory=pages.Diagrams)
    #: Extra lines for the inbox (e.g. where notifications go).
    notes: list[str] = field(default_factory=list)


def _stamp(account: Account) -> str:
    """Changes when the account changes (its password, or a sign-out), so older sessions
    stop working."""
    key = f"{account.password_hash}|{account.updated_at!r}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def url_part(value: object) -> str:
    """``value`` as one segment of a link: every character that means something in a URL
    (``/ ? # %``) is escaped, so the link opens exactly this id."""
    return quote(str(value), safe="")


class SecurityHeaders:
    """Add the security headers to every response, and ``Server-Timing: app;dur=MS``: the
    time from the request's arrival to its response headers (the page is rendered by then)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        started = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                took = (time.perf_counter() - started) * 1000
                headers.append((b"server-timing", f"app;dur={took:.2f}".encode()))
                present = {k.lower() for k, _ in headers}
                for k, v in HEADERS.items():
                    if k.lower().encode() not in present:
                        headers.append((k.lower().encode(), v.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(["html"]))
    env.filters["iso"] = iso
    env.filters["u"] = url_part
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, sort_keys=True)
    env.filters["cost"] = lambda micros: f"{micros / 1e6:.6f}".rstrip("0").rstrip(".")
    env.filters["ticks"] = ticks
    return env


Handler = Callable[[Request], Awaitable[Response]]


def remote(request: Request) -> str:
    return request.client.host if request.client else ""


def _query(**q: Any) -> str:
    return urlencode({k: v for k, v in q.items() if v})


class Routes:
    """The handlers: each parses, checks the session (and on POST the CSRF token), calls
    the library, renders."""

    #: Builds a page's query string from its filters (templates use it for links).
    query = staticmethod(_query)

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self.env = _env()

    def render(self, request: Request, name: str, status: int = 200,
               **ctx: Any) -> HTMLResponse:
        ctx.setdefault("me", getattr(request.state, "account", None))
        ctx.setdefault("csrf", getattr(request.state, "csrf", ""))
        ctx.setdefault("note_max", NOTE_MAX)
        ctx.setdefault("counts", getattr(request.state, "counts", None))
        return HTMLResponse(self.env.get_template(name).render(request=request, **ctx),
                            status_code=status)

    def signed_in(self, request: Request) -> tuple[Account, Session] | None:
        session = self.inbox.sessions.read(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None
        name, _, stamp = session.name.partition("|")
        account = self.inbox.store.account(name)
        if account is None or account.disabled or stamp != _stamp(account):
            return None
        request.state.account = account
        request.state.csrf = session.csrf
        return account, session

    def page(self, handler: Callable[[Request, Account], Awaitable[Response]]) -> Handler:
        """A GET page for signed-in accounts; others go to the sign-in form."""
        async def wrapped(request: Request) -> Response:
            check_address(request)
            who = await run_in_threadpool(self.signed_in, request)
            if who is None:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/login?next={quote(target)}", status_code=303)
            request.state.counts = await run_in_threadpool(self.counts)
            return await handler(request, who[0])
        return wrapped

    def counts(self) -> dict[str, int]:
        """What waits in each queue, for the header of every page."""
        store = self.inbox.store
        return {"inbox": store.count_waiting(), "handovers": store.count_handovers()}

    # -- signing in and out ---------------------------------------------------------------

    def login_form(self, request: Request, status: int = 200, error: str = "",
                   nxt: str | None = None) -> Response:
        cookie, token = self.inbox.sessions.login_token()
        nxt = nxt or request.query_params.get("next", "/inbox")
        resp = self.render(request, "login.html", status, login_token=token, next=nxt,
                           error=error)
        resp.set_cookie(LOGIN_COOKIE, cookie, **self.inbox.sessions.cookie_options(1800))
        return resp

    async def login_get(self, request: Request) -> Response:
        check_address(request)
        return self.login_form(request)

    async def login_post(self, request: Request) -> Response:
        form = await read_form(request, "name", "password", "next", "csrf")
        name, password = form["name"].strip(), form["password"]
        nxt = form["next"] or "/inbox"
        if not nxt.startswith("/") or nxt.startswith(("//", "/\\")):
            nxt = "/inbox"
        if not self.inbox.sessions.login_token_ok(request.cookies.get(LOGIN_COOKIE),
                                                  form["csrf"]):
            return self.login_form(request, 403, "the sign-in form expired; please sign in "
                                   "again", nxt)
        # Counted before the (slow) password check, so attempts sent at once count too.
        wait = self.inbox.throttle.attempt(name, remote(request))
        if wait > 0:
            return self.login_form(request, 429, f"too many failed sign-ins: try again in "
                                   f"{int(wait) + 1} seconds", nxt)
        account = await run_in_threadpool(authenticate, self.inbox.store, name, password)
        if account is None:
            return self.login_form(request, 401, "wrong name or password, or the account is "
                                   "disabled", nxt)
        self.inbox.throttle.succeeded(name, remote(request))
        cookie, _ = self.inbox.sessions.issue(f"{account.name}|{_stamp(account)}")
        resp = RedirectResponse(nxt, status_code=303)
        resp.set_cookie(SESSION_COOKIE, cookie,
                        **self.inbox.sessions.cookie_options(self.inbox.sessions.max_age))
        resp.delete_cookie(LOGIN_COOKIE, path="/")
        return resp

    async def logout(self, request: Request) -> Response:
        form = await read_form(request, "csrf")
        who = await run_in_threadpool(self.signed_in, request)
        if who is not None and not same(form["csrf"], who[1].csrf):
            return PlainTextResponse("bad CSRF token", status_code=403)
        if who is not None:   # every session of the account ends, not only this cookie
            await run_in_threadpool(sign_out, self.inbox.store, who[0].name)
        resp = RedirectResponse("/login", status_code=303)
        options = self.inbox.sessions.cookie_options(0)
        resp.delete_cookie(SESSION_COOKIE, path="/", secure=options["secure"],
                           httponly=True, samesite="strict")
        return resp

    # -- pages ----------------------------------------------------------------------------

    async def home(self, request: Request, me: Account) -> Response:
        return RedirectResponse("/inbox", status_code=303)

    async def inbox_page(self, request: Request, me: Account) -> Response:
        workflow = request.query_params.get("workflow") or None
        number = pages.page_number(request.query_params.get("page"))
        skipped: list[str] = []
        rows, pager = await run_in_threadpool(pages.inbox, self.inbox.store,
                                              self.inbox.workflows, self.inbox.clock(),
                                              workflow, number, skipped)
        names = await run_in_threadpool(self.inbox.store.workflow_names)
        return self.render(request, "inbox.html", rows=rows, pager=pager,
                           workflow=workflow or "", workflows=names, notes=self.inbox.notes,
                           query=_query, skipped=skipped)

    async def approval_get(self, request: Request, me: Account) -> Response:
        aid = request.path_params["approval_id"]
        approval = await run_in_threadpool(self.inbox.store.approval, aid)
        if approval is None:
            return self.render(request, "message.html", 404, title="Not found",
                               message=f"no approval {clip(repr(aid))}")
        data = await run_in_threadpool(pages.approval_page, self.inbox.store,
                                       self.inbox.workflows, self.inbox.diagrams, approval,
                                       self.inbox.clock(),
                                       me.limit if me.role == "approver" else None)
        return self.render(request, "approval.html", p=data,
                           can_decide=me.role == "approver" and data.decidable)

    def refuse(self, request: Request, run_id: str, aid: str, action: str, code: str,
               message: str, status: int, account: str | None) -> Response:
        """Record a refused attempt where an auditor sees it (attempts on an approval that
        does not exist belong to no run and are not kept), and tell the person."""
        if run_id:
            self.inbox.store.add_refusal(Refusal(
                run_id=run_id, approval_id=aid, account=account, action=action or "?",
                code=code, reason=message, at=self.inbox.clock(), remote=remote(request)))
        return self.render(request, "message.html", status, title="Not decided",
                           code=code if run_id else "", message=message,
                           back=f"/approvals/{url_part(aid)}" if run_id else "")

    async def approval_post(self, request: Request) -> Response:
        check_address(request)
        aid = request.path_params["approval_id"]
        form = await read_form(request, "action", "note", "csrf", "args_hash", "run_version",
                               "amount", "confirm")
        action = form["action"]
        who = await run_in_threadpool(self.signed_in, request)
        approval = await run_in_threadpool(self.inbox.store.approval, aid)
        where = (request, approval.run_id if approval is not None else "", aid, action)
        if who is None:
            return await run_in_threadpool(
                self.refuse, *where, "session", "you are not signed in (or your session "
                "expired): sign in and decide again; nothing was decided", 401, None)
        me, session = who
        if not same(form["csrf"], session.csrf):
            return await run_in_threadpool(
                self.refuse, *where, "csrf", "the form's security token is missing or wrong "
                "(a form from another site, or an old tab): reload the page; nothing was "
                "decided", 403, me.name)
        try:
            if action == "approve" and form["amount"].strip():
                seen = await run_in_threadpool(understood, self.inbox.store,
                                               self.inbox.workflows, me, aid, form["amount"],
                                               form["note"])
                if seen is not None and form["confirm"] != str(seen.minor):
                    # The amount as read is shown before anything is recorded.
                    return self.render(request, "confirm.html", aid=aid, form=form, seen=seen)
            await run_in_threadpool(
                decide, self.inbox.store, self.inbox.workflows, me, aid, action,
                form["note"], form["args_hash"], form["run_version"], clock=self.inbox.clock,
                amount=form["amount"])
        except InboxRefused as exc:
            return await run_in_threadpool(self.refuse, *where, exc.code, str(exc), exc.status,
                                           me.name)
        return RedirectResponse(f"/approvals/{url_part(aid)}?decided=1", status_code=303)

    def _runs(self, status: str | None, workflow: str | None,
              number: int) -> tuple[list[Any], pages.Pager, list[str]]:
        store = self.inbox.store
        pager = pages.Pager(number, store.count_runs(status, workflow))
        runs = store.runs_page(status, workflow, limit=pager.size, offset=pager.offset)
        return runs, pager, store.workflow_names()

    async def runs_page(self, request: Request, me: Account) -> Response:
        status = request.query_params.get("status") or None
        workflow = request.query_params.get("workflow") or None
        number = pages.page_number(request.query_params.get("page"))
        runs, pager, names = await run_in_threadpool(self._runs, status, workflow, number)
        return self.render(request, "runs.html", runs=runs, pager=pager,
                           now=self.inbox.clock(), status_filter=status or "",
                           workflow=workflow or "", workflows=names, age=pages.age,
                           statuses=STATUSES, query=_query)

    async def run_get(self, request: Request, me: Account) -> Response:
        run_id = request.path_params["run_id"]
        try:
            data = await run_in_threadpool(pages.run_page, self.inbox.store,
                                           self.inbox.workflows, self.inbox.diagrams, run_id)
        except RunNotFound:
            return self.render(request, "message.html", 404, title="Not found",
                               message=f"no run {clip(repr(run_id))}")
        return self.render(request, "run.html", p=data)

    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def bad_input(self, request: Request, exc: Exception) -> Response:
        """A request whose text cannot be used (a NUL, a file, too long): a 400 page."""
        assert isinstance(exc, InboxRefused)
        return self.render(request, "message.html", exc.status, title="Bad request",
                           message=str(exc))

    async def server_error(self, request: Request, exc: Exception) -> Response:
        """An error nothing above foresaw: a page that says so (the server's log has the
        error). Such a response is made outside the other middleware, so it carries the
        security headers itself."""
        body = ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
                "<title>Server error</title><link rel='stylesheet' href='/static/style.css'>"
                "</head><body><main><h1>Server error</h1><p class='error' role='alert'>The "
                "server could not answer this request. Reload the page to see what it "
                "holds now; the server's log says what went wrong.</p><p><a href='/inbox'>"
                "Back to the inbox</a></p></main></body></html>")
        # The server ends the connection after an error: the client is told not to reuse it.
        return HTMLResponse(body, status_code=500, headers={**HEADERS, "Connection": "close"})

    async def gone(self, request: Request, exc: Exception) -> Response:
        """The client went away before its request was read: nothing was done, and there
        is nobody to answer."""
        return PlainTextResponse("the request was not read to its end", status_code=400)


def create_app(inbox: Inbox) -> Starlette:
    """The inbox as an ASGI app."""
    r = Routes(inbox)
    chat = ChatRoutes(inbox.store, inbox.workflows, inbox.clock)
    routes = [
        Route("/", r.page(r.home)), Route("/healthz", r.healthz),
        Route("/login", r.login_get, methods=["GET"]),
        Route("/login", r.login_post, methods=["POST"]),
        Route("/logout", r.logout, methods=["POST"]),
        Route("/inbox", r.page(r.inbox_page)),
        Route("/approvals/{approval_id}", r.page(r.approval_get), methods=["GET"]),
        Route("/approvals/{approval_id}/decide", r.approval_post, methods=["POST"]),
        Route("/runs", r.page(r.runs_page)),
        Route("/runs/{run_id:path}", r.page(r.run_get)),
        Route("/chat/{run_id}", chat.read, methods=["GET"]),
        Route("/chat/{run_id}/replies", chat.reply, methods=["POST"]),
        *desk_routes.routes(r),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={InboxRefused: r.bad_input,
                                                       ClientDisconnect: r.gone,
                                                       Exception: r.server_error})
    app.add_middleware(SecurityHeaders)
    return app


def new_secret() -> str:
    return secrets.token_urlsafe(32)
