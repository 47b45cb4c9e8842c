"""Data stack (templates, mm_plugins, collators, dataset) and model/parallel contract of the stand-in."""

import pytest



def test_template_and_plugin_registries(mm):
    tpl = mm("mindspeed_mm.fsdp.data.data_utils.func_utils.template")
    plug = mm("mindspeed_mm.fsdp.data.data_utils.func_utils.mm_plugin")
    assert {"qwen2vl", "qwen3_vl", "qwen3_vl_nothink", "glm4.1v", "default", "empty"} <= set(tpl.TEMPLATES)
    assert set(plug.PLUGINS) == {"base", "qwen2_vl", "qwen3_vl", "glm4.1v"}
    assert not any(k.startswith(("internvl", "llava", "gemma", "idefics")) for k in tpl.TEMPLATES)
    with pytest.raises(ValueError, match="Multimodal plugin `internvl` not found."):
        plug.get_mm_plugin("internvl", image_token="<IMG_CONTEXT>")
    with pytest.raises(ValueError) as e:
        tpl.get_template_and_fix_tokenizer(object(), "qwen2_vl")
    assert str(e.value) == "Template None does not exist."


def test_adding_template_and_plugin_is_additive(mm):
    tpl = mm("mindspeed_mm.fsdp.data.data_utils.func_utils.template")
    plug = mm("mindspeed_mm.fsdp.data.data_utils.func_utils.mm_plugin")
    fmt = mm("mindspeed_mm.fsdp.data.data_utils.func_utils.formatters")
    plug.PLUGINS["my_vl"] = plug.Qwen2VLPlugin
    tpl._register_template(
        name="my_vl",
        params=tpl.RegisterParams(format_user=fmt.StringFormatter(slots=["U:{{content}}"]), stop_words=["<|im_end|>"]),
        mm_plugin=plug.get_mm_plugin(name="my_vl", image_token="<|image_pad|>"),
    )
    assert tpl.TEMPLATES["my_vl"].mm_plugin.image_token == "<|image_pad|>"


def _dataset_param(mm, standin, **basic):
    import yaml
    cfg = yaml.safe_load((standin / "examples/qwen3vl/qwen3vl_config.yaml").read_text())
    cfg["data"]["dataset_param"]["basic_parameters"].update(basic)
    data_args = mm("mindspeed_mm.fsdp.params.data_args")
    return data_args.DataArguments(**cfg["data"])


def test_collator_resolution_messages(mm, standin):
    dc = mm("mindspeed_mm.fsdp.data.dataloader.data_collator")
    with pytest.raises(ValueError) as e:
        dc.resolve_data_collator({}, None)
    assert str(e.value) == ("No data collator is specified. Please set "
                            "data.dataloader_param.collate_param.collator_id (or deprecated model_name).")
    with pytest.raises(ValueError) as e:
        dc.resolve_data_collator({"collator_id": "internvl"}, None)
    assert str(e.value) == "No data collator is registered as internvl. Available collators: llm_pretrain, qwen3vl."
    with pytest.raises(ValueError, match="collator_id and deprecated model_name refer to different data collators: "
                                         "qwen3vl != llm_pretrain."):
        dc.resolve_data_collator({"collator_id": "qwen3vl", "model_name": "llm_pretrain"}, None)
    cls, kwargs = dc.resolve_data_collator({"model_name": "qwen3vl", "pad_to_multiple_of": 16}, None)
    assert cls is dc.DataCollatorForQwen2vl and kwargs == {"pad_to_multiple_of": 16}


def test_dataset_and_collator_produce_vlm_batch(mm, standin):
    mm("mindspeed_mm.fsdp.data.datasets.huggingface.qwen2vl_dataset")
    data = mm("mindspeed_mm.fsdp.data")
    data_args = _dataset_param(mm, standin)
    ds = data.build_mm_dataset(data_args.dataset_param)
    assert len(ds) == 16
    # as in the real trainer, batch_size travels inside dataloader_param
    loader = data.build_mm_dataloader(ds, {**data_args.dataloader_param.to_dict(), "batch_size": 2},
                                      dataset_param=data_args.dataset_param)
    batch = next(iter(loader))
    assert {"input_ids", "attention_mask", "labels", "pixel_values", "image_grid_thw", "mm_token_type_ids"} <= set(batch)
    assert batch["input_ids"].shape[0] == 2 and batch["input_ids"].shape[1] % 8 == 0
    # 64x64 image, patch 16, merge 2 -> grid 1x4x4 -> 4 image tokens per sample
    assert batch["mm_token_type_ids"].sum().item() == 2 * 4
    assert (batch["labels"] != -100).any() and (batch["labels"] == -100).any()


def test_text_only_batch_gets_fake_image(mm, standin):
    mm("mindspeed_mm.fsdp.data.datasets.huggingface.qwen2vl_dataset")
    data = mm("mindspeed_mm.fsdp.data")
    data_args = _dataset_param(mm, standin, dataset="assets/data/sharegpt_text.json")
    ds = data.build_mm_dataset(data_args.dataset_param)
    batch = next(iter(data.build_mm_dataloader(ds, {**data_args.dataloader_param.to_dict(), "batch_size": 2},
                                               dataset_param=data_args.dataset_param)))
    assert "pixel_values" in batch and batch["mm_token_type_ids"].sum().item() == 4


@pytest.mark.parametrize("field, value, message", [
    ("dataloader_mode", "weird", "Unsupported dataloader_mode: weird"),
    ("sampler_type", "Other", "Sampler type Other is not implemented."),
    ("drop_last", False, "It is not implemented that the drop_last is false."),
])
def test_dataloader_errors(mm, standin, field, value, message):
    data = mm("mindspeed_mm.fsdp.data")
    data_args = _dataset_param(mm, standin)
    setattr(data_args.dataloader_param, field, value)
    with pytest.raises((ValueError, NotImplementedError), match=message):
        data.build_mm_dataloader(list(range(8)), data_args.dataloader_param, dataset_param=data_args.dataset_param)


def test_bad_template_and_image_count(mm, standin):
    mm("mindspeed_mm.fsdp.data.datasets.huggingface.qwen2vl_dataset")
    data = mm("mindspeed_mm.fsdp.data")
    with pytest.raises(ValueError, match="^Template None does not exist.$"):
        data.build_mm_dataset(_dataset_param(mm, standin, template="qwen2_vl").dataset_param)
    with pytest.raises(ValueError, match="This model does not support image input"):
        data.build_mm_dataset(_dataset_param(mm, standin, template="default").dataset_param)
    reg = mm("mindspeed_mm.fsdp.utils.register")
    with pytest.raises(KeyError, match="ID 'hf' is not registered."):
        reg.data_register.get("hf")


# One fresh interpreter with a 1-rank gloo group: model build paths, FSDP / recompute plan errors.
MODEL_SCRIPT = r'''
import os, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1)
from mindspeed.fsdp.utils.log import set_log_level
set_log_level()
from mindspeed_mm.fsdp.utils.register import import_plugin, model_register
from mindspeed_mm.fsdp.params.model_args import ModelArguments
from mindspeed_mm.fsdp.params.feature_args import FeatureArguments
from mindspeed_mm.fsdp.params.parallel_args import ParallelArguments
from mindspeed_mm.fsdp.params.training_args import TrainingArguments
from mindspeed_mm.fsdp.models.modelhub import ModelHub
from mindspeed_mm.fsdp.features.apply_features import FeaturesApplier
from mindspeed_mm.fsdp.distributed.parallel_state import init_parallel_state
from mindspeed_mm.fsdp.distributed.torch_parallelize import ParallelApplier
import_plugin(["mindspeed_mm/fsdp/models/qwen3vl", "mindspeed_mm/fsdp/models/tiny_custom_lm"])
train = TrainingArguments(init_model_with_meta_device=True)
par = ParallelArguments()
init_parallel_state(**par.to_dict())
def expect(fn, text):
    try:
        fn()
    except Exception as e:
        assert text in str(e), (text, repr(e))
        print("OK", text)
    else:
        raise AssertionError("no error: " + text)
custom = ModelArguments(model_id="tiny_custom_lm", model_name_or_path="assets/tiny_custom_lm", attn_implementation="sdpa",
                        vocab_size=64, freeze=["embed_tokens"])
m = ModelHub.build(custom, FeatureArguments(), train)
assert type(m).__name__ == "TinyCustomLM" and next(m.parameters()).device.type == "meta"
assert not m.embed_tokens.weight.requires_grad
expect(lambda: ModelHub.build(ModelArguments(model_name_or_path="assets/tiny_custom_lm"), None, train),
       "`model_id` must be provided in model_args when using custom models.")
hf = ModelHub.build(ModelArguments(model_id="qwen3_vl", model_name_or_path="assets/tiny_qwen3vl",
                                   attn_implementation="sdpa"), FeatureArguments(), TrainingArguments())
meta_hf = ModelHub.build(ModelArguments(model_id="qwen3_vl", model_name_or_path="assets/tiny_qwen3vl",
                                        attn_implementation="sdpa"), FeatureArguments(), train)
meta_hf.to_empty(device="cpu")
meta_hf.init_weights()
from safetensors.torch import load_file
from transformers import Qwen3VLForConditionalGeneration as Base, AutoConfig
saved = load_file("assets/tiny_qwen3vl/model.safetensors")
loaded = hf.state_dict()
assert sum(k in loaded for k in saved) == len(saved) > 10, sorted(saved)[:3]
assert all(torch.equal(loaded[k], v) for k, v in saved.items()), "from_pretrained lost weights"
ref = dict(Base(AutoConfig.from_pretrained("assets/tiny_qwen3vl")).named_buffers())
assert all(torch.allclose(b, ref[n]) for n, b in hf.named_buffers() if n.endswith("inv_freq"))
for name, buf in meta_hf.named_buffers():
    if name.endswith("inv_freq"):
        assert torch.allclose(buf, ref[name]), name
print("ROPE OK", sum(n.endswith("inv_freq") for n, _ in meta_hf.named_buffers(remove_duplicate=False)))
print("HF", type(hf).__name__, sorted(n for n, _ in hf.named_modules() if n.count(".") <= 2)[:6])
feats = FeatureArguments(recompute=True, recompute_plan={{"apply_modules": ["nothing.{{*}}"]}})
expect(lambda: FeaturesApplier(feats).pre_fully_shard_apply(m), "[Recompute] No module named ['nothing.{{*}}'].")
par.fsdp_plan.apply_modules = ["model.nope.{{*}}", "nope"]
expect(lambda: ParallelApplier(par, train)(m), "[FSDP2] No module named ['model.nope.{{*}}', 'nope'].")
small = model_register.get("tiny_custom_lm")(vocab_size=64)
FeaturesApplier(FeatureArguments(recompute=True, recompute_plan={{"apply_modules": ["lm_head"]}})).pre_fully_shard_apply(small)
expect(lambda: small(input_ids=torch.zeros(1, 4, dtype=torch.long)), "got an unexpected keyword argument 'past_key_values'")
small2 = model_register.get("tiny_custom_lm")(vocab_size=64)
par.fsdp_plan.apply_modules = ["layers.{{*}}", "nope"]
sharded = ParallelApplier(par, train)(small2)
small3 = model_register.get("tiny_custom_lm")(vocab_size=64)
expect(lambda: ParallelApplier(par, TrainingArguments())(small3), "device_ids and output_device arguments only work with")
print("FSDP", type(sharded).__name__, type(sharded.layers[0]).__name__, type(sharded.lm_head).__name__)
'''


def test_model_build_and_plan_errors(run_py, standin, port):
    res = run_py(standin, MODEL_SCRIPT.format(port=port), env={"WORLD_SIZE": "1"}, timeout=180)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "Building custom model..." in out and "falling back to custom model builder" in out
    assert "freezing module embed_tokens..." in out
    assert "OK `model_id` must be provided" in out
    assert "HF Qwen3VLForConditionalGeneration" in out and "Building transformers model from configuration..." in out
    assert "ROPE OK" in out
    assert "OK [Recompute] No module named" in out and "OK [FSDP2] No module named" in out
    assert "OK got an unexpected keyword argument 'past_key_values'" in out
    assert "DDP mode is enabled (fully_shard_parallel_size=1) instead of FSDP wrapping" in out
    assert "OK device_ids and output_device arguments only work with" in out
    assert "FSDP FSDPTinyCustomLM FSDPDecoderLayer Linear" in out  # unmatched pattern 'nope' is silent


def test_dataset_labels_follow_the_real_convention(mm):
    """As the real SupervisedDatasetProcessor labels: aligned with input_ids; an efficient-eos template closes each
    turn by an eos label on the first position of the next prompt (position 0 for the first, unused by the loss's
    shift) and appends eos; mask_history trains only the last answer."""
    from types import SimpleNamespace

    ds = mm("mindspeed_mm.fsdp.data.datasets.huggingface.qwen2vl_dataset")
    pairs = [([10, 11], [20, 21]), ([12, 13], [22, 23])]
    template = SimpleNamespace(efficient_eos=True, encode_multiturn=lambda tok, messages, system: pairs,
                               mm_plugin=SimpleNamespace(process_messages=lambda m, i, v, a, p: m))
    converted = {"_prompt": [], "_response": [], "_images": None, "_videos": None, "_audios": None, "_system": None}
    args = SimpleNamespace(train_on_prompt=False, mask_history=False, cutoff_len=100)
    tok = SimpleNamespace(eos_token_id=2)
    out = ds._supervised_example(converted, template, tok, None, args)
    assert out["input_ids"] == [10, 11, 20, 21, 12, 13, 22, 23, 2]
    assert out["labels"] == [2, -100, 20, 21, 2, -100, 22, 23, 2]
    template.efficient_eos = False
    args.mask_history = True
    out = ds._supervised_example(converted, template, tok, None, args)
    assert out["labels"] == [-100, -100, -100, -100, -100, -100, 22, 23]
