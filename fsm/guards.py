"""Moved to :mod:`fsm.definition.guards`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.definition.guards import *  # noqa: F403

_warnings.warn("fsm.guards moved to fsm.definition.guards; import it from there",
               DeprecationWarning, stacklevel=2)
