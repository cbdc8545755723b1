"""The handover queue's routes: ``/handovers``, one handover, taking and closing it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from fsm.errors import InboxRefused
from fsm.store.desk import Queue
from fsm.store.people import Account
from fsm.web import desk, pages
from fsm.web.auth import same
from fsm.web.forms import check_address, clip, read_form


class Routes(Protocol):
    """What these routes use of the inbox's :class:`fsm.web.app.Routes`."""

    inbox: Any

    def render(self, request: Request, name: str, status: int = 200,
               **ctx: Any) -> HTMLResponse: ...

    def signed_in(self, request: Request) -> Any: ...

    def page(self, handler: Callable[[Request, Account], Awaitable[Response]]
             ) -> Callable[[Request], Awaitable[Response]]: ...

    def query(self, **q: Any) -> str: ...


def _queue(request: Request, me: Account) -> Queue:
    q = request.query_params
    taken = q.get("taken", "")
    cause = q.get("cause") or None
    return Queue(open_only=q.get("closed") != "1", workflow=q.get("workflow") or None,
                 cause=cause if cause in desk.CAUSE_WORDS else None,
                 taken_by={"nobody": "", "me": me.name}.get(taken))


class DeskRoutes:
    def __init__(self, routes: Routes) -> None:
        self.r = routes
        self.inbox = routes.inbox

    async def queue(self, request: Request, me: Account) -> Response:
        q = _queue(request, me)
        number = pages.page_number(request.query_params.get("page"))
        rows, pager = await run_in_threadpool(desk.queue, self.inbox.store, self.inbox.clock(),
                                              q, number)
        names = await run_in_threadpool(self.inbox.store.workflow_names)
        params = request.query_params
        filters = {k: params.get(k, "") for k in ("workflow", "cause", "taken", "closed")}
        return self.r.render(request, "handovers.html", rows=rows, pager=pager,
                             workflows=names, causes=desk.CAUSE_WORDS, filters=filters,
                             query=self.r.query)

    async def one(self, request: Request, me: Account) -> Response:
        hid = request.path_params["handover_id"]
        data = await run_in_threadpool(desk.handover_page, self.inbox.store,
                                       self.inbox.workflows, self.inbox.diagrams, hid,
                                       self.inbox.clock())
        if data is None:
            return self.r.render(request, "message.html", 404, title="Not found",
                                 message=f"no handover {clip(repr(hid))}")
        return self.r.render(request, "handover.html", p=data, outcomes=desk.OUTCOME_WORDS,
                             causes=desk.CAUSE_WORDS)

    async def act(self, request: Request) -> Response:
        check_address(request)
        hid = request.path_params["handover_id"]
        form = await read_form(request, "action", "outcome", "note", "event", "csrf")
        who = await run_in_threadpool(self.r.signed_in, request)
        back = f"/handovers/{hid}"
        if who is None:
            return self._refused(request, 401, "you are not signed in (or your session "
                                 "expired): sign in and try again; nothing was changed", back)
        me, session = who
        if not same(form["csrf"], session.csrf):
            return self._refused(request, 403, "the form's security token is missing or "
                                 "wrong (a form from another site, or an old tab): reload the "
                                 "page; nothing was changed", back)
        try:
            await run_in_threadpool(desk.act, self.inbox.store, self.inbox.workflows, me, hid,
                                    form["action"], form["outcome"], form["note"],
                                    form["event"], clock=self.inbox.clock)
        except InboxRefused as exc:
            return self._refused(request, exc.status, str(exc), back, exc.code)
        return RedirectResponse(f"{back}?done={form['action']}", status_code=303)

    def _refused(self, request: Request, status: int, message: str, back: str,
                 code: str = "") -> Response:
        return self.r.render(request, "message.html", status, title="Not changed",
                             message=message, back=back, back_text="Back to the handover")


def routes(r: Routes) -> list[Route]:
    d = DeskRoutes(r)
    return [
        Route("/handovers", r.page(d.queue)),
        Route("/handovers/{handover_id}", r.page(d.one), methods=["GET"]),
        Route("/handovers/{handover_id}/act", d.act, methods=["POST"]),
    ]
