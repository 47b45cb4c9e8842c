"""Pieces of the model parity probe (probes/model_parity.py) that decide what is compared: the training-mode pass
made deterministic, and the first module where two computations part."""

from __future__ import annotations

import sys

import pytest

from msmigrate.tools.runtime import PROBES_DIR

sys.path.append(str(PROBES_DIR))  # the probe imports its siblings as top-level modules
import model_parity  # noqa: E402


def test_no_dropout_zeroes_every_stochastic_probability_in_sub_configs_too():
    from transformers import Qwen2VLConfig

    cfg = Qwen2VLConfig(text_config=dict(attention_dropout=0.1), vision_config=dict())
    cfg.vision_config.drop_path_rate = 0.2
    cfg.text_config.encoder_layerdrop = 0.3
    cfg.text_config.hidden_size = 64
    zeroed = model_parity.no_dropout(cfg)
    assert sorted(zeroed) == ["text_config.attention_dropout", "text_config.encoder_layerdrop",
                              "vision_config.drop_path_rate"]
    assert cfg.text_config.attention_dropout == cfg.vision_config.drop_path_rate == 0.0
    assert cfg.text_config.hidden_size == 64 and model_parity.no_dropout(cfg) == []


def _pair():
    import torch

    def tower():
        return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.ReLU(), torch.nn.Linear(4, 2))

    torch.manual_seed(0)
    a = tower()
    b = tower()
    b.load_state_dict(a.state_dict())
    return a, b


def test_training_mode_is_deterministic_and_first_divergence_finds_the_changed_layer():
    import torch

    a, b = _pair()
    x = torch.randn(3, 4)
    model_parity.training_mode(a)
    assert a.training and torch.equal(a(x), a(x))  # dropout inert, still training mode
    assert model_parity.first_divergence(a, b, x, 1e-6) is None
    with torch.no_grad():
        b[3].weight[0, 0] += 1.0
    found = model_parity.first_divergence(a, b, x, 1e-6)
    assert found["module"] == "3" and found["class"] == "Linear" and found["max_abs_diff"] > 0


@pytest.fixture(autouse=True)
def _call_as_positional(monkeypatch):
    """run_forward passes the batch as keyword arguments plus use_cache; a Sequential takes one positional."""
    def run_forward(model, batch):
        import torch

        model_parity.training_mode(model)
        with torch.no_grad():
            return model(batch), None
    monkeypatch.setattr(model_parity, "run_forward", run_forward)


def test_a_plugin_that_casts_part_of_itself_is_named_with_its_parameters():
    import torch

    a, b = _pair()
    assert model_parity.dtype_differences(a, b) == []
    b[3].to(torch.bfloat16)  # a tower the plugin's own code keeps in bf16
    assert model_parity.dtype_differences(a, b) == [("3.weight", "float32", "bfloat16"),
                                                     ("3.bias", "float32", "bfloat16")]


def test_the_constructors_own_cast_is_seen_through_the_probes_fp32_build():
    """The probes build both sides and cast them to fp32; a plugin whose __init__ keeps its tower in bf16 (the
    heldout4 fault G1 passed with |Δlogit| 2e-7) is still named, from the dtypes its constructor left."""
    import torch
    from _meta_init import build
    from transformers import PretrainedConfig, PreTrainedModel

    class Cfg(PretrainedConfig):
        model_type = "tiny-cast"

    class Source(PreTrainedModel):
        config_class = Cfg

        def __init__(self, config):
            super().__init__(config)
            self.visual = torch.nn.Linear(4, 4)
            self.head = torch.nn.Linear(4, 2)

    class Plugin(Source):
        def __init__(self, config):
            super().__init__(config)
            self.visual.to(torch.bfloat16)

    src, plg = build(Source, Cfg()), build(Plugin, Cfg())
    assert all(p.dtype == torch.float32 for p in plg.parameters())  # what every later check sees
    assert model_parity.dtype_differences(src, plg) == [("visual.weight", "float32", "bfloat16"),
                                                         ("visual.bias", "float32", "bfloat16")]
    assert model_parity.dtype_differences(src, build(Source, Cfg())) == []


def _casting_pair():
    """A source with a tower and a rotary-like floating buffer, and a plugin whose __init__ casts the tower."""
    import torch
    from _meta_init import build
    from transformers import PretrainedConfig, PreTrainedModel

    class Cfg(PretrainedConfig):
        model_type = "tiny-cast-buffers"

    class Tower(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)
            self.register_buffer("inv_freq", torch.ones(2), persistent=False)
            self.register_buffer("ids", torch.arange(3), persistent=False)  # an integer buffer: no dtype to cast

    class Source(PreTrainedModel):
        config_class = Cfg

        def __init__(self, config):
            super().__init__(config)
            self.visual = Tower()
            self.head = torch.nn.Linear(4, 2)

    class Plugin(Source):
        def __init__(self, config):
            super().__init__(config)
            self.visual.to(torch.bfloat16)  # the cast the probe must point at

    return build(Source, Cfg()), build(Plugin, Cfg()), Plugin


def test_the_cast_is_named_by_its_module_its_buffers_and_the_line_that_casts(tmp_path):
    from pathlib import Path

    from _dtypes import cast_problem, first_cast_module

    src, plg, plugin_cls = _casting_pair()
    cast = model_parity.dtype_differences(src, plg)
    assert ("visual.inv_freq", "float32", "bfloat16") in cast and not any(n == "visual.ids" for n, _, _ in cast)
    assert first_cast_module(plg, cast) == ("visual", "Tower", "bfloat16", 3)
    text = cast_problem(plg, plugin_cls, cast, str(Path(__file__).parent.parent))
    assert text.startswith("the plugin holds 2 parameter(s) and 1 floating buffer(s) in another dtype than the "
                           "source class built from the same config: first module visual (Tower) in bfloat16 where "
                           "the source builds float32")
    here = Path(__file__).read_text().splitlines()
    line = next(i for i, t in enumerate(here, 1) if "self.visual.to(torch.bfloat16)  # the cast" in t)
    assert f"tools/test_model_parity_probe.py:{line} `self.visual.to(torch.bfloat16)" in text
    assert cast_problem(plg, plugin_cls, [], None) is None


def test_the_dtype_problem_is_the_models_and_says_what_the_config_means():
    from msmigrate.agent.routes.fsdp2.gates.master_dtype import master_sentence, master_weights
    from msmigrate.agent.routes.fsdp2.gates.parity import DTYPE_PROBLEM
    from msmigrate.knowledge.classifier import classify

    src, plg, plugin_cls = _casting_pair()
    text = "model parity: " + model_parity.cast_problem(plg, plugin_cls, model_parity.dtype_differences(src, plg))
    assert DTYPE_PROBLEM in text
    c = classify(text, gate_verdict=[text])
    assert (c.owner, c.case_id) == ("model", "parity-plugin-casts-dtype")
    plan = {"fsdp_plan": {"param_dtype": "bf16", "reduce_dtype": "fp32"}}
    meta = master_weights({"training": {"init_model_with_meta_device": True}, "parallel": plan})
    assert meta["dtype"] == "float32" and not meta["keeps_model_cast"] and "param_dtype bf16" in meta["how"]
    loaded = master_weights({"training": {"init_model_with_meta_device": False}, "parallel": plan})
    assert loaded["dtype"] == "float32" and loaded["keeps_model_cast"]
    ddp = master_weights({"training": {}, "parallel": {**plan, "fully_shard_parallel_size": 1}})
    assert ddp["dtype"] == "bf16" and not ddp["keeps_model_cast"]
    assert master_sentence(None).startswith("no delivered config")


def test_a_batch_the_source_takes_and_the_plugin_rejects_names_the_plugins_forward_file(tmp_path):
    import textwrap

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "modeling_x.py").write_text(textwrap.dedent("""
        class Plugin:
            def forward(self, **batch):
                raise ValueError("Image features and image tokens do not match, tokens: 8, features: 4")
    """))
    sys.path.insert(0, str(tmp_path / "pkg"))
    try:
        import modeling_x
    finally:
        sys.path.remove(str(tmp_path / "pkg"))
    try:
        modeling_x.Plugin().forward()
    except ValueError as exc:
        said = model_parity.plugin_rejects(dict, modeling_x.Plugin, exc, 2.5, "target pipeline (G2's collated batch)",
                                           ["input_ids", "pixel_values"], str(tmp_path), 0.1)
    assert said["passed"] is False and said["source_loss"] == 2.5
    assert said["problems"] == ["the source's own model takes the same batch (target pipeline (G2's collated batch); "
                                "loss 2.5) and the plugin's forward (defined in pkg/modeling_x.py) rejects it: "
                                "ValueError: Image features and image tokens do not match, tokens: 8, features: 4"]


def test_a_plugin_import_that_patches_the_sources_class_is_named_and_measured_on_the_unpatched_source(tmp_path):
    """The source's reference is computed before the plugin is imported; a patch of a class the source's modules
    run is named with the file that defines the replacement, and the source's numbers after it are compared with
    the reference: a patch that changes them is a problem, one that computes the same is only named."""
    import argparse
    import importlib
    import textwrap

    import torch

    (tmp_path / "lib_norm.py").write_text(textwrap.dedent("""
        import torch

        class Norm(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = torch.nn.Parameter(torch.ones(4))

            def forward(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
    """))
    (tmp_path / "plugin_pkg").mkdir()
    (tmp_path / "plugin_pkg" / "changes.py").write_text(textwrap.dedent("""
        import torch.nn.functional as F
        import lib_norm

        def fused(self, x):
            return F.layer_norm(x, (x.shape[-1],), self.weight, None, 1e-6)

        lib_norm.Norm.forward = fused
    """))
    (tmp_path / "plugin_pkg" / "same.py").write_text(textwrap.dedent("""
        import lib_norm

        _plain = lib_norm.Norm.forward

        def wrapped(self, x):
            return _plain(self, x)

        lib_norm.Norm.forward = wrapped
    """))
    sys.path.insert(0, str(tmp_path))
    try:
        lib_norm = importlib.import_module("lib_norm")
        source = torch.nn.Sequential(torch.nn.Linear(4, 4), lib_norm.Norm())
        batch = torch.randn(2, 4) + 3.0
        args = argparse.Namespace(target=str(tmp_path), model=str(tmp_path), logit_tol=1e-5, loss_tol=1e-6)
        ref, _ = model_parity.run_forward(source, batch)
        before = model_parity.snapshot(source)
        importlib.import_module("plugin_pkg.same")
        same = model_parity.import_effects(source, batch, None, args, before, ref, None)
        assert same["problem"] is None and same["max_abs_dlogit"] <= 1e-6
        assert [p["name"] for p in same["patched"]] == ["lib_norm.Norm.forward"]
        assert same["patched"][0]["now_from"] == "plugin_pkg/same.py:6"
        before = model_parity.snapshot(source)
        importlib.import_module("plugin_pkg.changes")
        found = model_parity.import_effects(source, batch, None, args, before, ref, None)
        assert found["patched"] == [{"name": "lib_norm.Norm.forward", "now_from": "plugin_pkg/changes.py:5"}]
        assert found["max_abs_dlogit"] > 1e-3
        assert found["problem"].startswith("importing and building the plugin changes what the source's own model "
                                           "computes on the same batch (max |Δlogit| ")
        assert "lib_norm.Norm.forward (now plugin_pkg/changes.py:5)" in found["problem"]
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("lib_norm", "plugin_pkg", "plugin_pkg.changes", "plugin_pkg.same"):
            sys.modules.pop(name, None)


def test_the_two_sample_batch_finds_what_crosses_from_one_sample_to_the_other_on_attended_positions():
    """A plugin whose one-sample output agrees with the source but lets the batch's samples reach each other (one
    attention span over every image of the batch) differs on the two-sample batch; padding's logits are nobody's."""
    import torch

    class Rows(torch.nn.Module):
        def __init__(self, leak=0.0, pad_noise=0.0):
            super().__init__()
            self.emb = torch.nn.Embedding(16, 4)
            self.leak, self.pad_noise = leak, pad_noise

        def forward(self, batch):
            x = self.emb(batch["input_ids"])
            x = x + self.leak * x.mean(dim=0, keepdim=True)  # 0 for one sample's own rows
            return x + self.pad_noise * (1 - batch["attention_mask"]).unsqueeze(-1)

    torch.manual_seed(0)
    source = Rows()
    pair = {"input_ids": torch.tensor([[1, 2, 3], [4, 5, 0]]), "attention_mask": torch.tensor([[1, 1, 1], [1, 1, 0]])}
    ref = model_parity.run_forward(source, pair)
    for plugin, bad in ((Rows(pad_noise=5.0), False), (Rows(leak=0.5), True)):
        plugin.load_state_dict(source.state_dict())
        said = model_parity.pair_parity(plugin, pair, ref)
        assert said["examined"] and bool(said["problem"]) == bad, said
    assert "one sample's tokens or image patches reach the other's" in said["problem"]
    assert model_parity.pair_parity(source, None, None) == {"examined": False}


def test_the_source_processor_gives_a_padded_batch_of_two_samples_with_an_image_each(tmp_path):
    import json

    import torch
    import transformers
    from forward_smoke import sample_pair_batch

    from msmigrate.testbeds.fixtures import build_source

    source = build_source("qwen2_vl", tmp_path / "qwen2_vl")
    records = source / "data" / "train.json"
    cfg = transformers.AutoConfig.from_pretrained(source)
    batch = sample_pair_batch(source, records, cfg, None, False)
    assert batch["input_ids"].shape[0] == 2 and batch["image_grid_thw"].shape[0] == 2
    assert (batch["labels"][batch["input_ids"] == cfg.image_token_id] == -100).all()
    one = json.loads(records.read_text())[:1]  # one record with an image: it twice, the copy's image mirrored
    (tmp_path / "one.json").write_text(json.dumps([{**one[0], "images": [str(records.parent / one[0]["images"][0])]}]))
    twice = sample_pair_batch(source, tmp_path / "one.json", cfg, None, False)
    half = twice["pixel_values"].shape[0] // 2
    assert not torch.equal(twice["pixel_values"][:half], twice["pixel_values"][half:])
    (tmp_path / "none.json").write_text(json.dumps([{"messages": one[0]["messages"]}]))
    assert sample_pair_batch(source, tmp_path / "none.json", cfg, None, False) is None
