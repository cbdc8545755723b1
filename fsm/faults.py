"""Moved: the injector to :mod:`fsm.testing.faults`, the fault point :func:`fault` to
:mod:`fsm.observability.faults`; this name keeps working for one more release."""

import warnings as _warnings

from fsm.observability.faults import fault  # noqa: F401
from fsm.testing.faults import *  # noqa: F403

_warnings.warn("fsm.faults moved to fsm.testing.faults; import it from there (and fault "
               "from fsm.observability.faults)", DeprecationWarning, stacklevel=2)
