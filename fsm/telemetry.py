"""Moved to :mod:`fsm.observability.telemetry`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.observability.telemetry import *  # noqa: F403

_warnings.warn("fsm.telemetry moved to fsm.observability.telemetry; import it from there",
               DeprecationWarning, stacklevel=2)
