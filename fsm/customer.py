"""Moved to :mod:`fsm.records.conversation`; this name keeps working for one more
release."""

import warnings as _warnings

from fsm.records.conversation import *  # noqa: F403

_warnings.warn("fsm.customer moved to fsm.records.conversation; import it from there",
               DeprecationWarning, stacklevel=2)
