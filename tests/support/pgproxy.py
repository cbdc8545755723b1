"""A loopback TCP port in front of a PostgreSQL server that a test can cut: ``down()``
refuses new connections and resets every open one, as a server that went away does;
``up()`` lets connections through again. Only the processes pointed at ``url`` see the
outage, never anyone else sharing the server."""

from __future__ import annotations

import socket
import struct
import threading
import urllib.parse

from psycopg.conninfo import conninfo_to_dict


class PgProxy:
    def __init__(self, url: str) -> None:
        params = conninfo_to_dict(url)
        host = str(params.get("host") or "/var/run/postgresql")
        port = int(params.get("port") or 5432)
        self._target: str | tuple[str, int] = (
            f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port))
        self.port = _free_port()
        query = {k: str(params[k]) for k in ("options",) if params.get(k)}
        user = urllib.parse.quote(str(params.get("user") or "postgres"))
        password = params.get("password")
        who = f"{user}:{urllib.parse.quote(str(password))}" if password else user
        self.url = (f"postgresql://{who}@127.0.0.1:{self.port}/"
                    f"{urllib.parse.quote(str(params['dbname']))}"
                    + (f"?{urllib.parse.urlencode(query)}" if query else ""))
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.up()

    def up(self) -> None:
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.create_server(("127.0.0.1", self.port))
            listener.settimeout(0.1)
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Refuse new connections and reset the open ones."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._open = self._open, []
        if listener is not None:
            listener.close()
        for conn in conns:
            _reset(conn)

    close = down

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            try:
                server = self._connect()
            except OSError:
                client.close()
                continue
            with self._lock:
                # A connection accepted just before ``down()`` must not outlive the
                # outage: ``down()`` reset only the connections it could see.
                cut = self._listener is not listener
                if not cut:
                    self._open += [client, server]
            if cut:
                _reset(client)
                server.close()
                continue
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def _connect(self) -> socket.socket:
        if isinstance(self._target, str):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self._target)
            return s
        return socket.create_connection(self._target)


def _reset(conn: socket.socket) -> None:
    """Close ``conn`` with a reset, as a server that went away does.

    ``shutdown`` first: a pump thread blocked in ``recv`` on ``conn`` holds the socket
    open past ``close()`` (the kernel releases it, and sends the reset, only when that
    ``recv`` returns), so a client waiting for a reply that was already relayed, and
    sending nothing more, would wait for ever. ``shutdown`` wakes that ``recv`` at once."""
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
