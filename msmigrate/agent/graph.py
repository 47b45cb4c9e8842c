"""Wiring only. Every node returns the next ``phase``; one router reads it (or sends pending tool calls to tools).

prepare → plan → model ⇄ tools → data ⇄ tools → config ⇄ tools → verify → report
                   ▲              ▲               ▲            │ any gate fails
                   └──────────────┴─── classify ◄─┴────────────┘
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

from msmigrate.agent.deps import RunDeps
from msmigrate.agent.nodes.classify import make_classify_node
from msmigrate.agent.nodes.plan import make_plan_node
from msmigrate.agent.nodes.prepare import make_prepare_node
from msmigrate.agent.nodes.report import make_report_node
from msmigrate.agent.nodes.tools import make_tools_node
from msmigrate.agent.nodes.verify import make_verify_node
from msmigrate.agent.nodes.work import make_work_node
from msmigrate.agent.state import MigrationState

NODES = ("prepare", "plan", "model", "data", "config", "tools", "verify", "classify", "report")
ROUTES = ("plan", "model", "data", "config", "tools", "verify", "classify", "report")


def route(state: dict[str, Any]) -> str:
    messages = state.get("messages") or []
    if messages and isinstance(messages[-1], AIMessage) and messages[-1].tool_calls:
        return "tools"
    return "report" if state.get("exit_status") else state["phase"]


def build_graph(deps: RunDeps, checkpointer: Any = None):
    g = StateGraph(MigrationState)
    g.add_node("prepare", make_prepare_node(deps))
    g.add_node("plan", make_plan_node(deps))
    for phase in ("model", "data", "config"):
        g.add_node(phase, make_work_node(deps, phase))
    g.add_node("tools", make_tools_node(deps))
    g.add_node("verify", make_verify_node(deps))
    g.add_node("classify", make_classify_node(deps))
    g.add_node("report", make_report_node(deps))
    g.add_edge(START, "prepare")
    for name in NODES[:-1]:
        g.add_conditional_edges(name, route, {r: r for r in ROUTES})
    g.add_edge("report", END)
    return g.compile(checkpointer=checkpointer)
