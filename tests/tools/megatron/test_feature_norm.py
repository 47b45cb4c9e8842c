"""Whether a LLaVA-style source's last vision hidden_states entry carries the tower's post norm: measured by the
vision_feature_norm probe on a tower built from the source's config (random weights), in the runtime it runs in.
Here the runtime is this venv's transformers 5, which keeps the raw last layer for SigLIP/CLIP towers; the real
runtime's 4.57 (post-normed last entry) is measured by tests/realmm/test_megatron_new_encoder_real.py."""

from __future__ import annotations

import sys

import pytest

from msmigrate.tools.megatron.feature_norm import FeatureNorm, derive_feature_norm, reads_last_entry


def _llava_config(folder, vision):
    from transformers import LlavaConfig

    LlavaConfig(vision_config=vision, text_config=dict(model_type="qwen2", vocab_size=64, hidden_size=16,
                                                       intermediate_size=32, num_hidden_layers=1,
                                                       num_attention_heads=2, num_key_value_heads=1),
                vision_feature_layer=-1).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("vision", [
    dict(model_type="siglip_vision_model", hidden_size=16, intermediate_size=32, num_hidden_layers=3,
         num_attention_heads=2, image_size=14, patch_size=7),
    dict(model_type="clip_vision_model", hidden_size=16, intermediate_size=32, num_hidden_layers=3,
         num_attention_heads=2, image_size=14, patch_size=7, projection_dim=16)])
def test_the_last_entry_is_measured_in_the_runtime(tmp_path, vision):
    import transformers

    got = derive_feature_norm(sys.executable, _llava_config(tmp_path / "src", vision), run_dir=tmp_path / "run")
    assert got.ok and got.transformers_version == transformers.__version__, got
    assert got.last_entry == "last_layer" and got.post_normed is False, got
    assert got.saved and (tmp_path / "run" / "probes" / "vision_feature_norm.json").is_file()


def test_a_source_without_a_vision_config_is_an_error_not_a_guess(tmp_path):
    from transformers import Qwen2Config

    Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1).save_pretrained(tmp_path)
    got = derive_feature_norm(sys.executable, tmp_path)
    assert not got.ok and "no vision sub-config" in got.error and got.post_normed is None
    assert "not measured" in got.evidence()


def test_which_feature_layers_name_the_last_entry():
    assert reads_last_entry({"vision_feature_layer": -1}, {})
    assert reads_last_entry({"vision_feature_layer": 4}, {"num_hidden_layers": 4})
    assert not reads_last_entry({"vision_feature_layer": -2}, {"num_hidden_layers": 4})
    assert not reads_last_entry({"vision_feature_layer": [-1, -2]}, {})
    assert not reads_last_entry({}, {})
    assert FeatureNorm(ok=True, last_entry="neither").post_normed is None
