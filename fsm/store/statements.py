"""Moved to :mod:`fsm.store._statements` (not the public API); this name keeps working for one
more release."""

import warnings as _warnings

from fsm.store._statements import *  # noqa: F403

_warnings.warn("fsm.store.statements moved to fsm.store._statements; import it from there",
               DeprecationWarning, stacklevel=2)
