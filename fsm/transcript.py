"""Moved to :mod:`fsm.records.transcript`; this name keeps working for one more
release."""

import warnings as _warnings

from fsm.records.transcript import *  # noqa: F403

_warnings.warn("fsm.transcript moved to fsm.records.transcript; import it from there",
               DeprecationWarning, stacklevel=2)
