"""Moved to :mod:`fsm.definition.conversation_checks`; this name keeps working for one
more release."""

import warnings as _warnings

from fsm.definition.conversation_checks import *  # noqa: F403

_warnings.warn("fsm.conversation_checks moved to fsm.definition.conversation_checks; "
               "import it from there",
               DeprecationWarning, stacklevel=2)
