"""Strict YAML validator: the clean base config passes; each broken variant is caught with the right code AND path.

Schemas: the committed snapshot of the real target's schema (probe output, see the JSON's ``note``) and, when the
stand-in generator exists, the schema probed from a freshly written stand-in (once per session).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
import yaml

from msmigrate.tools.runtime import run_probe
from msmigrate.tools.yaml_validator import ModuleTree, load_schema_file, validate_config
from msmigrate.tools.yaml_validator.tool import validate_config_from_files, validate_config_tool

HERE = Path(__file__).parent
REAL_SCHEMA = HERE / "test_yaml_validator_real_schema.json"

BASE = {
    "parallel": {
        "tensor_parallel_size": 1,
        "fully_shard_parallel_size": "auto",
        "fsdp_plan": {
            "apply_modules": ["model.visual.blocks.{*}", "model.visual", "model.language_model.embed_tokens",
                              "model.language_model.layers.{*}", "model.language_model", "lm_head"],
            "param_dtype": "fp32",
        },
    },
    "data": {
        "dataset_param": {
            "dataset_type": "huggingface",
            "attr": {"images": "images", "messages": "messages", "role_tag": "role", "content_tag": "content",
                     "user_tag": "user", "assistant_tag": "assistant"},
            "preprocess_parameters": {"model_name_or_path": "/models/tiny"},
            "basic_parameters": {"template": "qwen2vl", "cutoff_len": 256, "dataset_dir": "/data",
                                 "dataset": "/data/train.json"},
        },
        "dataloader_param": {"dataloader_mode": "sampler", "sampler_type": "BaseRandomBatchSampler",
                             "shuffle": True, "drop_last": True, "pin_memory": False, "num_workers": 0,
                             "collate_param": {"collator_id": "qwen3vl", "ignore_pad_token_for_loss": True}},
    },
    "model": {"model_id": "tiny_vl", "model_name_or_path": "/models/tiny", "attn_implementation": "sdpa",
              "freeze": ["model.visual"]},
    "features": {"loss_cfg": {"loss_type": "default"}, "recompute": True,
                 "recompute_plan": {"apply_modules": ["model.language_model.layers.{*}"]}},
    "training": {"micro_batch_size": 1, "lr": 1.0e-4, "train_iters": 20, "seed": 42, "adam_fused": False,
                 "init_model_with_meta_device": True,
                 "plugin": ["mindspeed_mm/fsdp/models/tiny_vl", "mindspeed_mm/fsdp/data/datasets/huggingface"]},
}

INVENTORY = {
    "model_ids": {"tiny_vl": {"file": "mindspeed_mm/fsdp/models/tiny_vl/modeling_tiny.py", "line": 12},
                  "qwen3_vl_moe": {"file": "mindspeed_mm/fsdp/models/qwen3vl/modeling_qwen3_vl_moe.py", "line": 9}},
    "dataset_types": {"huggingface": {"file": "mindspeed_mm/fsdp/data/datasets/huggingface/qwen2vl_dataset.py"}},
    "templates": {"qwen2vl": "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py",
                  "qwen3_vl_nothink": "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py"},
    "mm_plugins": {"qwen2_vl": "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"},
    "collators": {"qwen3vl": "mindspeed_mm/fsdp/data/dataloader/data_collator.py"},
}


def _tree() -> ModuleTree:
    names, classes = ["", "model", "model.visual", "model.visual.blocks"], {"": "TinyVL", "model": "TinyVLModel"}
    for i in range(2):
        names += [f"model.visual.blocks.{i}", f"model.visual.blocks.{i}.proj"]
        classes.update({f"model.visual.blocks.{i}": "VisionBlock", f"model.visual.blocks.{i}.proj": "Linear"})
    names += ["model.visual.merger", "model.language_model", "model.language_model.embed_tokens",
              "model.language_model.layers"]
    for i in range(3):
        names += [f"model.language_model.layers.{i}", f"model.language_model.layers.{i}.mlp",
                  f"model.language_model.layers.{i}.mlp.up_proj"]
        classes.update({f"model.language_model.layers.{i}": "DecoderLayer",
                        f"model.language_model.layers.{i}.mlp": "MLP",
                        f"model.language_model.layers.{i}.mlp.up_proj": "Linear"})
    names += ["model.language_model.norm", "lm_head"]
    classes.update({"lm_head": "Linear", "model.visual.merger": "Merger", "model.language_model.norm": "RMSNorm"})
    return ModuleTree(names=names, classes=classes, no_split_modules=["DecoderLayer", "VisionBlock"],
                      accepts_past_key_values={"DecoderLayer": True, "VisionBlock": True, "Linear": False,
                                               "MLP": False})


def _probe_standin_schema(tmp_root: Path) -> tuple[dict, Path] | None:
    try:
        from msmigrate.testbeds.standin import write_standin  # written concurrently by another part of the project
    except ImportError:
        return None
    try:
        dest = write_standin(tmp_root / "standin", with_assets=False)  # assets are not needed to read configs
    except TypeError:
        dest = write_standin(tmp_root / "standin")
    result = run_probe(sys.executable, "config_schema", ["--target-root", str(dest)], timeout=120)
    assert result.ok, result.error
    return result.data["result"]["schema"], dest


@pytest.fixture(scope="session")
def standin(tmp_path_factory):
    return _probe_standin_schema(tmp_path_factory.mktemp("yaml_validator"))


@pytest.fixture(scope="session", params=["real-snapshot", "standin"])
def schema(request, standin):
    if request.param == "real-snapshot":
        return load_schema_file(REAL_SCHEMA)
    if standin is None:
        pytest.skip("stand-in generator not available")
    return standin[0]


@pytest.fixture
def target_root(tmp_path):
    (tmp_path / "mindspeed_mm/fsdp/models/tiny_vl").mkdir(parents=True)
    (tmp_path / "mindspeed_mm/fsdp/models/tiny_vl/__init__.py").write_text("")
    (tmp_path / "mindspeed_mm/fsdp/data/datasets/huggingface").mkdir(parents=True)  # namespace package: fine
    return tmp_path


def run(cfg, schema, target_root=None, **kw):
    text = cfg if isinstance(cfg, str) else yaml.safe_dump(cfg, sort_keys=False)
    return validate_config(text, schema=schema, inventory=kw.pop("inventory", INVENTORY),
                           module_tree=kw.pop("module_tree", _tree()), target_root=target_root, **kw)


def codes(result) -> set[tuple[str, str]]:
    return {(f["code"], f["path"]) for f in result.data["findings"]}


def test_base_config_is_clean(schema, target_root):
    result = run(BASE, schema, target_root, device="cpu")
    assert result.ok, result.data["findings"]
    assert result.data["findings"] == []


# --------------------------------------------------------------------------------------------- broken variants
def _set(cfg, dotted, value):
    *parents, last = dotted.split(".")
    node = cfg
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value


def _del(cfg, dotted):
    *parents, last = dotted.split(".")
    node = cfg
    for p in parents:
        node = node[p]
    del node[last]


def v_set(dotted, value):
    return lambda c: _set(c, dotted, value)


def v_del(dotted):
    return lambda c: _del(c, dotted)


def v_rename_section(old, new):
    return lambda c: c.__setitem__(new, c.pop(old))


def v_move(src, dst):
    def apply(c):
        value = c
        for p in src.split("."):
            value = value[p]
        _del(c, src)
        _set(c, dst, value)
    return apply


VARIANTS = [
    # (id, mutation, expected code, expected path, substring expected in the suggestion or None)
    ("misplaced-loss_cfg", v_move("features.loss_cfg", "model.loss_cfg"), "misplaced-key", "model.loss_cfg",
     "features.loss_cfg"),
    ("typo-section", v_rename_section("training", "trainnig"), "unknown-key", "trainnig", "`training`"),
    ("typo-key", v_move("training.train_iters", "training.train_iter"), "unknown-key", "training.train_iter",
     "training.train_iters"),
    ("recompute-under-model", v_move("features.recompute_plan", "model.recompute_plan"), "misplaced-key",
     "model.recompute_plan", "features.recompute_plan"),
    ("near-typo-beats-elsewhere", v_set("features.chunkloss_plan", {"apply_modules": ["lm_head"]}), "unknown-key",
     "features.chunkloss_plan.apply_modules", "features.chunkloss_plan.apply_module"),
    ("bridge-route-spelling", v_set("parallel.context_parallel_size", 1), "unknown-key",
     "parallel.context_parallel_size", "parallel.ulysses_parallel_size"),
    ("similar-key-other-section", v_set("model.loss_cfgs", {"loss_type": "default"}), "unknown-key",
     "model.loss_cfgs", "features.loss_cfg"),
    ("misplaced-pregather", v_set("parallel.pregather", True), "misplaced-key", "parallel.pregather",
     "parallel.fsdp_plan.pregather"),
    ("recompute-switch-under-model", v_move("features.recompute", "model.recompute"), "misplaced-key",
     "model.recompute", "did you mean `features.recompute` or"),
    ("missing-sampler_type", v_del("data.dataloader_param.sampler_type"), "missing-required",
     "data.dataloader_param.sampler_type", None),
    ("missing-pin_memory", v_del("data.dataloader_param.pin_memory"), "missing-required",
     "data.dataloader_param.pin_memory", None),
    ("missing-dataset_type", v_del("data.dataset_param.dataset_type"), "missing-required",
     "data.dataset_param.dataset_type", None),
    ("missing-data-section", v_del("data"), "missing-required", "data.dataloader_param.drop_last", None),
    ("lr-scaling-without-match", v_set("training.lr_scaling_plan", [{"scale": 2.0}]), "missing-required",
     "training.lr_scaling_plan[0].match", None),
    ("bad-literal-attn", v_set("model.attn_implementation", "flash"), "bad-literal", "model.attn_implementation",
     None),
    ("bad-literal-optimizer", v_set("training.optimizer", "sgd"), "bad-literal", "training.optimizer", None),
    ("plugin-not-a-list", v_set("training.plugin", "mindspeed_mm/fsdp/models/tiny_vl"), "type-mismatch",
     "training.plugin", None),
    ("cutoff-not-int", v_set("data.dataset_param.basic_parameters.cutoff_len", "long"), "type-mismatch",
     "data.dataset_param.basic_parameters.cutoff_len", None),
    ("template-is-int", v_set("data.dataset_param.basic_parameters.template", 7), "type-mismatch",
     "data.dataset_param.basic_parameters.template", None),
    ("recompute-not-bool", v_set("features.recompute", "sometimes"), "type-mismatch", "features.recompute", None),
    ("model-id-unregistered", v_set("model.model_id", "tiny-vl"), "model-id-unregistered", "model.model_id",
     "tiny_vl"),
    ("model-id-outside-plugin", v_set("model.model_id", "qwen3_vl_moe"), "model-id-outside-plugin",
     "model.model_id", "mindspeed_mm/fsdp/models/qwen3vl"),
    ("dataset-type-unregistered", v_set("data.dataset_param.dataset_type", "hf"), "dataset-type-unregistered",
     "data.dataset_param.dataset_type", None),
    ("template-unregistered", v_set("data.dataset_param.basic_parameters.template", "qwen2_vl"),
     "template-unregistered", "data.dataset_param.basic_parameters.template", "qwen2vl"),
    ("collator-unregistered", v_set("data.dataloader_param.collate_param.collator_id", "internvl"),
     "collator-unregistered", "data.dataloader_param.collate_param.collator_id", None),
    ("collator-conflict", v_set("data.dataloader_param.collate_param.model_name", "step3_vl"), "collator-conflict",
     "data.dataloader_param.collate_param.model_name", "collator_id"),
    ("collator-missing", v_del("data.dataloader_param.collate_param.collator_id"), "collator-missing",
     "data.dataloader_param.collate_param.collator_id", None),
    ("plugin-path-missing", v_set("training.plugin", ["mindspeed_mm/fsdp/models/tiny_vl",
                                                      "mindspeed_mm.fsdp.data.datasets.hugingface"]),
     "plugin-not-importable", "training.plugin[1]", None),
    ("plugin-empty", v_set("training.plugin", []), "plugin-missing", "training.plugin", None),
    ("loss-type", v_set("features.loss_cfg.loss_type", "mean"), "bad-loss-type", "features.loss_cfg.loss_type",
     None),
    ("tp-2", v_set("parallel.tensor_parallel_size", 2), "tp-unsupported", "parallel.tensor_parallel_size", None),
    ("drop-last-false", v_set("data.dataloader_param.drop_last", False), "bad-dataloader-value",
     "data.dataloader_param.drop_last", None),
    ("bad-dtype", v_set("parallel.fsdp_plan.param_dtype", "bfloat16"), "bad-dtype", "parallel.fsdp_plan.param_dtype",
     None),
    ("dead-fsdp-pattern", v_set("parallel.fsdp_plan.apply_modules",
                                ["model.visual.blocks.{*}", "model.language_model.layer.{*}",
                                 "model.language_model.layers.{*}", "lm_head"]),
     "pattern-no-match", "parallel.fsdp_plan.apply_modules[1]", "model.language_model.layers.{*}"),
    ("dead-freeze-pattern", v_set("model.freeze", ["visual"]), "pattern-no-match", "model.freeze[0]", None),
    ("dead-hook-pattern", v_set("parallel.fsdp_plan.hook_modules", ["model.vision"]), "pattern-no-match",
     "parallel.fsdp_plan.hook_modules[0]", None),
    ("bad-brace", v_set("features.recompute_plan.apply_modules", ["model.language_model.layers.{n}"]),
     "pattern-invalid", "features.recompute_plan.apply_modules[0]", None),
    ("no-split-uncovered", v_set("parallel.fsdp_plan.apply_modules",
                                 ["model.visual", "model.language_model.layers.{0-1}", "lm_head"]),
     "no-split-uncovered", "parallel.fsdp_plan.apply_modules", "{*}"),
    ("recompute-linear", v_set("features.recompute_plan.apply_modules", ["model.language_model.layers.{*}.mlp"]),
     "recompute-rejects-past-key-values", "features.recompute_plan.apply_modules[0]", None),
    ("two-no-split-classes-uncovered", v_set("parallel.fsdp_plan.apply_modules", ["model", "lm_head"]),
     "no-split-uncovered", "parallel.fsdp_plan.apply_modules", None),
    ("weak-iters", v_set("training.train_iters", 1), "weakened-train-iters", "training.train_iters", None),
    ("weak-fsdp", v_set("parallel.fully_shard_parallel_size", 1), "weakened-no-fsdp",
     "parallel.fully_shard_parallel_size", None),
    ("weak-lr", v_set("training.lr", 0.0), "weakened-zero-lr", "training.lr", None),
    ("weak-freeze-all", v_set("model.freeze", ["model", "lm_head"]), "weakened-all-frozen", "model.freeze", None),
    # value ranges (ranges.py): the target's own post-init checks where it states one, else generic rules
    ("micro-batch-zero", v_set("training.micro_batch_size", 0), "value-out-of-range", "training.micro_batch_size",
     "positive"),
    ("grad-accum-zero", v_set("training.gradient_accumulation_steps", 0), "value-out-of-range",
     "training.gradient_accumulation_steps", "positive"),
    ("cutoff-negative", v_set("data.dataset_param.basic_parameters.cutoff_len", -1), "value-out-of-range",
     "data.dataset_param.basic_parameters.cutoff_len", None),
    ("warmup-percent", v_set("training.lr_warmup_ratio", 10), "value-out-of-range", "training.lr_warmup_ratio", "0.1"),
    # schedule arithmetic: a warmup ratio carried over from a recipe of another length spans the whole run
    ("warmup-whole-run", v_set("training.lr_warmup_ratio", 0.99), "value-out-of-range", "training.lr_warmup_ratio",
     "few percent"),
    ("warmup-most-of-run", lambda c: (_set(c, "training.lr_warmup_ratio", 0.6), _set(c, "training.train_iters", 40)),
     "value-out-of-range", "training.lr_warmup_ratio", "few percent"),
    ("gc-interval-negative", v_set("training.manual_gc_interval", -2), "value-out-of-range",
     "training.manual_gc_interval", "manual_gc_interval < 0"),
    # Adam's pair written in swapped order (β1 ≥ √β2), and a rate outside [0, 1)
    ("adam-betas-swapped", lambda c: (_set(c, "training.adam_beta1", 0.999), _set(c, "training.adam_beta2", 0.9)),
     "value-out-of-range", "training.adam_beta1", "swap"),
    ("adam-beta2-one", v_set("training.adam_beta2", 1.0), "value-out-of-range", "training.adam_beta2", "[0, 1)"),
    # freeze patterns that leave no block of any tower trainable (only heads / connectors would train)
    ("weak-freeze-backbone", v_set("model.freeze", ["model"]), "weakened-all-blocks-frozen", "model.freeze", None),
    ("weak-freeze-both-towers", v_set("model.freeze", ["model.visual.blocks", "model.language_model.layers"]),
     "weakened-all-blocks-frozen", "model.freeze", None),
]


@pytest.mark.parametrize("pair", [(0.9, 0.999), (0.9, 0.95), (0.9, 0.9), (0.0, 0.99)])
def test_usual_adam_pairs_pass(schema, target_root, pair):
    cfg = copy.deepcopy(BASE)
    cfg["training"].update(adam_beta1=pair[0], adam_beta2=pair[1])
    assert not [f for f in run(cfg, schema, target_root).data["findings"] if "beta" in f["path"]]


@pytest.mark.parametrize("ratio,iters", [(0.03, 20), (0.1, 20), (0.45, 20), (0.0, 5), (0.1, 5)])
def test_usual_warmups_pass(schema, target_root, ratio, iters):
    cfg = copy.deepcopy(BASE)
    cfg["training"].update(lr_warmup_ratio=ratio, train_iters=iters)
    assert not [f for f in run(cfg, schema, target_root).data["findings"] if "warmup" in f["message"]]


def test_warmup_share_not_judged_when_epochs_decide_the_length(schema, target_root):
    cfg = copy.deepcopy(BASE)
    cfg["training"].update(lr_warmup_ratio=0.99, train_epochs=1)
    assert not [f for f in run(cfg, schema, target_root).data["findings"] if "warmup" in f["message"]]


@pytest.mark.parametrize("freeze", [["model.visual"], ["model.language_model"], ["model.visual.blocks",
                                                                                  "model.language_model.embed_tokens"]])
def test_freezing_one_tower_is_a_choice_not_a_finding(schema, target_root, freeze):
    cfg = copy.deepcopy(BASE)
    cfg["model"]["freeze"] = freeze
    assert not [f for f in run(cfg, schema, target_root).data["findings"] if f["code"].startswith("weakened-all")]


@pytest.mark.parametrize("vid,mutate,code,path,hint", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_broken_variant_is_caught(schema, target_root, vid, mutate, code, path, hint):
    cfg = copy.deepcopy(BASE)
    mutate(cfg)
    result = run(cfg, schema, target_root)
    assert not result.ok, f"{vid} passed"
    found = [f for f in result.data["findings"] if f["code"] == code and f["path"] == path]
    assert found, f"{vid}: expected ({code}, {path}); got {sorted(codes(result))}"
    assert found[0]["severity"] == "error"
    if hint:
        assert hint in (found[0]["suggestion"] or ""), found[0]
    if path.split(".")[0] in cfg and path != "data.dataloader_param.drop_last":
        assert found[0]["line"] is not None


def test_range_checks_come_from_the_target_where_it_states_them(schema, target_root):
    """The real snapshot's TrainingArguments check `val_micro_batch_size <= 0` in its post-init: reported with the
    target's own message; a value the target accepts (`val_interval: 0`, `num_workers: 0`) is not flagged."""
    cfg = copy.deepcopy(BASE)
    cfg["training"].update(val_interval=0)
    cfg["data"]["dataloader_param"]["num_workers"] = 0
    assert not [f for f in run(cfg, schema, target_root).data["findings"] if f["code"] == "value-out-of-range"]
    checks = schema["fields"]["training"]["type"].get("checks") or []
    if not any("val_micro_batch_size" in c["when"] for c in checks):
        pytest.skip("this schema's TrainingArguments states no val_micro_batch_size check")
    cfg["training"]["val_micro_batch_size"] = 0
    found = [f for f in run(cfg, schema, target_root).data["findings"] if f["code"] == "value-out-of-range"]
    assert [f["path"] for f in found] == ["training.val_micro_batch_size"], found
    assert "the target rejects this" in found[0]["message"] and "val_micro_batch_size" in found[0]["message"]


def test_missing_data_section_lists_all_required_keys(schema):
    cfg = copy.deepcopy(BASE)
    del cfg["data"]
    got = codes(run(cfg, schema))
    for key in ("dataloader_mode", "sampler_type", "shuffle", "drop_last", "pin_memory"):
        assert ("missing-required", f"data.dataloader_param.{key}") in got
    assert ("missing-required", "data.dataset_param.dataset_type") in got


# --------------------------------------------------------------------------------------------- YAML gotchas
def test_pattern_in_flow_list_is_the_alias_error(schema):
    text = yaml.safe_dump(BASE, sort_keys=False).replace(
        "lm_head\n", "lm_head\n    hook_modules: [model.visual.blocks.{*}]\n", 1)
    result = run(text, schema)
    (f,) = [f for f in result.data["findings"] if f["code"] == "yaml-unquoted-pattern"]
    assert "while scanning an alias" in f["message"]
    assert text.splitlines()[f["line"] - 1].strip().startswith("hook_modules")


def test_duplicate_anchor_and_duplicate_key(schema):
    dup_anchor = "a: &X 1\nb: &X 2\n"
    assert ("yaml-duplicate-anchor", "") in codes(run(dup_anchor, schema))
    text = yaml.safe_dump(BASE, sort_keys=False) + "training:\n  train_iters: 2\n"
    result = run(text, schema)
    dup = [f for f in result.data["findings"] if f["code"] == "yaml-duplicate-key"]
    assert dup and dup[0]["path"] == "training" and dup[0]["line"] == len(text.splitlines()) - 1


def test_anchors_and_merge_keys_are_resolved(schema, target_root):
    text = yaml.safe_dump(BASE, sort_keys=False)
    first, rest = text.split("model_name_or_path: /models/tiny", 1)  # data.preprocess_parameters comes first
    text = first + "model_name_or_path: &P /models/tiny" + rest.replace("model_name_or_path: /models/tiny",
                                                                         "model_name_or_path: *P")
    text = "defaults: &LOADER\n  num_workers: 0\n" + text  # an anchor must precede its aliases
    text = text.replace("    num_workers: 0\n", "    <<: *LOADER\n", 1)
    assert "*P" in text and "<<: *LOADER" in text
    result = run(text, schema, target_root)
    # the helper section `defaults:` is itself unknown; everything reached through anchors/merges is fine
    assert {(f["code"], f["path"]) for f in result.data["findings"]} == {("unknown-key", "defaults")}


# --------------------------------------------------------------------------------------------- allowed dynamics
def test_known_dynamic_fields_and_collator_extras_are_accepted(schema, target_root):
    cfg = copy.deepcopy(BASE)
    cfg["data"]["dataloader_param"]["collate_param"]["padding_side"] = "left"  # forwarded to the collator
    assert run(cfg, schema, target_root).ok
    cfg["data"]["dataloader_param"]["collate_param"]["collator_idd"] = "qwen3vl"
    result = run(cfg, schema, target_root)
    assert result.ok  # a warning only: the collator receives it as a kwarg
    assert ("unknown-key", "data.dataloader_param.collate_param.collator_idd") in codes(result)


def test_model_extras_are_warnings_and_extra_allowed_silences_them(schema, target_root):
    cfg = copy.deepcopy(BASE)
    cfg["model"]["vision_tower_depth"] = 2  # custom-path models receive ModelArguments and may read it
    result = run(cfg, schema, target_root)
    assert result.ok and ("unknown-key-passthrough", "model.vision_tower_depth") in codes(result)
    assert run(cfg, schema, target_root, extra_allowed=("model.vision_*",)).data["findings"] == []


def test_flash_attention_off_npu_is_a_warning(schema, target_root):
    cfg = copy.deepcopy(BASE)
    del cfg["model"]["attn_implementation"]  # default is flash_attention_2
    result = run(cfg, schema, target_root, device="cpu")
    assert result.ok and ("flash-attn-off-npu", "model.attn_implementation") in codes(result)
    assert run(cfg, schema, target_root, device="npu").data["findings"] == []


def test_pydantic_lax_coercions_are_not_flagged(schema, target_root):
    cfg = copy.deepcopy(BASE)
    cfg["training"]["lr"] = "1e-4"  # numeric string → float
    cfg["data"]["dataloader_param"]["shuffle"] = "yes"
    cfg["training"]["seed"] = 42.0
    assert run(cfg, schema, target_root).ok


def test_repo_reader_list_shape_inventory(schema, target_root):
    as_lists = {k: [{"id": i, "file": (v["file"] if isinstance(v, dict) else v), "line": 1} for i, v in t.items()]
                for k, t in INVENTORY.items()}
    assert run(BASE, schema, target_root, inventory=as_lists).ok
    cfg = copy.deepcopy(BASE)
    cfg["model"]["model_id"] = "nope"
    assert ("model-id-unregistered", "model.model_id") in codes(run(cfg, schema, target_root, inventory=as_lists))


def test_disabled_feature_dead_pattern_is_only_a_warning(schema, target_root):
    cfg = copy.deepcopy(BASE)
    cfg["features"]["recompute"] = False
    cfg["features"]["recompute_plan"]["apply_modules"] = ["nothing.here"]
    result = run(cfg, schema, target_root)
    assert result.ok and ("pattern-no-match", "features.recompute_plan.apply_modules[0]") in codes(result)


# --------------------------------------------------------------------------------------------- stand-in examples
def test_standin_examples_pass(standin):
    if standin is None:
        pytest.skip("stand-in generator not available")
    schema, dest = standin
    examples = sorted((dest / "examples").rglob("*.yaml"))
    assert examples, "stand-in has no example YAMLs"
    for path in examples:
        result = validate_config(path, schema=schema, target_root=dest, device="cpu")
        errors = [f for f in result.data["findings"] if f["severity"] == "error"]
        assert not errors, f"{path.name}: {errors}"


# --------------------------------------------------------------------------------------------- tool wrapper
def test_tool_wrapper_reads_files(tmp_path, target_root):
    cfg = copy.deepcopy(BASE)
    cfg["model"]["loss_cfg"] = {"loss_type": "default"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "inv.json").write_text(json.dumps({"ok": True, "data": INVENTORY}))
    tree = _tree()
    (tmp_path / "tree.json").write_text(json.dumps(tree.__dict__))
    result = validate_config_from_files(str(tmp_path / "c.yaml"), str(REAL_SCHEMA), str(target_root),
                                        str(tmp_path / "inv.json"), str(tmp_path / "tree.json"), "cpu")
    assert not result.ok and ("misplaced-key", "model.loss_cfg") in codes(result)
    assert not validate_config_from_files(str(tmp_path / "missing.yaml"), str(REAL_SCHEMA)).ok
    tool = validate_config_tool()
    out = json.loads(tool.invoke({"config_path": str(tmp_path / "c.yaml"), "schema_path": str(REAL_SCHEMA)}))
    assert out["ok"] is False and any(f["code"] == "misplaced-key" for f in out["data"]["findings"])


STANDIN_EDITS = [
    # (id, old text, new text, code, path) on the stand-in's own qwen3vl example, registries scanned from its files
    ("misplaced-loss_cfg", "features:\n  loss_cfg:", "model:\n  loss_cfg:", "misplaced-key", "model.loss_cfg"),
    ("typo-section", "training:\n", "trainnig:\n", "unknown-key", "trainnig"),
    ("model-id-typo", "model_id: qwen3_vl\n", "model_id: qwen3vl\n", "model-id-unregistered", "model.model_id"),
    ("template-typo", "template: qwen3_vl_nothink", "template: qwen2_vl", "template-unregistered",
     "data.dataset_param.basic_parameters.template"),
    ("dataset-plugin-dropped", "    - mindspeed_mm/fsdp/data/datasets/huggingface\n", "", "dataset-type-outside-plugin",
     "data.dataset_param.dataset_type"),
    ("flow-list-pattern", "    apply_modules:\n      - model.visual.blocks.{*}\n      - model.language_model.layers.{*}",
     "    apply_modules: [model.visual.blocks.{*}, model.language_model.layers.{*}]", "yaml-unquoted-pattern", ""),
]


@pytest.mark.parametrize("vid,old,new,code,path", STANDIN_EDITS, ids=[e[0] for e in STANDIN_EDITS])
def test_standin_example_broken_variants(standin, vid, old, new, code, path):
    if standin is None:
        pytest.skip("stand-in generator not available")
    schema, dest = standin
    text = (dest / "examples/qwen3vl/qwen3vl_config.yaml").read_text()
    if "features:\n  loss_cfg:" == old:  # move the whole loss_cfg block under model: (a second `model:` key
        text = text.replace("  loss_cfg:\n    loss_type: default\n", "")  # would be a duplicate-key finding)
        text = text.replace("\nmodel:\n", "\nmodel:\n  loss_cfg:\n    loss_type: default\n", 1)
    else:
        assert old in text, f"stand-in example changed: {old!r} not found"
        text = text.replace(old, new, 1)
    result = validate_config(text, schema=schema, target_root=dest, device="cpu")
    assert not result.ok
    assert (code, path) in codes(result), sorted(codes(result))


def test_each_uncovered_no_split_class_is_reported(schema):
    cfg = copy.deepcopy(BASE)
    cfg["parallel"]["fsdp_plan"]["apply_modules"] = ["model", "lm_head"]
    found = [f for f in run(cfg, schema).data["findings"] if f["code"] == "no-split-uncovered"]
    assert sorted("VisionBlock" in f["message"] for f in found) == [False, True]


def test_custom_dataset_keys_are_warnings_but_huggingface_keys_are_errors(schema, target_root):
    cfg = copy.deepcopy(BASE)
    cfg["data"]["dataset_param"]["shuffle"] = True  # exists under dataloader_param
    cfg["data"]["dataset_param"]["basic_parameters"]["manifest"] = "x.list"
    hf = codes(run(cfg, schema, target_root))
    assert ("misplaced-key", "data.dataset_param.shuffle") in hf
    assert ("unknown-key", "data.dataset_param.basic_parameters.manifest") in hf
    cfg["data"]["dataset_param"]["dataset_type"] = "my_audio"  # a custom builder gets the whole dict
    inventory = copy.deepcopy(INVENTORY)
    inventory["dataset_types"]["my_audio"] = {"file": "mindspeed_mm/fsdp/data/datasets/huggingface/audio.py"}
    result = run(cfg, schema, target_root, inventory=inventory)
    assert result.ok, result.data["findings"]
    assert {("misplaced-key", "data.dataset_param.shuffle"),
            ("unknown-key-passthrough", "data.dataset_param.basic_parameters.manifest")} <= codes(result)
