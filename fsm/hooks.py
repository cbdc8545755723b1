"""Moved to :mod:`fsm.observability.hooks`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.observability.hooks import *  # noqa: F403

_warnings.warn("fsm.hooks moved to fsm.observability.hooks; import it from there",
               DeprecationWarning, stacklevel=2)
