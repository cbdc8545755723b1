"""Moved to :mod:`fsm.store._statements` (not the public API); this name keeps working for one
more release: every name of the new module, public or not, is found here too."""

import warnings as _warnings
from typing import Any as _Any

import fsm.store._statements as _new
from fsm.store._statements import *  # noqa: F403

_warnings.warn("fsm.store.statements moved to fsm.store._statements; import it from there",
               DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> _Any:
    return getattr(_new, name)
