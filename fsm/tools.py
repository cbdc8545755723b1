"""Moved to :mod:`fsm.definition.tools`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.definition.tools import *  # noqa: F403

_warnings.warn("fsm.tools moved to fsm.definition.tools; import it from there",
               DeprecationWarning, stacklevel=2)
