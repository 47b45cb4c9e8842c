"""The plugin-route-data doc's branch-C batching line is rendered from the target's own dataloader, with the words the
data prompt uses: the doc used to say the dataset returns a ``collate_fn`` that builds the batch while the prompt
said to give it none."""

from __future__ import annotations

import json
from pathlib import Path

from msmigrate.agent.knowledge_view import fill_target_slots, target_knowledge_tool
from msmigrate.core.run_context import RunContext
from msmigrate.knowledge.retrieval import read_knowledge
from msmigrate.tools.repo_reader.wiring_facts import collate_advice, collate_wiring_facts

STANDIN = Path(__file__).resolve().parents[2] / "msmigrate" / "testbeds" / "standin" / "tree"


def branch_c(body: str) -> str:
    return " ".join(body.split("**C — new dataset plugin:**")[1].split("\n\n")[0].split())


def doc_for(target: Path) -> str:
    ctx = RunContext(run_id="r", run_dir=target, source=target, target=target, model_name="m")
    tool = target_knowledge_tool(ctx)
    result = json.loads(tool.invoke({"entry_id": "plugin-route-data"}))
    assert result["ok"], result
    return result["data"]["body"]


def test_the_doc_renders_what_the_standins_dataloader_does():
    line = branch_c(doc_for(STANDIN))
    assert "[[target:" not in line and "whose `collate_fn` builds the batch" not in line
    facts = collate_wiring_facts(STANDIN)
    assert facts["dataset_collate_fn_wins"] is True
    assert collate_advice(facts) in line and "give the dataset no `collate_fn`" in line
    assert f"`{facts['at']}`" in line  # the target's own line, not a claim about MindSpeed-MM in general


def test_the_doc_follows_a_dataloader_that_never_reads_a_collate_fn(tmp_path):
    (tmp_path / "mindspeed_mm/fsdp/data").mkdir(parents=True)
    (tmp_path / "mindspeed_mm/fsdp/data/__init__.py").write_text(
        "def build_loader(dataset, collate_param):\n    return make_collator(collate_param)\n")
    line = branch_c(doc_for(tmp_path))
    assert "never reads a dataset's `collate_fn`" in line and "instead of the collator" not in line


def test_a_slot_this_view_does_not_know_is_left_as_written():
    assert fill_target_slots("a [[target: nothing_known]] b", STANDIN) == "a [[target: nothing_known]] b"
    assert "[[target: collate_advice]]" in read_knowledge("plugin-route-data").data["body"]  # the doc's slot
