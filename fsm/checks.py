"""Moved to :mod:`fsm.definition.checks`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.definition.checks import *  # noqa: F403

_warnings.warn("fsm.checks moved to fsm.definition.checks; import it from there",
               DeprecationWarning, stacklevel=2)
