"""Moved to :mod:`fsm.store._dialect` (not the public API); this name keeps working for one
more release."""

import warnings as _warnings

from fsm.store._dialect import *  # noqa: F403

_warnings.warn("fsm.store.dialect moved to fsm.store._dialect; import it from there",
               DeprecationWarning, stacklevel=2)
