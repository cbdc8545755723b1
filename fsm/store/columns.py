"""Moved to :mod:`fsm.store._columns` (not the public API); this name keeps working for one
more release."""

import warnings as _warnings

from fsm.store._columns import *  # noqa: F403

_warnings.warn("fsm.store.columns moved to fsm.store._columns; import it from there",
               DeprecationWarning, stacklevel=2)
