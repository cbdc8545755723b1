"""Moved to :mod:`fsm.definition.registry`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.definition.registry import *  # noqa: F403

_warnings.warn("fsm.registry moved to fsm.definition.registry; import it from there",
               DeprecationWarning, stacklevel=2)
