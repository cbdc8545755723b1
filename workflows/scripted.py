"""The scripted desk both τ-bench desks replay reference actions with: a policy that
carries out a list of moves, one action per step, proposing each write before it calls
it (``workflows/retail/replay.py``, ``workflows/airline/replay.py``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Sequence
from typing import Any

from fsm import Action, View


class ScriptedDesk(ABC):
    """A policy that carries out ``moves``, one action per step, then fires ``finish``
    (or, ``finish=False``, only asks whether there is anything else).

    A ``call`` calls its tool, an ``event`` fires its event, a ``say`` says its text to the
    customer (who answers it), and a write is proposed first (:meth:`proposal`). Once the
    run is in a write state (:meth:`writing`) the write is called with its ``call_args``
    (default: what was proposed), and withdrawn if the run is still there after it (the
    write failed or was refused). A refused or declined proposal is not written. What
    happened to each move is in the run's event log; ``steps`` says at which steps each
    move acted.
    """

    #: The states where the conversation is over: the script stops there.
    ENDED: frozenset[str] = frozenset()

    def __init__(self, moves: Sequence[Any], *, finish: bool = True) -> None:
        self.moves = list(moves)
        self.finish = finish
        #: ``(index of the move, step)`` of every action handed out for a move.
        self.steps: list[tuple[int, int]] = []
        self._script = self._run()
        next(self._script)

    def __call__(self, view: View) -> Action:
        return self._script.send(view)

    def steps_of(self, index: int) -> list[int]:
        """The steps at which the move ``index`` acted (none: it never got to act)."""
        return [step for i, step in self.steps if i == index]

    @abstractmethod
    def proposal(self, move: Any) -> Action:
        """The action that proposes the write ``move`` to the customer."""

    def writing(self, state: str) -> bool:
        """Whether ``state`` is one where a confirmed write runs."""
        return state == "writing"

    def _run(self) -> Generator[Action, View, None]:
        view: View = yield Action(final="")  # primed; never handed out
        for i, move in enumerate(self.moves):
            self.steps.append((i, view.step))
            if move.kind == "call":
                view = yield Action(tool=move.name, args=move.args)
            elif move.kind == "event":
                view = yield Action(tool="advance", args={"event": move.name, **move.args})
            elif move.kind == "say":
                view = yield Action(final=move.args["text"])
            else:
                view = yield from self._write(i, move, view)
            if view.state in self.ENDED:
                break
        while True:  # the script is done: end the conversation (asked again if refused)
            if self.finish:
                yield Action(tool="advance", args={"event": "finish"})
            else:
                yield Action(final="Is there anything else I can help you with?")

    def _write(self, i: int, move: Any, view: View) -> Generator[Action, View, View]:
        view = yield self.proposal(move)
        if not self.writing(view.state):
            return view  # refused by the guard, or the customer did not say yes
        self.steps.append((i, view.step))
        view = yield Action(tool=move.name, args=move.call_args or move.args)
        if self.writing(view.state):
            view = yield Action(tool="advance", args={"event": "withdrawn"})
        return view
