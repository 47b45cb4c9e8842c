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
