"""The static config check on the stand-in's example, and each kind of slip it must catch."""
import json

import pytest

from msmigrate.testbeds.megatron_standin import EXAMPLE
from msmigrate.tools.megatron.config_check import check_megatron_config

MODEL, SCRIPT = EXAMPLE["model_json"], EXAMPLE["script"]


def _check(root, **kw):
    return check_megatron_config(root, MODEL, SCRIPT, source=root / EXAMPLE["hf_dir"], **kw)


def _edit_model(root, fn):
    path = root / MODEL
    model = json.loads(path.read_text())
    fn(model)
    path.write_text(json.dumps(model))


def _edit_script(root, old, new):
    path = root / SCRIPT
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))


def test_example_passes(megatron_standin):
    r = _check(megatron_standin)
    assert r.ok, r.problems
    assert r.facts["dp"] == 2 and r.facts["grad_accum"] == 2 and r.facts["flag_definition_files"] >= 2
    assert r.facts["model_ids"]["text_decoder"] == "qwen2_5_lm"
    assert r.unverified_flags == ["--master_addr", "--master_port", "--nnodes", "--node_rank", "--nproc_per_node"]


def test_unregistered_model_id(standin_copy):
    _edit_model(standin_copy, lambda m: m["image_encoder"]["vision_encoder"].update(model_id="qwen9vit"))
    r = _check(standin_copy)
    assert not r.ok and any("'qwen9vit' is not registered for vision_encoder" in p for p in r.problems)


def test_tp_that_does_not_divide_the_query_groups(standin_copy):
    _edit_script(standin_copy, "TP=1", "TP=4")
    _edit_script(standin_copy, "NPUS_PER_NODE=2", "NPUS_PER_NODE=8")
    r = _check(standin_copy)
    assert any("num_query_groups 2 is not divisible by tp 4" in p for p in r.problems), r.problems
    assert not any("num_attention_heads 4 is not divisible" in p for p in r.problems)


def test_pipeline_layers_must_match_pp(standin_copy):
    _edit_script(standin_copy, "PP=1", "PP=2")
    r = _check(standin_copy)
    assert any("text_decoder.pipeline_num_layers [2] has 1 stage(s), the script has pp=2" in p for p in r.problems)
    _edit_model(standin_copy, lambda m: (m["text_decoder"].update(pipeline_num_layers=[1, 2]),
                                         m["image_encoder"]["vision_encoder"].update(pipeline_num_layers=[2, 0])))
    r = _check(standin_copy)
    assert [p for p in r.problems if "pipeline_num_layers" in p] == [
        "text_decoder.pipeline_num_layers [1, 2] sums to 3, num_layers is 2"]


def test_global_batch_arithmetic(standin_copy):
    _edit_script(standin_copy, "GBS=$(($MBS*$GRAD_ACC_STEP*$DP))", "GBS=3")
    r = _check(standin_copy)
    assert "global batch 3 is not a multiple of micro batch x dp = 1 x 2" in r.problems


def test_sizes_copied_from_another_model(standin_copy):
    _edit_model(standin_copy, lambda m: m["text_decoder"].update(num_layers=4, pipeline_num_layers=[4]))
    r = _check(standin_copy)
    assert "text_decoder.num_layers is 4, the source config has num_hidden_layers = 2" in r.problems


def test_script_must_launch_the_model_json(standin_copy):
    _edit_script(standin_copy, "pretrain_vlm.py", "pretrain_other.py")
    _edit_script(standin_copy, 'MM_MODEL="./examples/qwen2.5vl/model_tiny.json"', 'MM_MODEL="./other.json"')
    r = _check(standin_copy)
    assert any("launches pretrain_other.py, not pretrain_vlm.py" in p for p in r.problems)
    assert any("passes --mm-model './other.json'" in p for p in r.problems)


def test_flags_outside_the_definitions_are_listed(standin_copy):
    _edit_script(standin_copy, "--use-mcore-models \\", "--use-mcore-models \\\n    --made-up-flag 3 \\")
    r = _check(standin_copy)
    assert r.ok and "--made-up-flag" in r.unverified_flags


@pytest.mark.parametrize("missing", [MODEL, SCRIPT])
def test_unreadable_inputs(standin_copy, missing):
    (standin_copy / missing).unlink()
    assert "cannot read" in _check(standin_copy).error


def test_a_yaml_model_config_is_read_by_its_model_key(standin_copy):
    import yaml

    model = json.loads((standin_copy / MODEL).read_text())
    (standin_copy / "examples/qwen2.5vl/tiny.yaml").write_text(yaml.safe_dump({"model": model, "data": {}}))
    _edit_script(standin_copy, 'MM_MODEL="./examples/qwen2.5vl/model_tiny.json"',
                 'MM_MODEL="./examples/qwen2.5vl/tiny.yaml"')
    r = check_megatron_config(standin_copy, "examples/qwen2.5vl/tiny.yaml", SCRIPT)
    assert r.ok, r.problems
    (standin_copy / "examples/qwen2.5vl/tiny.yaml").write_text(yaml.safe_dump(model))
    assert "needs a top-level 'model' key" in check_megatron_config(standin_copy, "examples/qwen2.5vl/tiny.yaml",
                                                                   SCRIPT).error
