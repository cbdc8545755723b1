"""Whether the standard ``OTEL_*`` variables ask for traces, and the tracing hook if so.

Read once at an entry point (the ``fsm`` command, a worker). Without the ``otel``
extra, or without a variable that asks for traces, nothing of OpenTelemetry is
imported and no hook is installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

#: The variables that ask for traces (``OTEL_TRACES_EXPORTER=none`` asks for none).
ASKING = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
          "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


#: The exporters ``OTEL_TRACES_EXPORTER`` may name (comma-separated).
EXPORTERS = ("console", "otlp", "none")


def asked(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` asks for traces; :class:`~fsm.errors.SettingsError` when
    ``OTEL_TRACES_EXPORTER`` names an exporter fsm does not have (a misspelt one would
    otherwise send nothing, and say nothing)."""
    exporters = environ.get("OTEL_TRACES_EXPORTER", "").strip()
    if exporters:
        names = [n.strip() for n in exporters.split(",")]
        unknown = [n for n in names if n not in EXPORTERS]
        if unknown:
            from fsm.errors import SettingsError

            raise SettingsError([f"OTEL_TRACES_EXPORTER={exporters!r} names "
                                 f"{', '.join(map(repr, unknown))}: the exporters are "
                                 f"{', '.join(EXPORTERS[:-1])} (comma-separated), or none"])
        return any(n != "none" for n in names)
    return any(environ.get(name, "").strip() for name in ASKING[1:])


def from_environ(environ: Mapping[str, str],
                 say: Callable[[str], None] | None = None) -> Any:
    """The :class:`~fsm.observability.otel.Tracing` hook ``environ`` asks for, with its own tracer
    provider (``None``: traces are not asked for, or the extra is missing, which
    ``say`` is told once). An unknown exporter is a :class:`~fsm.errors.SettingsError`."""
    if not asked(environ):
        return None
    if importlib.util.find_spec("opentelemetry") is None or \
            importlib.util.find_spec("opentelemetry.sdk") is None:
        if say is not None:
            say("OTEL_* asks for traces, but the otel extra is not installed "
                "(pip install 'fsm[otel]'): no traces are sent")
        return None
    from fsm.observability.otel import Tracing, provider_from_environ

    return Tracing(provider_from_environ(environ))
