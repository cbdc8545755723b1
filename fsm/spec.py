"""Moved to :mod:`fsm.definition.spec`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.definition.spec import *  # noqa: F403

_warnings.warn("fsm.spec moved to fsm.definition.spec; import it from there",
               DeprecationWarning, stacklevel=2)
