"""Moved to :mod:`fsm.observability.metrics`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.observability.metrics import *  # noqa: F403

_warnings.warn("fsm.metrics moved to fsm.observability.metrics; import it from there",
               DeprecationWarning, stacklevel=2)
