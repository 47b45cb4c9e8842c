"""config_fit keeps from a (MoE) example only what applies to the model being migrated."""

from __future__ import annotations

import copy
import json

from msmigrate.agent.routes.fsdp2.config_fit import fit_to_model

MOE_EXAMPLE = {
    "parallel": {"expert_parallel_size": 8, "ep_plan": {"apply_modules": ["model.language_model.layers.{*}.mlp.experts"]},
                 "fsdp_plan": {"apply_modules": ["model.language_model.layers.{*}"],
                               "hook_modules": ["model.language_model.layers.{*}"]}},
    "model": {"model_id": "x_moe", "attn_implementation": "flash_attention_2", "gdn_implementation": "ascendc",
              "use_grouped_expert_matmul": True},
    "features": {"loss_cfg": {"router_aux_loss_coef": 0.01}, "enable_activation_offload": True,
                 "activation_offload_plan": {"apply_modules": ["model.language_model.layers.{*}"]},
                 "enable_chunk_loss": True, "chunkloss_plan": {"apply_module": "lm_head"}},
}
DENSE_TREE = {"names": ["", "model", "model.layers", "model.layers.0", "model.layers.0.mlp", "lm_head"]}


def _source(tmp_path, cfg):
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_dense_model_drops_expert_parallelism_and_example_knobs(tmp_path):
    cfg = copy.deepcopy(MOE_EXAMPLE)
    dropped = fit_to_model(cfg, tree=DENSE_TREE, source=_source(tmp_path, {"model_type": "dense", "hidden_size": 8}))
    assert cfg["parallel"]["expert_parallel_size"] == 1 and "ep_plan" not in cfg["parallel"]
    assert "hook_modules" not in cfg["parallel"]["fsdp_plan"]  # the example's module names are not this model's
    assert cfg["model"] == {"model_id": "x_moe", "attn_implementation": "flash_attention_2"}
    assert cfg["features"]["loss_cfg"]["router_aux_loss_coef"] == 0.0
    assert cfg["features"]["enable_activation_offload"] is False and "activation_offload_plan" not in cfg["features"]
    assert any("no experts" in d for d in dropped)


def test_moe_model_keeps_expert_parallelism_and_its_own_knobs(tmp_path):
    cfg = copy.deepcopy(MOE_EXAMPLE)
    tree = {"names": ["", "model", "model.language_model.layers.0", "model.language_model.layers.0.mlp.experts"]}
    fit_to_model(cfg, tree=tree, source=_source(tmp_path, {"text_config": {"num_experts": 4,
                                                                           "use_grouped_expert_matmul": True}}))
    assert cfg["parallel"]["expert_parallel_size"] == 8 and cfg["parallel"]["ep_plan"]
    assert cfg["parallel"]["fsdp_plan"]["hook_modules"] == ["model.language_model.layers.{*}"]
    assert cfg["model"]["use_grouped_expert_matmul"] is True and "gdn_implementation" not in cfg["model"]


def test_a_model_that_passes_its_loss_function_no_labels_trains_with_its_own_loss(tmp_path):
    """GIT's forward calls ``self.loss_function(logits=<image positions cut>, labels=None, shift_labels=…)``; the
    engine's loss function (any loss_type but raw) takes the batch's labels then, which do not line up with those
    logits: the sweep's git failed G4 with "labels must be provided" on the stand-in."""
    source = _source(tmp_path, {"model_type": "git", "hidden_size": 8})
    cfg = {"features": {"loss_cfg": {"loss_type": "default"}}}
    dropped = fit_to_model(cfg, tree={**DENSE_TREE, "loss_without_labels": True}, source=source)
    assert cfg["features"]["loss_cfg"]["loss_type"] == "raw" and any("labels=None" in d for d in dropped)
    cfg = {"features": {"loss_cfg": {"loss_type": "default"}}}
    fit_to_model(cfg, tree=DENSE_TREE, source=source)
    assert cfg["features"]["loss_cfg"]["loss_type"] == "default"  # a model that hands its labels on keeps it
