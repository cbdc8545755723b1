"""Moved to :mod:`fsm.observability.otel`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.observability.otel import *  # noqa: F403

_warnings.warn("fsm.otel moved to fsm.observability.otel; import it from there",
               DeprecationWarning, stacklevel=2)
