"""A real inbox for the web and browser tests: a database with refund runs and accounts,
``fsm serve`` in its own process on a free loopback port, and HTTP clients signed in."""

from __future__ import annotations

import html
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict

from fsm import (
    Action,
    Engine,
    RunState,
    SQLiteStore,
    ToolContext,
    ToolSpec,
    View,
    define_workflow,
)
from fsm.web.accounts import add_account
from workflows.refund import Shop, build
from workflows.refund.clerk import clerk

#: name → (role, release limit in paise, password)
ACCOUNTS = {
    "priya": ("approver", 1_500_000, "priya-password"),   # up to ₹15,000
    "kiran": ("approver", 100_000, "kiran-password"),     # up to ₹1,000
    "ravi": ("approver", None, "ravi-password"),          # the customer of the large refunds
    "sam": ("approver", None, "sam-password"),
    "audrey": ("auditor", None, "audrey-password"),
}
#: order id → (customer, item id, item name, price in paise, days since delivery)
ORDERS = {
    "B-2001": ("ravi", "headphones-2", "headphones", 1_200_000, 4),
    "B-2002": ("meena", "camera-1", "camera", 900_000, 6),
    "B-2003": ("tara", "phone-1", "phone", 2_500_000, 2),
}


class Client(httpx.Client):
    """An httpx client usable in ``with`` after it has already sent requests (signing in)."""

    def __enter__(self) -> Client:
        return self


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(db: str, *args: str, env: dict[str, str] | None = None,
           log: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """``fsm serve --db DB`` on a free loopback port, once it answers: the process and its
    base URL. Its standard error goes to ``log`` when given, else to a pipe."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    full = {**os.environ, "FSM_DB": db, "FSM_WEB_SECRET": "test-secret", **(env or {})}
    full.pop("FSM_CLOCK_OFFSET", None)
    err = subprocess.PIPE if log is None else log.open("ab")
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "fsm", "serve", "--db", db, "--port", str(port), *args],
            env=full, stdout=subprocess.DEVNULL, stderr=err)
    finally:
        if log is not None:
            err.close()  # type: ignore[union-attr]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            said = process.stderr.read().decode() if process.stderr else \
                log.read_text() if log else ""
            raise AssertionError(f"fsm serve exited: {said}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    stopped(process)
    raise AssertionError("fsm serve did not answer within 30 s")


def stopped(process: subprocess.Popen[bytes]) -> str:
    """Stop a served inbox; what it wrote to its standard error pipe (if it had one)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    said = ""
    if process.stderr is not None:
        said = process.stderr.read().decode()
        process.stderr.close()
    return said


@dataclass
class Inbox:
    """One database and the ``fsm serve`` process serving it."""

    db: Path
    url: str = ""
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: Where the server's standard error goes (a file to read after), else a pipe.
    log: Path | None = None

    def engine(self, clock: Callable[[], float] = time.time) -> tuple[Engine, SQLiteStore, Shop]:
        shop = Shop(str(self.db))
        store = SQLiteStore(str(self.db))
        return Engine(build(shop), store, clerk, clock=clock), store, shop

    def start_run(self, order_id: str, run_id: str, *, ago: float = 0.0) -> RunState:
        """Start a refund run the way ``fsm run`` does (``ago``: seconds in the past)."""
        customer = ORDERS[order_id][0] if order_id in ORDERS else "ravi"
        engine, store, shop = self.engine(lambda: time.time() - ago)
        try:
            return engine.start(f"Order {order_id}: it stopped working", user=customer,
                                run_id=run_id, meta={"workflow_ref": "refund",
                                                     "policy": "default"})
        finally:
            store.close()
            shop.close()

    def run(self, run_id: str) -> RunState:
        store = SQLiteStore(str(self.db))
        try:
            return store.load_run(run_id)
        finally:
            store.close()

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        con = sqlite3.connect(self.db)
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()

    def payments(self, run_id: str) -> list[tuple[Any, ...]]:
        """(order, amount) of every payment the run made (its keys are ``run_id:step``)."""
        return self.query("SELECT order_id, amount_paise FROM shop_payments "
                          "WHERE idempotency_key LIKE ? || ':%'", run_id)

    def decisions(self, run_id: str) -> list[tuple[Any, ...]]:
        """(decision, reviewer, note) of every decided approval of the run."""
        return self.query("SELECT decision, reviewer, note FROM approvals WHERE run_id = ? "
                          "AND decision IS NOT NULL", run_id)

    def refusals(self, run_id: str) -> list[tuple[Any, ...]]:
        """(account, action, code, remote) of every refused attempt on the run."""
        return self.query("SELECT account, action, code, remote FROM web_refusals "
                          "WHERE run_id = ? ORDER BY refusal_id", run_id)

    def untouched(self, run_id: str, version: int) -> None:
        """The run still waits at ``version``: nothing decided, nothing paid."""
        run = self.run(run_id)
        assert (run.status, run.version) == ("awaiting_approval", version)
        assert self.decisions(run_id) == [] and self.payments(run_id) == []

    def approval_id(self, run_id: str) -> str:
        pending = self.run(run_id).pending
        assert pending is not None and pending.approval_id is not None
        return pending.approval_id

    def serve(self, *args: str, **env: str) -> None:
        """Start ``fsm serve`` (extra command-line ``args``, extra environment ``env``)."""
        self.process, self.url = launch(str(self.db), *args, env={**self.env, **env},
                                        log=self.log)

    def stop(self) -> None:
        if self.process is not None:
            stopped(self.process)

    def client(self, name: str | None = None) -> Client:
        """An HTTP client, signed in as ``name`` when given."""
        c = Client(base_url=self.url, timeout=30)
        if name is not None:
            login(c, name, ACCOUNTS[name][2])
        return c


def login(c: httpx.Client, name: str, password: str) -> httpx.Response:
    form = c.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert token is not None
    return c.post("/login", data={"name": name, "password": password,
                                  "csrf": token.group(1), "next": "/inbox"})


def decision_form(c: httpx.Client, approval_id: str) -> dict[str, str]:
    """The hidden fields of the approval page's decision form, as a browser would send them."""
    page = c.get(f"/approvals/{approval_id}")
    assert page.status_code == 200, page.text
    fields = dict(re.findall(r'name="(csrf|args_hash|run_version)" value="([^"]*)"', page.text))
    assert set(fields) == {"csrf", "args_hash", "run_version"}, "no decision form on the page"
    return fields


def approve_amount(c: httpx.Client, approval_id: str, typed: str,
                   note: str = "partly") -> tuple[httpx.Response, httpx.Response]:
    """Approve a lower amount as a person does: type it, read the amount the inbox
    understood on its confirm page, confirm. The confirm page and the final response."""
    confirm = c.post(f"/approvals/{approval_id}/decide", data={
        **decision_form(c, approval_id), "action": "approve", "note": note, "amount": typed})
    assert confirm.status_code == 200, confirm.text
    fields = dict(re.findall(r'name="(csrf|args_hash|run_version|note|amount|confirm)" '
                             r'value="([^"]*)"', confirm.text))
    assert "confirm" in fields, "no confirm step on the page"
    done = c.post(f"/approvals/{approval_id}/decide",
                  data={**{k: html.unescape(v) for k, v in fields.items()},
                        "action": "approve"})
    return confirm, done


def understood(page: httpx.Response) -> str:
    """The amount the confirm page says it understood (``₹6,000``)."""
    found = re.search(r'class="understood-amount">([^<]*)<', page.text)
    return html.unescape(found.group(1)) if found else ""


def alert(page: httpx.Response) -> str:
    found = re.search(r'role="alert"[^>]*>([^<]*)<', page.text)
    return html.unescape(found.group(1)) if found else ""


def make_inbox(tmp_path: Path) -> Inbox:
    db = tmp_path / "inbox.db"
    shop = Shop(str(db)).seed_demo()
    for oid, (cust, item, name, price, days) in ORDERS.items():
        shop.add_order(oid, cust, item, name, price, days)
    shop.close()
    store = SQLiteStore(str(db))
    try:
        for name, (role, limit, password) in ACCOUNTS.items():
            add_account(store, name, role, password, limit)
    finally:
        store.close()
    return Inbox(db=db)


@pytest.fixture
def inbox(tmp_path: Path) -> Iterator[Inbox]:
    """A database with accounts and orders; call ``inbox.serve()`` after starting runs."""
    box = make_inbox(tmp_path)
    yield box
    box.stop()


# -- a workflow with no inbox hooks: a write call that waits for a person -------------------

class WireArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: str
    cents: int


def _send_wire(args: WireArgs, ctx: ToolContext) -> dict[str, Any]:
    with open(os.environ["WIRE_LOG"], "a") as f:
        f.write(f"{ctx.key} {args.to} {args.cents}\n")
    return {"status": "sent"}


#: ``web_server:WIRE``: one state, one write tool that always needs approval.
WIRE = define_workflow(
    "wire", transitions={"drafting": {"sent": "done"}}, tools_by_state={"drafting": ["send_wire"]},
    initial="drafting", terminal={"done"},
    tools=[ToolSpec("send_wire", _send_wire, "Send a wire transfer.", WireArgs, write=True,
                    retry_safe=True, approval=True, emits=lambda r: "sent",
                    emits_events=("sent",))],
)


def wire_policy(view: View) -> Action:
    """``web_server:wire_policy``: asks for one transfer."""
    return Action(tool="send_wire", args={"to": "ACME Ltd", "cents": 50_000})
