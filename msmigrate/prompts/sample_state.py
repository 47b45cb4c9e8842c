"""A realistic mid-run state for rendering every prompt: used by the snapshot tests and scripts/prompt_sizes.py.

It describes a Qwen2-VL-style source being migrated onto the stand-in target, second config attempt after an
apply_modules failure — i.e. the fullest a prompt normally gets (plan set, gates run, a failure recorded).
"""

from __future__ import annotations

from typing import Any

from msmigrate.knowledge.catalog import load_catalog
from msmigrate.prompts.render import MEGATRON_NODE_NAMES, MEGATRON_SYSTEM, NODE_NAMES, knowledge_brief

SAMPLE_TOOLS = [
    {"name": "read_file", "description": "Read a text file from the source or target (bounded, line ranges)."},
    {"name": "list_dir", "description": "List a directory of the source or target."},
    {"name": "grep_repo", "description": "Search the source or target for a regex; returns file:line hits."},
    {"name": "write_file", "description": "Create or replace a file inside the editable paths; commits the edit."},
    {"name": "apply_patch", "description": "Apply a unified diff inside the editable paths; commits the edit."},
    {"name": "module_tree", "description": "Build the model on the meta device in the target runtime and list named_modules()."},
    {"name": "validate_yaml", "description": "Validate a YAML config against the target's argument classes and the module tree."},
    {"name": "finish_phase", "description": "End this phase: the phase gate runs and decides."},
    {"name": "read_knowledge", "description": "Read one knowledge entry by id."},
    {"name": "search_knowledge", "description": "Search docs, similar cases and failure cases by keywords."},
]


# A fixed excerpt of the index for snapshots, so a new knowledge entry does not churn the system-prompt snapshot.
FIXED_INDEX = """- [doc] plugin-route-overview: How one YAML drives torchrun -> Trainer -> plugins -> ModelHub -> FSDP2 -> TrainEngine.
- [case] standin-qwen3-vl: Stand-in: Qwen3-VL dense: model_id qwen3_vl, path T, dataset huggingface, template qwen3_vl_nothink, collator qwen3vl
- [failure] fsdp-apply-modules-no-match: no fsdp_plan.apply_modules pattern matches the model (owner: config)"""


def sample_system_vars(live_index: bool = True) -> dict[str, Any]:
    """``live_index=False`` uses FIXED_INDEX (snapshots); True uses the packaged catalog (size estimates)."""
    return {
        "model_name": "Qwen2-VL-2B-Instruct (tiny)",
        "source_path": "/work/sources/qwen2_vl_tiny",
        "target_path": "/work/runs/r-0001/target",
        "editable_paths": ["mindspeed_mm/fsdp/models/qwen2vl/", "mindspeed_mm/fsdp/data/datasets/",
                           "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py",
                           "mindspeed_mm/fsdp/data/dataloader/data_collator.py", "examples/qwen2vl/"],
        "knowledge_index": knowledge_brief(load_catalog()) if live_index else FIXED_INDEX,
        "tools": SAMPLE_TOOLS,
    }


def sample_node_vars(phase: str) -> dict[str, Any]:
    return {
        "phase": phase,
        "model_name": "Qwen2-VL-2B-Instruct (tiny)",
        "attempt": 2,
        "max_attempts": 4,
        "source_summary": {
            "architectures": ["Qwen2VLForConditionalGeneration"],
            "model_type": "qwen2_vl",
            "custom_code": False,
            "media_tokens": {"image": "<|image_pad|>", "video": "<|video_pad|>"},
            "forward_keys": ["input_ids", "attention_mask", "position_ids", "labels", "pixel_values",
                             "image_grid_thw", "pixel_values_videos", "video_grid_thw", "rope_deltas"],
            "processor": "Qwen2VLProcessor (image + video processor)",
            "chat_template": "<|im_start|>role\\ncontent<|im_end|> with <|vision_start|><|image_pad|><|vision_end|>",
            "sample_data": "sharegpt-like JSON: messages[role, content] + images[]",
        },
        "target_summary": {
            "model_ids": ["qwen3_vl", "tiny_custom_lm"],
            "dataset_types": ["huggingface"],
            "templates": ["qwen2vl", "qwen3_vl", "qwen3_vl_nothink", "glm4.1v", "default", "empty"],
            "collators": ["qwen3vl", "llm_pretrain"],
            "similar_case": "standin-qwen3-vl",
            # as read from the real MindSpeed-MM's trainer (tools/repo_reader/trainer_facts.py)
            "meta_init": {"storage": "to_empty_if_needed", "at": "mindspeed_mm/fsdp/train/trainer.py:209",
                          "init_weights": "only without training.load", "buffers_kept": True,
                          "defined_in": "mindspeed_mm/fsdp/utils/utils.py"},
            # as read from the real MindSpeed-MM's train engine and dataloader (tools/repo_reader/wiring_facts.py)
            "loss_wiring": {"set_at": "mindspeed_mm/fsdp/train/train_engine.py:123",
                            "key": "features.loss_cfg.loss_type"},
            "collate_wiring": {"dataset_collate_fn_wins": True, "in": "prepare_sampler_dataloader",
                               "at": "mindspeed_mm/fsdp/data/dataloader/dataloader.py:144"},
        },
        "plan": {
            "route": "transformers",
            "build_path": "transformers",
            "build_path_why": "build path transformers: transformers ships Qwen2VLForConditionalGeneration, so "
                              "ModelHub loads it with from_pretrained; the plugin is a thin registered subclass",
            "branch": "A",
            "data_branch_why": "template qwen2vl fits: image token '<|image_pad|>' is a source token and its turn "
                               "end '<|im_end|>' occurs in the source chat template",
            "model_id": "qwen2_vl",
            "template": "qwen2vl",
            "collator": "qwen3vl",
            "similar_case": "standin-qwen3-vl",
            "launch_size": {"nproc_per_node": 8, "nnodes": 1, "gate_ranks": 2,
                            "why": "nproc_per_node 8: the 8 NPU(s) the runtime probe found; nnodes 1 (the default: "
                                   "one node)"},
            "reasons": [
                "AutoConfig loads the source folder and transformers ships Qwen2VLForConditionalGeneration",
                "registered template qwen2vl matches the source chat_template and its mm_plugin qwen2_vl expands <|image_pad|>",
                "collator qwen3vl produces pixel_values, image_grid_thw and rope_deltas, all accepted by forward",
            ],
            "source_training": {"kind": "hf", "entry": [], "forward_call": "kwargs", "label_convention": "aligned"},
            "source_training_contract": [
                "the source ships no training code: the oracle is HF's Trainer with the class's own forward loss "
                "(forward(**batch) → .loss, labels aligned with input_ids, shifted inside the loss)"],
        },
        "gate_results": [
            {"gate": "G0", "passed": True, "summary": "source, target and runtime probe OK (torch 2.13 CPU)",
             "attempt": 1, "current": True},
            {"gate": "G1", "passed": True, "summary": "qwen2_vl registered; meta build OK; forward loss 6.93 finite",
             "attempt": 1, "current": True},
            {"gate": "G2", "passed": True, "summary": "16 samples mapped; batch keys within forward signature",
             "attempt": 1, "current": True},
            {"gate": "G3", "passed": False, "summary": "fsdp_plan.apply_modules: 2 of 6 patterns match no module",
             "attempt": 2, "current": False},
        ],
        "last_failure": {
            "case_id": "fsdp-pattern-partial-no-match",
            "owner": "config",
            "diagnosis": "apply_modules patterns 'visual.blocks.{*}' and 'language_model.layers.{*}' match nothing: "
                         "names must be full dotted paths such as model.visual.blocks.0.",
            "excerpt": "pattern 'visual.blocks.{*}' matches 0 modules\npattern 'language_model.layers.{*}' matches 0 modules",
        },
        "instructions": "Keep micro_batch_size at 1; the data is in /work/sources/qwen2_vl_tiny/data.",
        "handoff": [
            {"phase": "model", "summary": "Registered a thin subclass of Qwen2VLForConditionalGeneration.",
             "delivered": ["model_id qwen2_vl"], "decisions_changed": [],
             "files_written": ["mindspeed_mm/fsdp/models/qwen2_vl/__init__.py",
                               "mindspeed_mm/fsdp/models/qwen2_vl/modeling_qwen2_vl.py"],
             "ids_registered": {"model": ["qwen2_vl"]},
             "gates_proved": {"G1": "qwen2_vl registered; meta build OK; forward loss 6.93 finite"}},
            {"phase": "data", "summary": "Branch A: registered template qwen2vl and collator qwen3vl fit; YAML written.",
             "delivered": ["examples/qwen2_vl/qwen2_vl_config.yaml"],
             "decisions_changed": ["collator qwen3vl kept: its keys are all forward parameters"],
             "files_written": ["examples/qwen2_vl/qwen2_vl_config.yaml"], "ids_registered": {},
             "gates_proved": {"G2": "16 samples mapped; batch keys within forward signature"}},
        ],
    }


def sample_format_error_vars() -> dict[str, Any]:
    return {
        "tool_name": "write_file",
        "error": "validation error: field 'content' is required; unexpected field 'text'",
        "schema": '{"type": "object", "properties": {"path": {"type": "string", "description": "file path '
                  'relative to the target root"}, "content": {"type": "string", "description": "full new file '
                  'content"}}, "required": ["path", "content"]}',
        "raw_call": '{"path": "examples/qwen2vl/qwen2vl_config.yaml", "text": "parallel: ..."}',
    }


def sample_megatron_plan() -> dict[str, Any]:
    """A Megatron-route plan (agent/routes/megatron/plan.py's keys) for a Qwen2.5-VL-style source at tp=2."""
    return {
        "backend": "megatron", "route": "megatron", "branch": None, "entry": "pretrain_vlm.py",
        "model_id": "qwen2_5_vl", "model_type": "qwen2_5_vl",
        "components": {
            "vision_encoder": {"model_id": "qwen2vit", "missing": [], "example": "examples/qwen2.5vl/model_7b.json"},
            "vision_projector": {"model_id": "lnmlp", "missing": [], "example": "examples/qwen2.5vl/model_7b.json"},
            "text_decoder": {"model_id": "qwen2_5_lm", "missing": [], "example": "examples/qwen2.5vl/model_7b.json"},
        },
        "new_component": None,
        "similar_case": "examples/qwen2.5vl", "example_model_json": "examples/qwen2.5vl/model_7b.json",
        "example_script": "examples/qwen2.5vl/finetune_qwen2_5_vl_7b.sh",
        "example_data_json": "examples/qwen2.5vl/data_7b.json",
        "model_json_path": "examples/qwen2_5_vl/model_qwen2_5_vl.json",
        "data_json_path": "examples/qwen2_5_vl/data_qwen2_5_vl.json",
        "script_path": "examples/qwen2_5_vl/finetune_qwen2_5_vl.sh",
        "converter": "Qwen2_5_VLConverter", "converter_tp": 2,
        "parallel": {"tp": 2, "pp": 1, "cp": 1, "vpp": 1},
        "parallel_check": {"ok": True, "problems": [], "error": None,
                           "facts": {"num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
                                     "dp": 1}},
        "batch_contract": {"forward": "mindspeed_mm/models/vlm_model.py:VLMModel.forward",
                           "source_inputs": ["attention_mask", "image_grid_thw", "input_ids", "labels",
                                             "pixel_values"],
                           "consumed": ["attention_mask", "image_grid_thw", "input_ids", "labels", "pixel_values"],
                           "not_consumed": [], "takes_kwargs": True},
        "numerics": {"compared": {"text_decoder": ["activation_func", "add_qkv_bias", "normalization"],
                                  "vision_encoder": ["activation_func", "gated_linear_unit", "normalization"]},
                     "differs": []},
        "reasons": ["the spec asks for tp 2: the Megatron route (pretrain_vlm.py)",
                    "text_decoder qwen2_5_lm: its example JSON configures the source's distinctive fields"],
    }


def sample_megatron_vars(name: str) -> dict[str, Any]:
    phase = name.removeprefix("megatron_")
    return {**sample_node_vars(phase), "plan": sample_megatron_plan(), "last_failure": None,
            "gate_results": [{"gate": "G0", "passed": True, "summary": "source, target and runtime probe OK"},
                             {"gate": "G1", "passed": True, "summary": "Qwen2_5_VLConverter: 2 file(s), tp=2, "
                                                                      "all identical"}],
            "handoff": [{"phase": "model", "summary": "Reused the registered qwen2vit, lnmlp and qwen2_5_lm; "
                                                  "convert_weights at tp=2 gave back every tensor identical.",
                         "delivered": [], "decisions_changed": [], "files_written": [], "ids_registered": {},
                         "gates_proved": {"G1": "Qwen2_5_VLConverter: 2 file(s), tp=2, all identical"}}]}


def sample_vars(name: str, live_index: bool = True) -> dict[str, Any]:
    if name in ("system", MEGATRON_SYSTEM):
        return sample_system_vars(live_index)
    if name in MEGATRON_NODE_NAMES:
        return sample_megatron_vars(name)
    if name == "format_error":
        return sample_format_error_vars()
    if name == "classify":
        return {**sample_node_vars(name), "last_failure": sample_classify_failure()}
    if name in NODE_NAMES:
        return sample_node_vars(name)
    raise KeyError(name)


def sample_classify_failure() -> dict[str, Any]:
    """What the classify node hands the LLM when the catalog abstained: root cause, candidates, the raw excerpt."""
    return {
        "case_id": None, "owner": None, "gate": "G2", "diagnosis": "not classified yet",
        "excerpt": "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"mindspeed_mm/fsdp/data/datasets/"
                   "huggingface.py\", line 212, in __getitem__\n[rank0]: TypeError: get_mm_inputs() takes 5 "
                   "positional arguments but 9 were given",
        "root_cause": {"kind": "exception", "text": "TypeError: get_mm_inputs() takes 5 positional arguments but 9 "
                       "were given", "evidence": "File \"mindspeed_mm/fsdp/data/datasets/huggingface.py\", line 212, "
                       "in __getitem__\nTypeError: get_mm_inputs() takes 5 positional arguments but 9 were given",
                       "code_path": "raised in code outside installed packages (mindspeed_mm/fsdp/data/datasets/"
                       "huggingface.py line 212 in __getitem__)",
                       "command": "torchrun --nproc_per_node 2 mindspeed_mm/fsdp/train/trainer.py "
                                  "examples/internvl3_5/internvl3_5_config.yaml"},
        "candidates": [
            {"case_id": "batch-key-rejected-by-forward", "owner": "model",
             "title": "collated batch key not accepted by forward", "cause": "The collator emits a key the forward "
             "signature does not take.", "basis": "its message matched the log, but the same message was owned by "
             "this owner in only 1 of 3 real failures of the tuning corpus: not decisive"},
            {"case_id": "mm-plugin-modality-missing", "owner": "data",
             "title": "template's mm_plugin lacks the modality / plugin not found", "cause": "The template's mm_plugin "
             "does not handle the media type of the data.", "basis": "worded like the log (BM25 score 7.1), no "
             "message match"},
        ],
        "deterministic": {"answer": "unknown (no case it trusts)", "tentative": False},
        "settings": [{"path": "examples/demo_vl/demo_vl.yaml",
                      "text": "data:\n  dataset_param:\n    template: demo_vl\n    cutoff_len: 2048\n"}],
        "runtime": ["installed: python 3.10.14, torch 2.7.1, transformers 4.57.0, accelerate 1.10.0",
                    "torch_npu: 2.7.1 (imports)",
                    "device: npu x8; npu-smi lists 8 NPU(s): 910B3 (health OK), HBM 65536 MB each, 3200 MB already "
                    "in use on the busiest"],
        "run_context": ["frame in this run's data artifact: mindspeed_mm/fsdp/data/datasets/huggingface.py:212",
                        "the run's context points to data (frames): the innermost frame of this run's own code is "
                        "mindspeed_mm/fsdp/data/datasets/huggingface.py:212 (the data path); the fix changes that "
                        "file"],
    }


ALL_PROMPTS = ("system", *NODE_NAMES, "format_error", MEGATRON_SYSTEM, *MEGATRON_NODE_NAMES)
