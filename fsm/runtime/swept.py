"""What a sweep did, as a value: :meth:`Engine.sweep <fsm.runtime.engine.Engine.sweep>`."""

from __future__ import annotations

from collections.abc import Iterable

from fsm.errors import FSMError, RowDamaged


class Swept(list[str]):
    """The ids of the runs a sweep expired or moved (it is that list), and what it could
    not do: the runs it left for the next sweep (:attr:`skipped`), those it could not sweep
    at all (:attr:`failed`) and the rows it could not read (:attr:`damaged`)."""

    def __init__(self, touched: Iterable[str] = ()) -> None:
        super().__init__(touched)
        #: (run, why) for each run driven by another process, or pinned to another
        #: definition, right now: the next sweep tries it again.
        self.skipped: list[tuple[str, str]] = []
        #: (run, why) for each run that could not be swept (a write the database refused).
        self.failed: list[tuple[str, str]] = []
        #: Each approval or runs row that could not be read (once, however often met).
        self.damaged: list[RowDamaged] = []
        #: The error of each failed run, in :attr:`failed`'s order.
        self.errors: list[FSMError] = []

    def fail(self, run_id: str, exc: FSMError) -> None:
        """``run_id`` could not be swept: ``exc`` says why."""
        self.failed.append((run_id, str(exc)))
        self.errors.append(exc)

    def fill(self, skipped: list[tuple[str, str]] | None,
             failed: list[tuple[str, str]] | None,
             damaged: list[RowDamaged] | None) -> None:
        """Extend the lists given (the out-parameters this value replaces) with its own."""
        for out, kept in ((skipped, self.skipped), (failed, self.failed),
                          (damaged, self.damaged)):
            if out is not None:
                out += kept  # type: ignore[operator]

    def first_problem(self, *, damaged: bool = True, failed: bool = True) -> FSMError | None:
        """The first damaged row, else the first failed run's error (those asked for)."""
        found: list[FSMError] = [*(self.damaged if damaged else []),
                                 *(self.errors if failed else [])]
        return found[0] if found else None
