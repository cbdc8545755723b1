"""The agent-loop workload (``workload.py``) on LangGraph; run by ``peers.py`` in its own
virtual environment (``langgraph``, ``langgraph-checkpoint-sqlite``).

A round is one super-step of a one-node ``StateGraph`` whose node asks the scripted
policy (``fetch(i)``), calls the tool and returns the two new chat messages (plain
dicts) for the ``messages`` channel (``Annotated[list, operator.add]``); a conditional
edge loops back to the node until N rounds are done. The graph is compiled with a
``SqliteSaver`` on a connection with WAL and ``synchronous=FULL`` and invoked with
``durability="sync"``: the node's writes (``put_writes``) and the new checkpoint
(``put``, which holds every channel's whole value) are each committed before the next
round starts — two commits per round.
"""

from __future__ import annotations

import operator
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import workload
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph


class AgentState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]
    round: int


def build(rounds: int, decisions: workload.Decisions) -> StateGraph:
    def step(state: AgentState) -> dict[str, Any]:
        i = state["round"] + 1
        call = decisions.decide(i)
        result = workload.fetch(**call["args"])
        return {"messages": [workload.assistant_message(call),
                             workload.tool_message(call, result)], "round": i}

    def more(state: AgentState) -> str:
        return "step" if state["round"] < rounds else END

    graph = StateGraph(AgentState)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", more, ["step", END])
    return graph


def run(path: Path, rounds: int, synchronous: str, decisions: workload.Decisions) -> None:
    db = workload.connect(path, synchronous)
    try:
        app = build(rounds, decisions).compile(checkpointer=SqliteSaver(db))
        config = {"configurable": {"thread_id": "bench"}, "recursion_limit": rounds + 10}
        out = app.invoke({"messages": [{"role": "user", "content": "go"}], "round": 0},
                         config, durability="sync")
        assert out["round"] == rounds and len(out["messages"]) == 2 * rounds + 1
    finally:
        db.close()


if __name__ == "__main__":
    sys.exit(workload.main(run, "langgraph"))
