"""Run leases: which process is driving a run right now.

An owner is ``"host:pid:token"``. A lease whose process is gone from this host is
free, so a run killed with SIGKILL can be resumed at once, while a live process
keeps everyone else out.
"""

from __future__ import annotations

import os
import socket
import uuid


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_is_free(owner: str | None) -> bool:
    if not owner:
        return True
    try:
        host, pid_text, _ = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return True
    if host != socket.gethostname():
        return False
    if pid == os.getpid():
        # Our own process: another engine object in it owns it. Not free.
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
