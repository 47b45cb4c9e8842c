"""An sdpa refusal by a class that is none of the run's model classes is the model phase's (the plugin class gives
the framework's HF loader no ``_checkpoint_conversion_mapping``), not config's "set eager". Recorded text: the G4
launch of a blind LLM-policy run on the Phi-3.5-vision-layout fixture (stand-in target before its loader was fixed),
where the loader built the bare ``PreTrainedModel`` of the vendored plugin's class chain."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from msmigrate.agent.failure_artifacts import model_classes, run_artifacts, run_facts_owner
from msmigrate.knowledge.classifier import classify

LOG = (Path(__file__).resolve().parents[1] / "data" / "logs" / "sdpa_refused_by_loader_class.log").read_text()
PLUGIN = "mindspeed_mm/fsdp/models/phi3_v"


def _run(tmp_path: Path, tree_classes: list[str] | None = None) -> tuple[SimpleNamespace, dict]:
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    (source / "modeling_phi3_v.py").write_text("class Phi3VPreTrainedModel:\n    pass\n\n\n"
                                               "class Phi3VForCausalLM(Phi3VPreTrainedModel):\n    pass\n")
    (target / PLUGIN).mkdir(parents=True)
    (target / PLUGIN / "modeling_phi3_v.py").write_text(
        "from .upstream.modeling_phi3_v import Phi3VForCausalLM as Upstream\n\n\n"
        "class Phi3VForCausalLM(Upstream):\n    pass\n")
    state = {"plan": {"plugin_dir": PLUGIN, "hf_class": "Phi3VForCausalLM"}, "gates": {}}
    if tree_classes is not None:
        tree = tmp_path / "module_tree_phi3_v.json"
        tree.write_text(json.dumps({"model_class": f"{PLUGIN.replace('/', '.')}.modeling_phi3_v.Phi3VForCausalLM",
                                    "classes": {str(i): c for i, c in enumerate(tree_classes)}}))
        state["gates"]["G1"] = {"module_tree_file": str(tree)}
    ctx = SimpleNamespace(source=source, target=target, data_path=None, runtime_python="python")
    return ctx, state


def test_the_catalog_case_alone_says_eager(tmp_path):
    found = classify(LOG)
    assert (found.case_id, found.owner) == ("sdpa-not-supported-by-model", "config")


def test_a_class_outside_the_model_goes_to_the_model_phase_with_the_loaders_fix(tmp_path):
    ctx, state = _run(tmp_path, ["Phi3VForCausalLM", "Phi3VModel", "CLIPVisionModel", "Phi3Attention", "Linear"])
    assert {"Phi3VForCausalLM", "Phi3VPreTrainedModel", "CLIPVisionModel"} <= model_classes(state, ctx)
    artifacts, _ = run_artifacts(ctx, state, {"gate": "G4"})
    decided = run_facts_owner(LOG, artifacts, state, ctx)
    assert decided is not None and (decided.owner, decided.rule) == ("model", "attention-class")
    assert "`PreTrainedModel`" in decided.reason and "_checkpoint_conversion_mapping" in decided.reason
    assert "mindspeed_mm/fsdp/checkpoint/hf_utils.py:63" in decided.reason  # where it was built, from the traceback


def test_the_models_own_class_refusing_keeps_the_attention_case(tmp_path):
    ctx, state = _run(tmp_path, ["Phi3VForCausalLM", "CLIPVisionModel"])
    artifacts, _ = run_artifacts(ctx, state, {"gate": "G4"})
    for cls in ("Phi3VForCausalLM", "CLIPVisionModel"):  # the plugin's class, a tower its model builds
        text = LOG.replace("ValueError: PreTrainedModel does not", f"ValueError: {cls} does not")
        decided = run_facts_owner(text, artifacts, state, ctx)
        assert decided is None or decided.rule != "attention-class", decided


def test_g1_s_one_line_probe_note_is_read_the_same_way(tmp_path):
    """G1's framework-load check reports the loader's exception with the probes' ``raised in …; called from …``
    note (tools/probes/framework_load.py), recorded from that check on the stand-in before its loader was fixed."""
    ctx, state = _run(tmp_path, ["Phi3VForCausalLM", "CLIPVisionModel"])
    artifacts, _ = run_artifacts(ctx, state, {"gate": "G1"})
    text = ("the target's own HF weight load (hf_utils.load_hf_checkpoint, training.load /tmp/x/phi3_v, load_strict "
            "False), which G4's launch runs before its first step, failed on the plugin class: ValueError: "
            "PreTrainedModel does not support an attention implementation through "
            "torch.nn.functional.scaled_dot_product_attention yet. Please request the support for this architecture: "
            "https://github.com/huggingface/transformers/issues/28005. (raised in /work/.venv/lib/python3.11/"
            "site-packages/transformers/modeling_utils.py:1666 in _sdpa_can_dispatch; called from "
            "mindspeed_mm/fsdp/checkpoint/hf_utils.py:63 in _renamer: `reference = upstream._from_config(model.config)`)")
    decided = run_facts_owner(text, artifacts, state, ctx)
    assert decided is not None and decided.owner == "model"
    assert "mindspeed_mm/fsdp/checkpoint/hf_utils.py:63" in decided.reason
