"""Moved to :mod:`fsm.definition.machine`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.definition.machine import *  # noqa: F403

_warnings.warn("fsm.machine moved to fsm.definition.machine; import it from there",
               DeprecationWarning, stacklevel=2)
