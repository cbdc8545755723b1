"""Moved to :mod:`fsm.store._dialect` (not the public API); this name keeps working for one
more release: every name of the new module, public or not, is found here too."""

import warnings as _warnings
from typing import Any as _Any

import fsm.store._dialect as _new
from fsm.store._dialect import *  # noqa: F403

_warnings.warn("fsm.store.dialect moved to fsm.store._dialect; import it from there",
               DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> _Any:
    return getattr(_new, name)
