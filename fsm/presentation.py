"""Moved to :mod:`fsm.definition.presentation`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.definition.presentation import *  # noqa: F403

_warnings.warn("fsm.presentation moved to fsm.definition.presentation; import it from there",
               DeprecationWarning, stacklevel=2)
