"""Virtual pipeline stages on the real MindSpeed-MM converter: its hf_to_mm at pp=2 x vpp=2 writes each rank's
virtual stages as model0 / model1 (save_by_vpp), and those, put back at their global layer numbers by the
framework's layout rule, equal its own single-stage conversion tensor for tensor (its mm_to_hf reads ``model``
only, so the HF round trip runs on the single-stage checkpoint)."""
from __future__ import annotations

import pytest

from msmigrate.tools.megatron.converter_roundtrip import target_converter_roundtrip

pytestmark = pytest.mark.realmm


def test_real_converter_vpp_layout(realmm_snapshot, real_runtime, tmp_path):
    from test_megatron_real import TINY_QWEN2_5_VL

    tiny = {**TINY_QWEN2_5_VL, "num_hidden_layers": 4}  # 4 flat stages, one text layer each
    res = target_converter_roundtrip(real_runtime, realmm_snapshot / "MindSpeed-MM", "Qwen2_5_VLConverter",
                                     tmp_path / "w", tiny_config=tiny, pp=2, vpp=2,
                                     extra_paths=[realmm_snapshot / "MindSpeed"])
    assert res.ok, (res.error, res.problems)
    assert res.facts["llm_pp_layers"] == [[1, 1], [1, 1]] and res.facts["vit_pp_layers"] == [[2, 0], [0, 0]]
    assert res.facts["vpp_stages_checked"] == 4 and res.facts["vpp_files"] == 2
    assert res.facts["qkv_layers_checked"] == 4


def test_the_deprecated_vpp_flag_is_refused_as_the_real_framework_does(realmm_snapshot, tmp_path):
    """The real validate_args patch raises when --num-layers-per-virtual-pipeline-stage is set at all; G3 reads
    that check from the code and refuses a script passing it (the draft writes the number of virtual stages)."""
    from msmigrate.tools.megatron.config_check import check_megatron_config, definition_paths

    mm = realmm_snapshot / "MindSpeed-MM"
    script = mm / "examples/qwen2.5vl/finetune_qwen2_5_vl_7b.sh"
    old = script.read_text()
    assert "--pipeline-model-parallel-size ${PP} \\" in old
    bad = tmp_path / "finetune_bad.sh"
    bad.write_text(old.replace("--pipeline-model-parallel-size ${PP} \\",
                               "--pipeline-model-parallel-size ${PP} \\\n    --num-layers-per-virtual-pipeline-stage 2 \\"))
    defs = definition_paths(mm, [realmm_snapshot / "MindSpeed"])
    res = check_megatron_config(mm, "examples/qwen2.5vl/model_7b.json", bad, definitions=defs)
    assert any("--num-layers-per-virtual-pipeline-stage, which the framework refuses" in p
               and "validate_args_patch.py" in p for p in res.problems), res.problems
