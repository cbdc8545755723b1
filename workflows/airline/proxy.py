"""A recording stdio proxy: ``python -m workflows.airline.proxy LOG COMMAND [ARGS...]``.

It runs COMMAND (an MCP server over stdio) as its child and passes every line between
its own stdin/stdout and the child's, appending each one to LOG as a JSON line
``{"dir": "to_server" | "from_server", "message": ...}`` before passing it on. The
airline server keeps no call log; this record of everything that crossed the wire is the
evidence that a refused call never reached it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any


def _log(log: IO[str], lock: threading.Lock, direction: str, line: bytes) -> None:
    try:
        message: Any = json.loads(line)
    except ValueError:
        message = line.decode("utf-8", "replace")
    with lock:
        log.write(json.dumps({"dir": direction, "message": message}) + "\n")
        log.flush()


def _pump(src: IO[bytes], dst: IO[bytes], log: IO[str], lock: threading.Lock,
          direction: str) -> None:
    for line in iter(src.readline, b""):
        _log(log, lock, direction, line)
        dst.write(line)
        dst.flush()
    dst.close()


def main(argv: list[str]) -> int:
    log_path, command = Path(argv[0]), argv[1:]
    lock = threading.Lock()
    with log_path.open("a", encoding="utf-8") as log:
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert child.stdin is not None and child.stdout is not None
        back = threading.Thread(target=_pump, args=(child.stdout, sys.stdout.buffer, log, lock,
                                                    "from_server"), daemon=True)
        back.start()
        try:
            _pump(sys.stdin.buffer, child.stdin, log, lock, "to_server")
        except BrokenPipeError:
            pass
        code = child.wait()
        back.join(timeout=30)
    return code


def calls(log_path: str | Path) -> list[dict[str, Any]]:
    """Every ``tools/call`` request the log shows crossing to the server: ``{"tool",
    "args"}`` in order."""
    out = []
    path = Path(log_path)
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        msg = entry["message"]
        if entry["dir"] == "to_server" and isinstance(msg, dict) and \
                msg.get("method") == "tools/call":
            params = msg.get("params") or {}
            out.append({"tool": params.get("name"), "args": params.get("arguments") or {}})
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
