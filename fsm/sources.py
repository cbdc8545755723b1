"""Moved to :mod:`fsm.definition.sources`; this name keeps working for one more
release."""

import warnings as _warnings

from fsm.definition.sources import *  # noqa: F403

_warnings.warn("fsm.sources moved to fsm.definition.sources; import it from there",
               DeprecationWarning, stacklevel=2)
