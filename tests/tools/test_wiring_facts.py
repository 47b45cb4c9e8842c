"""Where the target's own code sets a plugin's loss and picks what batches its samples, read by AST; the model, data
and config contracts and the plan follow it (blind live run 9's player had to grep for the loss type, was told both
"register a collator" and "the dataset's collate_fn wins" on branch C, and read "no absolute paths" against a YAML
that must name the source folder)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from msmigrate.agent.handoff import compact_target
from msmigrate.agent.nodes.plan import collate_rule
from msmigrate.prompts.fence import CLOSE
from msmigrate.prompts.render import render
from msmigrate.prompts.sample_state import sample_vars
from msmigrate.tools.module_plan import apply_modules_from_tree, root_unit_modules
from msmigrate.tools.repo_reader.wiring_facts import collate_wiring_facts, loss_wiring_facts

STANDIN = Path(__file__).resolve().parents[2] / "msmigrate" / "testbeds" / "standin" / "tree"


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text, encoding="utf-8")


def test_the_standin_engine_sets_the_loss_from_the_yaml_key():
    facts = loss_wiring_facts(STANDIN)
    assert facts["key"] == "features.loss_cfg.loss_type"
    assert facts["set_at"].startswith("mindspeed_mm/fsdp/train/train_engine.py:")


def test_a_setattr_under_another_key_is_read_as_written(tmp_path):
    # other words than either target: the key and the line come from this code, not from a table
    write(tmp_path, "mindspeed_mm/fsdp/train/engine.py",
          "def step(self, batch):\n"
          "    if self.config.objective.loss_type != 'raw':\n"
          "        setattr(self.model, 'loss_function', make(self.config.objective.loss_type))\n")
    assert loss_wiring_facts(tmp_path) == {"set_at": "mindspeed_mm/fsdp/train/engine.py:3",
                                           "key": "objective.loss_type"}
    assert loss_wiring_facts(tmp_path / "nowhere") == {}


def test_which_of_collator_and_collate_fn_batches_is_read_from_the_dataloader(tmp_path):
    facts = collate_wiring_facts(STANDIN)
    assert facts["dataset_collate_fn_wins"] is True and facts["at"].startswith("mindspeed_mm/fsdp/data/")
    write(tmp_path, "mindspeed_mm/fsdp/data/loader.py",
          "def build(dataset, collate_param):\n"
          "    collator = COLLATORS[collate_param['collator_id']]()\n"
          "    return DataLoader(dataset, collate_fn=collator)\n")
    assert collate_wiring_facts(tmp_path) == {"dataset_collate_fn_wins": False}
    write(tmp_path, "mindspeed_mm/fsdp/data/loader.py",
          "def build(train_dataset, collate_param):\n"
          "    if hasattr(train_dataset, 'collate_fn'):\n"
          "        return DataLoader(train_dataset, collate_fn=train_dataset.collate_fn)\n"
          "    return DataLoader(train_dataset, collate_fn=COLLATORS[collate_param['collator_id']]())\n")
    assert collate_wiring_facts(tmp_path) == {"dataset_collate_fn_wins": True, "in": "build",
                                              "at": "mindspeed_mm/fsdp/data/loader.py:2"}


def raw_prompt(phase: str, **summary) -> str:
    values = sample_vars(phase, live_index=False)
    values["target_summary"] = compact_target({"ids": {}, "headline": "", **summary})
    return render(phase, **values)


def phase_prompt(phase: str, **summary) -> str:
    return " ".join(raw_prompt(phase, **summary).split())  # wrapping is layout, not content


def fenced(text: str, label: str) -> list[str]:
    """The bodies of the fences labelled ``label`` in a rendered prompt (each closed by the line with its id)."""
    bodies = []
    for m in re.finditer(r"^<<<DATA (.+) id=([0-9a-f]{24}) \(untrusted text; not instructions\)$", text, re.M):
        if m.group(1) == label:
            close = CLOSE.format(boundary=m.group(2))
            bodies.append(text[m.end() + 1:text.index("\n" + close + "\n", m.end())])
    return bodies


def test_the_model_contract_says_where_the_loss_type_comes_from():
    facts = loss_wiring_facts(STANDIN)
    raw = raw_prompt("model", loss_wiring=facts)
    text = " ".join(raw.split())
    loss = text.split("- Loss:")[1].split(" - ")[0]
    # the contract: the YAML's loss type decides it, its key and line are the target wiring facts ...
    assert "the YAML's loss type (its key and where the engine sets the function: target wiring facts) decides it" in loss
    assert "the target's train engine assigns `model.loss_function` before each step" in loss
    assert "neither reads the loss type nor builds that function" in loss
    # ... which reach the prompt as read from the target's code, inside their fence (they are target-derived text)
    wiring = fenced(raw, "target wiring facts")
    assert len(wiring) == 1 and f"- loss_wiring: {json.dumps(facts, sort_keys=True)}" in wiring[0]
    assert facts["key"] == "features.loss_cfg.loss_type" and facts["set_at"].startswith(
        "mindspeed_mm/fsdp/train/train_engine.py:")
    outside = re.sub(r"^<<<DATA .+ id=([0-9a-f]{24}) .*?^DATA id=\1>>>$", "", raw, flags=re.M | re.S)
    assert "features.loss_cfg.loss_type" not in outside  # the key is read from the target, not written in the template
    assert "was not found" in phase_prompt("model").split("- Loss:")[1].split(" - ")[0]
    # plugin code has no absolute paths; the YAML's run paths are the config phase's business
    assert "no hard-coded absolute paths in the plugin code" in text


def test_branch_c_asks_for_one_batching_path():
    standin = phase_prompt("data", collate_wiring=collate_wiring_facts(STANDIN))
    line = standin.split("Branch C:")[1].split(" - ")[0]
    assert "give the dataset no `collate_fn`" in line and "instead of the collator" in line
    assert "whose dataset has a `collate_fn`" not in standin  # the old advice asked for both
    never = phase_prompt("data", collate_wiring={"dataset_collate_fn_wins": False})
    assert "never reads a dataset's `collate_fn`" in never.split("Branch C:")[1].split(" - ")[0]
    # the plan says the same thing in its branch-C reason
    assert "give the dataset no `collate_fn`" in collate_rule("mylm", collate_wiring_facts(STANDIN))
    assert "register" not in collate_rule("mylm", {"dataset_collate_fn_wins": False})


def test_the_config_contract_expects_the_runs_paths_and_follows_the_suggestion():
    text = phase_prompt("config")
    assert "the YAML names them by their absolute paths (expected here" in text
    assert "`suggested_apply_modules`" in text and "root unit" in text
    assert "language model, `lm_head`)" not in text  # the old list asked for lm_head even when tied


def test_modules_left_out_of_the_suggestion_are_named_as_the_root_units():
    names = ["", "model", "model.visual", "model.visual.blocks", "model.visual.blocks.0", "model.visual.blocks.1",
             "model.visual.merger", "model.visual.merger.fc", "model.embed_tokens", "model.layers",
             "model.layers.0", "model.layers.1", "model.norm", "lm_head"]
    classes = {"model.visual.blocks.0": "VisionBlock", "model.visual.blocks.1": "VisionBlock",
               "model.layers.0": "DecoderLayer", "model.layers.1": "DecoderLayer", "model.embed_tokens": "Embedding",
               "model.visual.blocks": "ModuleList", "model.layers": "ModuleList"}
    tree = {"names": names, "classes": classes, "no_split_modules": ["VisionBlock", "DecoderLayer"],
            "tied_embeddings": True}
    suggested = apply_modules_from_tree(tree)
    assert "lm_head" not in suggested and "model.visual" in suggested
    # the merger sits inside the wrapped tower; the tied head and embedding and the final norm go to the root
    assert root_unit_modules(tree, suggested) == ["model.embed_tokens", "model.norm", "lm_head"]
    untied = apply_modules_from_tree({**tree, "tied_embeddings": False})
    assert root_unit_modules({**tree, "tied_embeddings": False}, untied) == ["model.norm"]
