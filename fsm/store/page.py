"""What a read of many rows gives back: the rows, and those it could not read."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from fsm.errors import RowDamaged

T = TypeVar("T")


class Page(list[T]):
    """The rows a store read (it is their list) and, with ``skip_damaged=True``, the rows
    it could not read and left out (:attr:`damaged`): one damaged row never keeps the
    others from being read."""

    def __init__(self, rows: Iterable[T] = (), damaged: Iterable[RowDamaged] = ()) -> None:
        super().__init__(rows)
        #: Each row left out because it could not be read, in the order met.
        self.damaged: list[RowDamaged] = list(damaged)


def read_rows(rows: Iterable[Any], parse: Callable[[Any], T], *, skip_damaged: bool,
              damaged: list[RowDamaged] | None, what: str) -> Page[T]:
    """``parse`` applied to each row. A row it finds damaged (:class:`RowDamaged`) is
    raised, or, with ``skip_damaged``, left out and named in the page's ``damaged``.
    ``damaged`` (a list to fill, the old spelling of ``skip_damaged``) is filled too."""
    old_spelling(what, damaged, stacklevel=4)
    skip = skip_damaged or damaged is not None
    page: Page[T] = Page()
    for row in rows:
        try:
            page.append(parse(row))
        except RowDamaged as exc:
            if not skip:
                raise
            page.damaged.append(exc)
            if damaged is not None:
                damaged.append(exc)
    return page


def old_spelling(what: str, damaged: list[RowDamaged] | None, *, stacklevel: int = 3) -> None:
    """Warn of ``damaged=[...]``, the out-parameter :class:`Page` replaces (``stacklevel``:
    where the store method's caller is, counted from here)."""
    if damaged is not None:
        warnings.warn(f"{what}(damaged=[...]) is deprecated; give skip_damaged=True and read "
                      "the damaged rows from the Page it returns (.damaged)",
                      DeprecationWarning, stacklevel=stacklevel)
