"""The generated model plugin keeps upstream init and the upstream embedding tie on the trainer's meta-device path
(model_plugin.py.j2), on tiny models built from real family config classes (transformers 5.x, stand-in target).

- transformers 5 counts every class outside its package as custom code (``is_custom_code`` reads the module path),
  and then ``_initialize_weights`` skips a module without parameters of its own: Qwen3.5-MoE's sparse block, whose
  ``_init_weights`` is what initialises its router. A plain subclass left the routers NaN after ``init_weights``.
- The trainer re-ties the embeddings only when the top-level AND the text-config flags ask; transformers ties on
  its own reading. A source whose two flags differ (top-level true, text config false) is tied by transformers
  and was left untied after the meta-device build with ``training.load`` (no init_weights re-ties it there).
- The trainer's storage call splits every pair transformers ties, and its re-tie mends only the embedding pair it
  finds through ``get_output_embeddings``: BLIP ties its text head's weight and bias inside the text decoder, and the
  sweep's blip failed G1 with both left unwritten by the framework's HF load. The plugin ties them again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from msmigrate.agent.routes.fsdp2.rules.model import plugin_files

CHECK = Path(__file__).with_name("plugin_init_check.py")

MOE = {"model_type": "qwen3_5_moe",
       "text_config": dict(hidden_size=32, moe_intermediate_size=16, shared_expert_intermediate_size=16,
                           num_experts=4, num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=16, vocab_size=64,
                           layer_types=["full_attention", "full_attention"]),
       "vision_config": dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32,
                             patch_size=14)}
BLIP = {"model_type": "blip",
        "text_config": dict(vocab_size=64, hidden_size=32, encoder_hidden_size=32, intermediate_size=64,
                            num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=64),
        "vision_config": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              image_size=32, patch_size=16)}
TIES = {"model_type": "qwen2_vl", "tie_word_embeddings": True,
        "text_config": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                            num_key_value_heads=1, vocab_size=64, tie_word_embeddings=False,
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                             "mrope_section": [2, 3, 3]}),
        "vision_config": dict(depth=2, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14)}


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    from msmigrate.testbeds.standin import write_standin

    return Path(write_standin(tmp_path_factory.mktemp("target"), git_init=False, with_assets=False))


def run_check(target: Path, tmp_path: Path, hf_class: str, raw: dict, plain: bool = False,
              path: str = "fresh") -> dict:
    model_id = f"probe_{hf_class.lower()}" + ("_plain" if plain else "")
    plan = {"model_id": model_id, "plugin_dir": f"mindspeed_mm/fsdp/models/{model_id}", "hf_class": hf_class}
    for rel, text in plugin_files(plan, "src").items():
        if plain and rel.endswith(f"modeling_{model_id}.py"):
            # the plugin as it was: a bare subclass (the control this test's failure needs)
            text = (f"from transformers import {hf_class} as _U\n\n\nclass {hf_class}(_U):\n"
                    "    accepts_loss_kwargs = False\n")
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text(text)
    cfg = tmp_path / f"{model_id}.json"
    cfg.write_text(json.dumps(raw))
    module = f"{plan['plugin_dir'].replace('/', '.')}.modeling_{model_id}"
    proc = subprocess.run([sys.executable, str(CHECK), str(target), module, hf_class, str(cfg), path],
                          capture_output=True, text=True, timeout=600, cwd=target,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_plugin_keeps_upstream_init_of_a_moe_router(target, tmp_path):
    plain = run_check(target, tmp_path, "Qwen3_5MoeForConditionalGeneration", MOE, plain=True)
    assert plain["custom_code"] and any(n.endswith("mlp.gate.weight") for n in plain["nonfinite"]), plain
    got = run_check(target, tmp_path, "Qwen3_5MoeForConditionalGeneration", MOE)
    assert not got["custom_code"] and got["nonfinite"] == [], got


def test_plugin_keeps_the_tie_transformers_built_when_the_flags_differ(target, tmp_path):
    plain = run_check(target, tmp_path, "Qwen2VLForConditionalGeneration", TIES, plain=True, path="load")
    assert plain["tied"] == {"upstream": True, "plugin": False}, plain  # the old failure
    got = run_check(target, tmp_path, "Qwen2VLForConditionalGeneration", TIES, path="load")
    assert got["tied"] == {"upstream": True, "plugin": True}, got
    untied = dict(TIES, tie_word_embeddings=False, text_config=dict(TIES["text_config"], tie_word_embeddings=False))
    got = run_check(target, tmp_path, "Qwen2VLForConditionalGeneration", untied, path="load")
    assert got["tied"] == {"upstream": False, "plugin": False}, got


def test_plugin_ties_again_what_transformers_ties_beyond_the_embedding_pair(target, tmp_path):
    plain = run_check(target, tmp_path, "BlipForConditionalGeneration", BLIP, plain=True, path="load")
    shared = {a for a, _ in plain["shared"]}
    assert {"text_decoder.cls.predictions.decoder.bias", "text_decoder.cls.predictions.decoder.weight"} <= shared
    assert set(plain["split"]) == shared, plain  # the old failure: the storage call split both, nothing re-tied them
    got = run_check(target, tmp_path, "BlipForConditionalGeneration", BLIP, path="load")
    assert got["shared"] == plain["shared"] and got["split"] == [], got
