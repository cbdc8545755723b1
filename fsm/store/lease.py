"""Run leases: which process is driving a run right now, and until when.

An owner is ``"host:pid:token"``. A lease carries an expiry (``lease_until``) that
the driving process renews with a heartbeat; once it passes, anyone may take the
run, on any machine. On one machine there is a fast path: a lease whose process is
gone from this host is free at once, so a run killed with SIGKILL can be resumed
without waiting for the expiry, while a live process keeps everyone else out.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

from fsm.errors import ConcurrentUpdate, LeaseLost, RunNotFound


@dataclass(frozen=True)
class Lease:
    """Who holds a run's lease, and until when (``None``: until released)."""

    owner: str
    until: float | None


@dataclass(frozen=True)
class Claimed:
    """A run a worker claimed: its id, workflow, and the lease holder it replaced."""

    run_id: str
    workflow: str
    previous: str | None


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def this_host_prefix() -> str:
    """The start of every owner id of this host (``"host:"``)."""
    return f"{socket.gethostname()}:"


def lease_expired(until: float | None, now: float) -> bool:
    """True when a lease that lasts until ``until`` has run out at ``now``."""
    return until is not None and until <= now


def lease_is_free(owner: str | None) -> bool:
    """True when nobody holds the lease or its process is gone from this host."""
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


def lease_held(owner: str | None, until: float | None, now: float) -> bool:
    """Someone else's live lease: not expired, and not of a process gone from this host."""
    return bool(owner) and not lease_expired(until, now) and not lease_is_free(owner)


def expiry(now: float, ttl: float | None) -> float | None:
    """``lease_until`` for a lease taken at ``now`` for ``ttl`` seconds (``None``: no expiry)."""
    return None if ttl is None else now + ttl


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def check_fence(run_id: str, found: tuple[int, str | None] | None, *, owner: str | None,
                version: int | None) -> None:
    """Raise unless the run exists (``found``: its version and lease holder), is leased
    to ``owner`` and is at ``version`` (each checked when given): a write from a holder
    that lost its lease, or from a stale copy of the run, changes nothing."""
    if found is None:
        raise RunNotFound(run_id)
    if owner is not None and found[1] != owner:
        raise LeaseLost(run_id, owner, found[1])
    if version is not None and found[0] != version:
        raise ConcurrentUpdate(run_id, version, found[0])
