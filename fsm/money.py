"""Moved to :mod:`fsm.definition.money`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.definition.money import *  # noqa: F403

_warnings.warn("fsm.money moved to fsm.definition.money; import it from there",
               DeprecationWarning, stacklevel=2)
