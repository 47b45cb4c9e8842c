"""``read_knowledge`` as a run offers it: a doc's target-dependent lines come from the run's target.

Why: a knowledge doc is written once for every target, but some of what it says is the target's own wiring. The
``plugin-route-data`` doc said branch C's dataset returns a ``collate_fn`` that builds the batch, while the data
prompt, reading the target's dataloader (``tools/repo_reader/wiring_facts.py``), said to give it none. Such a line is
a slot in the doc (``[[target: <name>]]``), filled here from the target's code with the same function the prompt
uses, so the doc and the prompt cannot drift apart. A slot this module does not know is left as written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from msmigrate.core.run_context import RunContext
from msmigrate.core.tool_result import ToolResult, make_tool
from msmigrate.knowledge.retrieval import ReadKnowledgeArgs, read_knowledge, read_knowledge_tool
from msmigrate.tools.repo_reader.wiring_facts import collate_advice, collate_wiring_facts

SLOT = re.compile(r"\[\[target: (\w+)\]\]")
# slot name -> its text for a target checkout
SLOTS: dict[str, Callable[[Path], str]] = {
    "collate_advice": lambda root: collate_advice(collate_wiring_facts(root)),
}


def fill_target_slots(body: str, target: Path) -> str:
    """``body`` with every known ``[[target: name]]`` slot replaced by what ``target``'s code says (each slot read
    once)."""
    said: dict[str, str] = {}

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name not in SLOTS:
            return match.group(0)
        if name not in said:
            said[name] = SLOTS[name](target)
        return said[name]

    return SLOT.sub(fill, body)


def read_knowledge_for_target(ctx: RunContext, entry_id: str) -> ToolResult:
    res = read_knowledge(entry_id)
    if res.ok and isinstance(res.data.get("body"), str):
        res.data["body"] = fill_target_slots(res.data["body"], Path(ctx.target))
    return res


def target_knowledge_tool(ctx: RunContext):
    """The knowledge layer's ``read_knowledge`` tool (same name, description and arguments), bound to the run's
    target."""
    plain = read_knowledge_tool()
    return make_tool(plain.name, plain.description, ReadKnowledgeArgs,
                     lambda entry_id: read_knowledge_for_target(ctx, entry_id))
