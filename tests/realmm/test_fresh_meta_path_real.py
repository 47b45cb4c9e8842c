"""check_forward's fresh meta path (no training.load) on the real runtime (torch 2.7.1 + transformers 4.57) and the
real checkout: storage from the real ``to_empty_if_needed``, init as the real ``init_model_weights`` calls it. An
init_weights override that skips modules the inherited one marked ``_is_hf_initialized`` (blind live run 10) leaves a
bare parameter NaN there and is named; one that covers it passes both paths."""

from __future__ import annotations

import shutil
import textwrap

import pytest

from msmigrate.tools.runtime import run_probe

pytestmark = pytest.mark.realmm

PLUGIN = '''
import torch
from transformers import Qwen2VLForConditionalGeneration
from mindspeed_mm.fsdp.utils.register import model_register


class ClassEmbedding(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.class_embedding = torch.nn.Parameter(torch.randn(width))


@model_register.register("fresh_skips_marked")
class SkipsMarked(Qwen2VLForConditionalGeneration):
    accepts_loss_kwargs = False

    def __init__(self, config):
        super().__init__(config)
        self.extra = ClassEmbedding(config.text_config.hidden_size)

    def init_weights(self):
        super().init_weights()
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, ClassEmbedding) and not self._skip(module):
                    module.class_embedding.normal_(mean=0.0, std=0.02)

    def _skip(self, module):
        return getattr(module, "_is_hf_initialized", False)

    def forward(self, input_ids=None, labels=None, **kwargs):
        out = super().forward(input_ids=input_ids, labels=labels, **kwargs)
        out.loss = out.loss + 0.0 * self.extra.class_embedding.sum()
        return out


@model_register.register("fresh_covers_all")
class CoversAll(SkipsMarked):
    def _skip(self, module):
        return False
'''


def test_fresh_path_on_the_real_trainer_calls_names_the_skipped_bare_parameter(tmp_path, real_checkout, real_runtime):
    import subprocess

    target = tmp_path / "MindSpeed-MM"
    for pkg in ("mindspeed_mm", "mindspeed"):
        if (real_checkout / pkg).is_dir():
            shutil.copytree(real_checkout / pkg, target / pkg, symlinks=True)
    plugin = target / "mindspeed_mm" / "fsdp" / "models" / "fresh_probe"
    plugin.mkdir()
    (plugin / "__init__.py").write_text("")
    (plugin / "modeling_fresh.py").write_text(textwrap.dedent(PLUGIN))
    source = tmp_path / "q2vl"
    subprocess.run([real_runtime, "-c", textwrap.dedent(f'''
        from transformers import Qwen2VLConfig
        text = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                    num_key_value_heads=1, vocab_size=256, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                    rope_scaling={{"type": "mrope", "mrope_section": [4, 2, 2]}})
        vision = dict(depth=2, embed_dim=16, hidden_size=32, num_heads=2, patch_size=14, spatial_merge_size=2,
                      temporal_patch_size=2)
        Qwen2VLConfig(text_config=text, vision_config=vision, architectures=["Qwen2VLForConditionalGeneration"],
                      image_token_id=250, video_token_id=251, vision_start_token_id=252,
                      **text).save_pretrained("{source}")
    ''')], check=True, timeout=300)
    common = ["--target", str(target), "--plugin", "mindspeed_mm/fsdp/models/fresh_probe",
              "--model-name-or-path", str(source)]
    env = {"NON_MEGATRON": "true", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    res = run_probe(real_runtime, "forward_smoke", common + ["--model-id", "fresh_skips_marked"], cwd=target,
                    env_extra=env, timeout=600)
    out = res.data["result"]
    fresh = out["meta_fresh"]
    assert (fresh["materialize"], fresh["init"]) == ("to_empty_if_needed", "init_model_weights"), fresh
    assert fresh["first_nonfinite"] == "extra.class_embedding" and not fresh["finite"], fresh
    assert out["meta_load"]["finite"] and out["meta_load"]["first_nonfinite"] is None, out["meta_load"]
    assert not res.ok and res.error.startswith("fresh init (no load"), res.error
    res = run_probe(real_runtime, "forward_smoke", common + ["--model-id", "fresh_covers_all"], cwd=target,
                    env_extra=env, timeout=600)
    assert res.ok, res.error
    assert res.data["result"]["meta_fresh"]["finite"] and res.data["result"]["meta_load"]["finite"]
