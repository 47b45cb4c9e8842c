"""The delivered optimizer settings against the source's own recipe (G3), the draft that writes the source's recipe
where the example departs from it, and the rules repair. The source's recipe is read from the source (its launch
flags, its training code) or the HF Trainer's own defaults; the three heldout4 optimizer faults are applied to the
stand-in example's YAML with their own edits. Nothing here names a fault's message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import msmigrate
from msmigrate.agent.routes.fsdp2.draft_config import draft_config, load_baseline
from msmigrate.agent.routes.fsdp2.optimizer_recipe import departures, recipe_findings
from msmigrate.agent.routes.fsdp2.rules.autofix import restore_values
from msmigrate.knowledge.classifier import classify
from msmigrate.testbeds.faults import all_faults
from msmigrate.testbeds.faults.injection import Replace, SetLine
from msmigrate.tools.repo_reader.training_recipe import hf_trainer_defaults, source_recipe

STANDIN = Path(msmigrate.__file__).parent / "testbeds" / "standin" / "tree"
CONFIG = "examples/qwen3vl/qwen3vl_config.yaml"
FIXTURES = Path(msmigrate.__file__).parent / "testbeds" / "fixtures" / "custom_code"
FAULTS = {f.id: f for f in all_faults()}
# the stand-in target's training defaults (its TrainingArguments), as G3's schema gives them
DEFAULTS = {"clip_grad": 1.0, "adam_eps": 1e-8, "weight_decay": 0.0, "optimizer": "adamw"}


def _edited(text: str, fault_id: str) -> str:
    for edit in FAULTS[fault_id].edits:
        if isinstance(edit, SetLine):
            text, n = re.subn(rf"^(\s*){re.escape(edit.key)}{edit.sep}.*$", rf"\g<1>{edit.key}{edit.sep} {edit.value}",
                              text, count=1, flags=re.M)
            assert n == 1
        else:
            assert isinstance(edit, Replace) and text.count(edit.old) == 1
            text = text.replace(edit.old, edit.new)
    return text


def _hf_recipe(tmp_path: Path) -> dict:
    (tmp_path / "src").mkdir(exist_ok=True)
    return source_recipe(tmp_path / "src")  # no training code: the HF Trainer's conventional recipe


def test_the_hf_trainers_own_defaults_are_read_from_transformers():
    d = hf_trainer_defaults()
    assert d["values"] == {"max_grad_norm": 1.0, "adam_epsilon": 1e-8, "weight_decay": 0.0}
    assert d["where"].endswith("training_args.py")


def test_a_source_without_training_code_and_the_fixtures_own_trainers_give_the_hf_recipe(tmp_path):
    assert _hf_recipe(tmp_path)["basis"] == "HF Trainer defaults (no training code)"
    for name in ("qwen_vl_chat", "deepseek_vl_v2", "phi3_v"):
        recipe = source_recipe(FIXTURES / name)
        assert recipe["basis"] == "own training code (HF Trainer)", name
        assert recipe["values"] == {"max_grad_norm": 1.0, "adam_epsilon": 1e-8, "weight_decay": 0.0}


def test_the_sources_own_values_win_over_the_defaults(tmp_path):
    src = tmp_path / "src"
    (src / "finetune").mkdir(parents=True)
    (src / "finetune" / "train.py").write_text(
        "import argparse\nfrom transformers import Trainer, TrainingArguments\n"
        "ap = argparse.ArgumentParser()\nap.add_argument('--weight_decay', type=float, default=0.05)\n"
        "args = ap.parse_args()\n"
        "t = TrainingArguments(output_dir='o', weight_decay=args.weight_decay, max_grad_norm=0.5)\n"
        "Trainer(model=None, args=t)\n")
    recipe = source_recipe(src)
    assert recipe["values"] == {"max_grad_norm": 0.5, "adam_epsilon": 1e-8, "weight_decay": 0.05}
    assert recipe["where"]["max_grad_norm"] == "train.py:6"
    (src / "finetune" / "run.sh").write_text("python finetune/train.py --adam_epsilon 1e-6 --weight_decay=0.1\n")
    recipe = source_recipe(src)
    assert recipe["values"]["adam_epsilon"] == 1e-6 and recipe["values"]["weight_decay"] == 0.1
    # a source that builds its own optimizer is not read: nothing is compared
    (src / "finetune" / "train.py").write_text("import torch\nopt = torch.optim.AdamW([], lr=1e-4, eps=1e-3)\n")
    (src / "finetune" / "run.sh").unlink()
    assert source_recipe(src)["basis"] is None
    assert departures({"clip_grad": 0}, DEFAULTS, source_recipe(src)) == ([], [])


def test_the_green_yaml_keeps_the_sources_recipe(tmp_path):
    cfg = yaml.safe_load((STANDIN / CONFIG).read_text())
    found, examined = departures(cfg["training"], DEFAULTS, _hf_recipe(tmp_path))
    assert found == [] and examined == ["clip_grad", "adam_eps", "weight_decay"]


@pytest.mark.parametrize("fault_id,key", [("h4-config-clip-grad-off", "clip_grad"),
                                          ("h4-config-weight-decay-everywhere", "weight_decay"),
                                          ("h4-config-adam-eps-exponent-lost", "adam_eps")])
def test_each_optimizer_fault_departs_from_the_sources_recipe(tmp_path, fault_id, key):
    cfg = yaml.safe_load(_edited((STANDIN / CONFIG).read_text(), fault_id))
    (f,) = recipe_findings(cfg, DEFAULTS, _hf_recipe(tmp_path), CONFIG)
    assert f["code"] == "optimizer-recipe" and f["path"] == f"training.{key}" and CONFIG in f["message"]
    # a decay against the HF Trainer's default (the source states none of its own) is the user's choice: a warning
    assert f["severity"] == ("warning" if key == "weight_decay" else "error")
    assert classify(f"[optimizer-recipe] {f['path']}: {f['message']}", finding_codes=["optimizer-recipe"]).owner \
        == "config"


def test_weight_decay_against_the_sources_own_zero_is_an_error(tmp_path):
    src = tmp_path / "own"
    src.mkdir()
    (src / "train.sh").write_text("torchrun finetune.py --weight_decay 0.0 --max_grad_norm 1.0\n")
    cfg = yaml.safe_load((STANDIN / CONFIG).read_text())
    cfg["training"]["weight_decay"] = 0.1
    (f,) = recipe_findings(cfg, DEFAULTS, source_recipe(src), CONFIG)
    assert f["severity"] == "error" and f["path"] == "training.weight_decay" and "train.sh" in f["message"]


@pytest.mark.parametrize("knobs", [{"adam_eps": 1e-6}, {"adam_eps": 1e-5}, {"clip_grad": 5.0},
                                   {"optimizer": "sgd", "adam_eps": 1.0}])
def test_choices_within_the_recipe_are_not_departures(tmp_path, knobs):
    cfg = yaml.safe_load((STANDIN / CONFIG).read_text())
    cfg["training"].update(knobs)
    assert recipe_findings(cfg, DEFAULTS, _hf_recipe(tmp_path), CONFIG) == []


def test_a_knob_the_yaml_leaves_out_is_the_targets_default(tmp_path):
    cfg = {"training": {"optimizer": "adamw"}}
    assert recipe_findings(cfg, {**DEFAULTS, "clip_grad": 0.0}, _hf_recipe(tmp_path), CONFIG)[0]["path"] == \
        "training.clip_grad"
    assert recipe_findings(cfg, {}, _hf_recipe(tmp_path), CONFIG) == []  # nothing known: nothing compared


def test_the_draft_writes_the_sources_recipe_over_the_examples(workspace, tmp_path):
    from tests.agent.test_draft_config import PLAN, TREE

    target = tmp_path / "target"
    (target / "examples" / "qwen3vl").mkdir(parents=True)
    # the real MindSpeed-MM examples' recipe: no clipping
    text = (workspace["target"] / CONFIG).read_text().replace("clip_grad: 1.0", "clip_grad: 0.0")
    (target / CONFIG).write_text(text)
    baseline, _, _ = load_baseline(target, CONFIG)
    notes: list[str] = []
    cfg = draft_config(PLAN, baseline, source=workspace["source"], data_json=workspace["source"] / "data" /
                       "train.json", tree=TREE, notes=notes)
    assert cfg["training"]["clip_grad"] == 1.0 and any("training.clip_grad" in n for n in notes)
    assert recipe_findings(cfg, DEFAULTS, source_recipe(workspace["source"]), CONFIG) == []


def test_the_rules_repair_sets_the_drafts_value_or_the_targets_default(tmp_path):
    recipe = _hf_recipe(tmp_path)
    green = yaml.safe_load((STANDIN / CONFIG).read_text())
    for fault_id in ("h4-config-clip-grad-off", "h4-config-adam-eps-exponent-lost"):
        cfg = yaml.safe_load(_edited((STANDIN / CONFIG).read_text(), fault_id))
        assert restore_values(cfg, recipe_findings(cfg, DEFAULTS, recipe, CONFIG), green)
        assert recipe_findings(cfg, DEFAULTS, recipe, CONFIG) == []


def test_the_targets_own_defaults_come_from_its_schema(tmp_path):
    from msmigrate.tools.target_checks import section_defaults
    from msmigrate.tools.yaml_validator.schema import load_schema_file

    schema = load_schema_file(Path(__file__).parents[1] / "tools" / "test_yaml_validator_real_schema.json")
    defaults = section_defaults(schema, "training")
    assert (defaults["clip_grad"], defaults["adam_eps"], defaults["weight_decay"]) == (1.0, 1e-8, 0.0)
    # the real MindSpeed-MM examples' `clip_grad: 0.0` departs from the HF recipe; their default would not
    assert [f["path"] for f in recipe_findings({"training": {"clip_grad": 0.0}}, defaults, _hf_recipe(tmp_path),
                                               CONFIG)] == ["training.clip_grad"]
    assert recipe_findings({"training": {}}, defaults, _hf_recipe(tmp_path), CONFIG) == []


def _loader(cfg: dict) -> dict:
    return cfg["data"]["dataloader_param"]


def test_the_order_the_source_draws_its_records_in_is_read_from_the_source_or_the_hf_trainer(tmp_path):
    from msmigrate.tools.repo_reader.training_recipe import source_data_order

    (tmp_path / "src").mkdir()
    hf = source_data_order(tmp_path / "src")  # no training code: the HF Trainer's sampler
    assert hf["shuffled"] is True and "RandomSampler" in hf["where"] and "trainer.py:" in hf["where"]
    own = tmp_path / "own"
    (own / "finetune").mkdir(parents=True)
    (own / "finetune" / "train.py").write_text(
        "from torch.utils.data import DataLoader\n\ndef main(ds):\n    return DataLoader(ds, batch_size=4, shuffle=False)\n")
    assert source_data_order(own) == {"shuffled": False, "where": "train.py:4", "why_not": None}
    (own / "finetune" / "train.py").write_text(
        "from transformers import Trainer\n\nclass T(Trainer):\n    def _get_train_sampler(self, ds=None):\n"
        "        return SequentialSampler(ds)\n")
    assert source_data_order(own)["shuffled"] is False
    (own / "finetune" / "train.py").write_text(
        "from transformers import Trainer\n\nclass T(Trainer):\n    def _get_train_sampler(self, ds=None):\n"
        "        return MyCurriculum(ds)\n")
    assert source_data_order(own)["shuffled"] is None  # a rule of its own: not read, never guessed
    (own / "finetune" / "train.py").write_text("def main(model, ds):\n    for x in ds:\n        model(x)\n")
    assert source_data_order(own)["shuffled"] is None  # its own loop, its own order
    (own / "run.sh").write_text("torchrun finetune/train.py --train_sampling_strategy sequential\n")
    assert source_data_order(own) == {"shuffled": False, "where": "run.sh", "why_not": None}


def test_a_sampler_in_another_order_than_the_sources_is_g3s_and_the_draft_and_repair_set_it_back(tmp_path):
    from msmigrate.agent.routes.fsdp2.optimizer_recipe import data_order_findings
    from msmigrate.tools.repo_reader.training_recipe import source_data_order

    (tmp_path / "src").mkdir()
    order = source_data_order(tmp_path / "src")
    green = yaml.safe_load((STANDIN / CONFIG).read_text())
    assert _loader(green)["shuffle"] is True and data_order_findings(green, order, CONFIG) == []
    cfg = yaml.safe_load((STANDIN / CONFIG).read_text())
    _loader(cfg)["shuffle"] = False
    (f,) = data_order_findings(cfg, order, CONFIG)
    assert (f["severity"], f["code"], f["path"], f["source_value"]) == \
        ("error", "data-order-recipe", "data.dataloader_param.shuffle", True)
    assert "file order" in f["message"] and f"shuffle: true in {CONFIG}" in f["message"]
    assert classify(f"[{f['code']}] {f['path']}: {f['message']}", finding_codes=[f["code"]]).owner == "config"
    assert restore_values(cfg, [f], green) and data_order_findings(cfg, order, CONFIG) == []
    # nothing read of the source's order, or no bool in the YAML: nothing compared
    assert data_order_findings(cfg | {"data": {"dataloader_param": {}}}, order, CONFIG) == []
    assert data_order_findings(yaml.safe_load((STANDIN / CONFIG).read_text()),
                               {"shuffled": None, "where": None}, CONFIG) == []


def test_the_draft_follows_the_sources_order_over_the_examples(workspace, tmp_path):
    from tests.agent.test_draft_config import PLAN, TREE

    target = tmp_path / "target"
    (target / "examples" / "qwen3vl").mkdir(parents=True)
    text = (workspace["target"] / CONFIG).read_text().replace("shuffle: true", "shuffle: false")
    (target / CONFIG).write_text(text)
    baseline, _, _ = load_baseline(target, CONFIG)
    notes: list[str] = []
    cfg = draft_config(PLAN, baseline, source=workspace["source"], data_json=workspace["source"] / "data" /
                       "train.json", tree=TREE, notes=notes)
    assert _loader(cfg)["shuffle"] is True and any("data.dataloader_param.shuffle" in n for n in notes)


def test_what_the_source_trains_is_read_from_the_source_or_the_hf_trainers_optimizer(tmp_path):
    from msmigrate.tools.repo_reader.trained_parts import source_trained_parts

    (tmp_path / "src").mkdir()
    hf = source_trained_parts(tmp_path / "src")  # no training code: the HF Trainer trains what requires a gradient
    assert hf["all"] is True and "trainer.py:" in hf["where"] and hf["why_not"] is None
    own = tmp_path / "own"
    (own / "finetune").mkdir(parents=True)
    (own / "finetune" / "train.py").write_text(
        "from transformers import Trainer, TrainingArguments\n\ndef main(model):\n"
        "    model.visual.requires_grad_(False)\n    Trainer(model, TrainingArguments('o')).train()\n")
    found = source_trained_parts(own)
    assert found["all"] is None and found["where"] == "train.py:4"  # its own choice: not read, never guessed
    (own / "finetune" / "train.py").write_text(
        "from transformers import Trainer, TrainingArguments\n\ndef main(model):\n"
        "    Trainer(model, TrainingArguments('o')).train()\n")
    assert source_trained_parts(own)["all"] is True
    (own / "modeling_x.py").write_text("class M:\n    def __init__(self):\n        self.tower.requires_grad = False\n")
    assert source_trained_parts(own)["where"] == "modeling_x.py:3"  # the model code it ships freezes a part
    (own / "modeling_x.py").unlink()
    (own / "run.sh").write_text("torchrun finetune/train.py --freeze_vision_tower True\n")
    assert "--freeze_vision_tower" in source_trained_parts(own)["why_not"]
    (own / "run.sh").unlink()
    (own / "finetune" / "train.py").write_text("import torch\n\ndef main(model, ds):\n"
                                               "    opt = torch.optim.AdamW(model.parameters())\n")
    assert source_trained_parts(own)["all"] is None  # its own loop: not read


def test_a_freeze_the_source_does_not_have_is_g3s_and_the_repair_sets_it_back(tmp_path):
    from msmigrate.agent.routes.fsdp2.optimizer_recipe import freeze_findings
    from msmigrate.tools.repo_reader.trained_parts import source_trained_parts

    (tmp_path / "src").mkdir()
    trained = source_trained_parts(tmp_path / "src")
    green = yaml.safe_load((STANDIN / CONFIG).read_text())
    assert green["model"]["freeze"] == [] and freeze_findings(green, trained, CONFIG) == []
    cfg = yaml.safe_load((STANDIN / CONFIG).read_text())
    cfg["model"]["freeze"] = ["model.visual"]
    (f,) = freeze_findings(cfg, trained, CONFIG)
    assert (f["severity"], f["code"], f["path"], f["value"]) == ("error", "freeze-recipe", "model.freeze",
                                                                 ["model.visual"])
    assert "model.visual" in f["message"] and f"model.freeze: [] in {CONFIG}" in f["message"]
    verdict = classify(f"[{f['code']}] {f['path']}: {f['message']}", finding_codes=[f["code"]])
    assert verdict.owner == "config"
    assert restore_values(cfg, [f], green) and freeze_findings(cfg, trained, CONFIG) == []
    # a mapping's true entries freeze; a source that decides what trains itself: nothing compared
    assert freeze_findings({"model": {"freeze": {"model.visual": True}}}, trained, CONFIG)
    assert freeze_findings({"model": {"freeze": {"model.visual": False}}}, trained, CONFIG) == []
    assert freeze_findings(cfg | {"model": {"freeze": ["model.visual"]}}, {"all": None, "where": None}, CONFIG) == []


def test_a_named_key_that_departs_from_the_draft_is_set_back_and_one_the_draft_lacks_goes():
    from msmigrate.agent.routes.fsdp2.rules.autofix import restore_named

    reference = yaml.safe_load((STANDIN / CONFIG).read_text())
    cfg = yaml.safe_load((STANDIN / CONFIG).read_text())
    cfg["parallel"]["ulysses_parallel_size"] = 2
    cfg["training"]["made_up_knob"] = 3
    keys = ["parallel.tensor_parallel_size", "parallel.ulysses_parallel_size", "training.made_up_knob"]
    done = restore_named(cfg, keys, reference)
    assert cfg["parallel"]["ulysses_parallel_size"] == reference["parallel"]["ulysses_parallel_size"]
    assert "made_up_knob" not in cfg["training"] and len(done) == 2  # tensor_parallel_size is the draft's: untouched
    assert restore_named(cfg, keys, reference) == [] and restore_named(cfg, keys, None) == []
