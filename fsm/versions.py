"""Moved to :mod:`fsm.definition.versions`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.definition.versions import *  # noqa: F403

_warnings.warn("fsm.versions moved to fsm.definition.versions; import it from there",
               DeprecationWarning, stacklevel=2)
