"""Moved to :mod:`fsm.store._columns` (not the public API); this name keeps working for one
more release: every name of the new module, public or not, is found here too."""

import warnings as _warnings
from typing import Any as _Any

import fsm.store._columns as _new
from fsm.store._columns import *  # noqa: F403

_warnings.warn("fsm.store.columns moved to fsm.store._columns; import it from there",
               DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> _Any:
    return getattr(_new, name)
