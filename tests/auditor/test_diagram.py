"""Diagrams, tested as text: nodes are the states, edges are the transitions."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from refund_scripts import actions, small_refund
from typer.testing import CliRunner

from fsm import Action, Engine, FSMError, MemoryStore, WorkflowSpec
from fsm.auditor.diagram import Overlay, Taken, extract, overlay
from fsm.auditor.render import (
    GraphvizMissing,
    dot_sha256,
    format_for,
    render,
    to_dot,
    to_markdown,
    to_mermaid,
)
from fsm.cli import app
from fsm.store import open_store
from fsm.testing import ScriptedPolicy
from workflows.refund import Shop, build, clerk
from workflows.refund.workflow import TOOLS_BY_STATE, TRANSITIONS

EDGES = {(s, e, t) for s, evs in TRANSITIONS.items() for e, t in evs.items()}
STATES = set(TRANSITIONS) | {t for evs in TRANSITIONS.values() for t in evs.values()}
DOT_EDGE = re.compile(r"^\t(\S+) -> (\S+) \[label=<<b>([^<]+)</b>(.*)>(.*)\]$")
DOT_NODE = re.compile(r"^\t(\S+) \[label=<(.*)>(.*)\]$")
MMD_EDGE = re.compile(r"^    (\S+) --> (\S+) : (\S+)(.*)$")


def dot_edges(dot: str) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(source, event, target) → (rest of the label, attributes)."""
    return {(m[1], m[3], m[2]): (m[4], m[5]) for line in dot.splitlines()
            if (m := DOT_EDGE.match(line))}


def dot_nodes(dot: str) -> dict[str, tuple[str, str]]:
    return {m[1]: (m[2], m[3]) for line in dot.splitlines()
            if (m := DOT_NODE.match(line)) and not m[1].startswith("__")}


def test_dot_nodes_are_the_states_and_edges_the_transitions(spec: WorkflowSpec) -> None:
    dot = to_dot(extract(spec))
    assert set(dot_nodes(dot)) == STATES
    assert set(dot_edges(dot)) == EDGES
    assert "\t__start__ -> collecting\n" in dot


def test_dot_nodes_list_their_tools_and_marks(spec: WorkflowSpec) -> None:
    nodes = dot_nodes(to_dot(extract(spec)))
    for state in STATES:
        label, _ = nodes[state]
        shown = re.findall(r'<font point-size="10">(\w+)', label)
        assert shown == TOOLS_BY_STATE.get(state, []), state
    refunding, attrs = nodes["refunding"]
    assert "money moves here" in refunding and "refund_item (moves money)" in refunding
    assert 'fillcolor="#fde2e1"' in attrs
    assert "✎ writes" in nodes["replying"][0] and "money" not in nodes["replying"][0]
    assert "⚑ waits for a person" in nodes["awaiting_approval"][0]
    assert "dashed" in nodes["awaiting_approval"][1]
    assert "peripheries=2" in nodes["done"][1] and "peripheries=2" in nodes["handed_over"][1]
    assert "end: done" in nodes["done"][0] and "handed over" in nodes["handed_over"][0]
    plain = [s for s in STATES if "money" not in nodes[s][0] and "writes" not in nodes[s][0]]
    assert sorted(plain) == sorted(STATES - {"refunding", "replying"})


def test_dot_edges_show_guard_who_fires_and_human_edges_dashed(spec: WorkflowSpec) -> None:
    edges = dot_edges(to_dot(extract(spec)))
    label, attrs = edges[("deciding", "large_refund", "awaiting_approval")]
    assert "[amount &gt; ₹500 and ≤ refundable]" in label
    assert "⇒ amount_above_limit" in label and "by model" in label
    assert "lambda" not in label
    dashed = {k for k, (_, a) in edges.items() if "style=dashed" in a}
    assert dashed == {k for k in EDGES if k[1] in ("approved", "declined", "expired")}
    for k in dashed:
        assert "by person" in edges[k][0]
    assert "by tool refund_item" in edges[("refunding", "refund_ok", "replying")][0]
    assert "by tool send_reply" in edges[("replying", "sent", "done")][0]


def test_dot_has_a_legend(spec: WorkflowSpec) -> None:
    dot = to_dot(extract(spec))
    legend = next(line for line in dot.splitlines() if line.startswith("\tfontname=") and
                  "<b>legend</b>" in line)
    assert "workflow refund" in legend
    for words in ("money moves here", "waits for a person", "only a person fires",
                  "end: done", "handed over", "[guard] ⇒ fact"):
        assert words in legend, words


def test_who_may_fire_each_edge(spec: WorkflowSpec) -> None:
    firers = {(e.source, e.event): e.firers for e in extract(spec).edges}
    assert firers[("awaiting_approval", "approved")] == ("person",)
    assert firers[("awaiting_approval", "expired")] == ("person",)
    assert firers[("refunding", "refund_ok")] == ("tool:refund_item",)
    assert firers[("deciding", "small_refund")] == ("model",)
    assert firers[("replying", "sent")] == ("tool:send_reply",)


def test_mermaid_state_diagram(spec: WorkflowSpec) -> None:
    mmd = to_mermaid(extract(spec))
    lines = mmd.splitlines()
    assert lines[1] == "stateDiagram-v2"
    edges = {(m[1], m[3], m[2]) for line in lines if (m := MMD_EDGE.match(line))
             and "[*]" not in line}
    assert edges == EDGES
    assert "    [*] --> collecting" in lines
    assert {"    done --> [*]", "    handed_over --> [*]"} <= set(lines)
    assert "    verifying : tools get_order, get_policy" in lines
    assert "    class refunding money" in lines and "    class awaiting_approval person" in lines
    approved = next(line for line in lines if " : approved" in line)
    assert approved.endswith("· by person")
    for line in lines[1:]:  # descriptions end at ':' or ';' in Mermaid
        desc = line.split(" : ", 1)[1] if " : " in line else ""
        assert ":" not in desc and ";" not in desc, line


def test_markdown_transition_table(spec: WorkflowSpec) -> None:
    md = to_markdown(extract(spec))
    rows = [line for line in md.splitlines() if line.startswith("| `") and line.count("|") == 7]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    assert {(c[0].strip("`"), c[1].strip("`"), c[3].strip("`")) for c in cells} == EDGES
    by_edge = {(c[0].strip("`"), c[1].strip("`")): c for c in cells}
    assert by_edge[("deciding", "large_refund")][2].startswith("amount > ₹500")
    assert by_edge[("awaiting_approval", "approved")][4] == "person"
    assert by_edge[("refunding", "refund_ok")][4] == "tool refund_item"
    assert by_edge[("verifying", "verified")][5] == "`get_order`, `get_policy`"
    assert "```mermaid\n" in md and "## Legend" in md


def test_formats_follow_suffix_or_flag() -> None:
    assert format_for("x.svg", None) == "svg"
    assert format_for("x.mmd", None) == "mermaid"
    assert format_for(None, "dot") == "dot"
    assert format_for(None, None) == "mermaid"
    with pytest.raises(FSMError, match="does not match the suffix"):
        format_for("x.svg", "dot")
    with pytest.raises(FSMError, match="cannot tell the format"):
        format_for("x.txt", None)
    with pytest.raises(FSMError, match="allowed: dot, svg, png, mermaid, md"):
        format_for(None, "jpeg")


# -- run overlays ------------------------------------------------------------------------

def _run_with_refusal_and_approval(spec: WorkflowSpec, store: MemoryStore) -> str:
    """A large refund: a refused refund_item in collecting, then a person approves."""
    asked = {"n": 0}

    def policy(view):  # type: ignore[no-untyped-def]
        asked["n"] += 1
        if asked["n"] == 2:
            return Action(tool="refund_item", args={
                "order_id": "A-1002", "item_id": "headphones-1", "amount_paise": 180_000})
        return clerk(view)

    engine = Engine(spec, store, policy)
    run = engine.start("Order A-1002: headphones broken", user="ravi", run_id="r1")
    assert run.status == "awaiting_approval"
    return "r1"


def test_overlay_of_a_paused_run(spec: WorkflowSpec, store: MemoryStore) -> None:
    run_id = _run_with_refusal_and_approval(spec, store)
    ov = overlay(run_id, store.events(run_id))
    assert [(t.n, t.source, t.event, t.target) for t in ov.path] == [
        (1, "collecting", "details_complete", "verifying"),
        (2, "verifying", "verified", "deciding"),
        (3, "deciding", "large_refund", "awaiting_approval"),
    ]
    assert ov.current == "awaiting_approval" and ov.status == "awaiting_approval"
    [refused] = ov.refusals
    assert (refused.step, refused.state, refused.tool) == (2, "collecting", "refund_item")
    nodes = dot_nodes(to_dot(extract(spec, ov)))
    assert "✗ step 2: tool 'refund_item' is not allowed in state" in nodes["collecting"][0]
    assert "◉ now here (awaiting_approval)" in nodes["awaiting_approval"][0]
    assert "penwidth=4" in nodes["awaiting_approval"][1]


def test_overlay_of_a_finished_run_numbers_the_path(spec: WorkflowSpec,
                                                    store: MemoryStore) -> None:
    run_id = _run_with_refusal_and_approval(spec, store)
    Engine(spec, store, clerk).decide(run_id, True, "supervisor", "ok")
    d = extract(spec, overlay(run_id, store.events(run_id)))
    edges = dot_edges(to_dot(d))
    steps = {e.step for e in store.events(run_id) if e.kind == "transition"}
    taken = {k: re.findall(r"#(\d+) step (\d+)", label) for k, (label, _) in edges.items()}
    order = sorted((int(n), int(s), k) for k, found in taken.items() for n, s in found)
    assert [k[1] for _, _, k in order] == ["details_complete", "verified", "large_refund",
                                            "approved", "refund_ok", "sent"]
    assert {s for _, s, _ in order} == steps
    assert "penwidth=3" in edges[("awaiting_approval", "approved", "refunding")][1]
    assert "penwidth=3" not in edges[("deciding", "small_refund", "refunding")][1]
    assert d.overlay is not None and d.overlay.current == "done"
    md = to_markdown(d)
    assert "Status **done**, now in `done`." in md
    approved_at = next(e.step for e in store.events(run_id) if e.event == "approved")
    assert f"| 4 | {approved_at} | `awaiting_approval` | `approved` | `refunding` |" in md
    assert "approved by supervisor" in md
    mmd = to_mermaid(d)
    assert "    class done current" in mmd and "note right of collecting" in mmd


def test_overlay_that_does_not_fit_the_tables_is_refused(spec: WorkflowSpec) -> None:
    stray = Overlay("r9", path=(Taken(1, 3, "collecting", "refund_ok", "done"),))
    with pytest.raises(FSMError, match="r9.*not in workflow 'refund'.*step 3"):
        extract(spec, stray)


# -- SVG and the dot program -------------------------------------------------------------

def test_svg_is_rendered_from_the_dot(spec: WorkflowSpec) -> None:
    d = extract(spec)
    if shutil.which("dot") is None:
        with pytest.raises(GraphvizMissing, match="graphviz"):
            render(d, "svg")
        return
    svg = render(d, "svg").decode()
    assert f"<!-- fsm: dot-sha256 {dot_sha256(to_dot(d))} -->" in svg
    titles = set(re.findall(r'class="node">\s*<title>([^<]+)</title>', svg))
    assert titles == STATES | {"__start__"}
    edge_titles = set(re.findall(r'class="edge">\s*<title>([^<]+)</title>', svg))
    assert {f"{s}&#45;&gt;{t}" for s, _, t in EDGES} <= edge_titles


def test_missing_dot_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "refund.svg"
    target.write_text("previous contents")
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    proc = subprocess.run([sys.executable, "-m", "fsm", "diagram", "refund", "-o", str(target)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "apt-get install -y graphviz" in proc.stderr and "'dot'" in proc.stderr
    assert target.read_text() == "previous contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refund.svg"]
    proc = subprocess.run([sys.executable, "-m", "fsm", "diagram", "refund", "-o",
                           str(tmp_path / "refund.dot")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "refund.dot").read_text() == to_dot(extract(build()))


# -- the command line --------------------------------------------------------------------

def fsm(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FSM_DB", "FSM_FAULT")}
    return subprocess.run([sys.executable, "-m", "fsm", *args], capture_output=True,
                          text=True, env=env, timeout=60, cwd=cwd)


def test_cli_writes_each_format_by_suffix(tmp_path: Path) -> None:
    spec = build()
    runner = CliRunner()
    for name, want in (("r.dot", to_dot(extract(spec))), ("r.mmd", to_mermaid(extract(spec))),
                       ("r.md", to_markdown(extract(spec)))):
        result = runner.invoke(app, ["diagram", "refund", "-o", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        assert (tmp_path / name).read_text() == want
    result = runner.invoke(app, ["diagram", "refund", "--format", "dot"])
    assert result.stdout == to_dot(extract(spec))
    proc = fsm("diagram", "refund", "-o", str(tmp_path / "r.svg"), "--format", "dot")
    assert proc.returncode == 2 and "does not match the suffix" in proc.stderr
    assert not (tmp_path / "r.svg").exists()


def test_cli_overlays_a_run_from_the_sqlite_store(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = open_store(str(db))
    shop = Shop().seed_demo()
    # A get_policy in collecting is refused first; then the small refund, replying "Refunded.".
    policy = ScriptedPolicy(actions([("get_policy", {"order_id": "A-1001"}),
                                     *small_refund(reply="Refunded.")]))
    run = Engine(build(shop), store, policy).start("Order A-1001 broke", user="asha",
                                                   run_id="k1")
    store.close()
    assert run.status == "done" and len(shop.ledger()) == 1
    proc = fsm("diagram", "refund", "--run", "k1", "--db", str(db), "--format", "md")
    assert proc.returncode == 0, proc.stderr
    assert "| 1 | 3 | `collecting` | `details_complete` | `verifying` |" in proc.stdout
    assert "| 1 | `collecting` | tool 'get_policy' is not allowed in state 'collecting'" \
        in proc.stdout
    assert "| 3 | 6 | `deciding` | `small_refund` | `refunding` |" in proc.stdout
    assert "Status **done**, now in `done`." in proc.stdout
    proc = fsm("diagram", "refund", "--run", "nope", "--db", str(db))
    assert proc.returncode == 1 and "run 'nope' not found" in proc.stderr


def test_a_layout_that_takes_too_long_is_a_clear_error(tmp_path: Path) -> None:
    slow = tmp_path / "bin"
    slow.mkdir()
    (slow / "dot").write_text("#!/bin/sh\nsleep 5\n")
    (slow / "dot").chmod(0o755)
    target = tmp_path / "refund.svg"
    env = {**os.environ, "PATH": f"{slow}:{os.environ['PATH']}", "FSM_DOT_TIMEOUT": "0.5"}
    proc = subprocess.run([sys.executable, "-m", "fsm", "diagram", "refund", "-o", str(target)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "did not finish SVG within 0.5 s" in proc.stderr
    assert not target.exists()
