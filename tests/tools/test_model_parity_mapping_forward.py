"""Model parity on remote code whose forward takes the whole batch as ONE dict (MiniCPM-V-style
``forward(data, **kwargs)``; found on a held-out slicing VLM): G1's synthetic batch cannot say what ``data`` must
hold, so G1 stays "not comparable", but G2's collated batch can feed it — the probe calls the source as
``forward(data=<batch>, labels=…, attention_mask=…)`` and compares for real (before: "requires ['data']" at G2
too, so such a source was never compared at all). A tiny remote-code model and plugin are written here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

CONFIG = '''from transformers import PretrainedConfig


class DictLMConfig(PretrainedConfig):
    model_type = "dictlm"

    def __init__(self, vocab_size=40, hidden_size=16, num_hidden_layers=1, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.hidden_size, self.num_hidden_layers = vocab_size, hidden_size, num_hidden_layers
'''
MODELING = '''import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from .configuration_dictlm import DictLMConfig


class DictLM(PreTrainedModel):
    config_class = DictLMConfig

    def __init__(self, config):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.vision = nn.Linear(3, config.hidden_size)
        self.head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def forward(self, data, **kwargs):
        h = self.embed(data["input_ids"])
        if data.get("pixel_values") is not None:
            h = h + self.vision(data["pixel_values"].mean(dim=(-1, -2)))[:, None, :]
        logits = self.head(h)
        labels = kwargs.get("labels")
        loss = None if labels is None else nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return CausalLMOutput(loss=loss, logits=logits)
'''
PLUGIN = '''import torch
from transformers.modeling_outputs import CausalLMOutput

from mindspeed_mm.fsdp.models.dictlm.upstream.modeling_dictlm import DictLM
from mindspeed_mm.fsdp.utils.register import model_register


@model_register.register("dictlm")
class DictLMForTraining(DictLM):
    def forward(self, input_ids, attention_mask=None, pixel_values=None, labels=None, **kwargs):
        {body}
'''
FAITHFUL = "return super().forward({'input_ids': input_ids, 'pixel_values': pixel_values}, labels=labels)"
NO_VISION = "return super().forward({'input_ids': input_ids}, labels=labels)"  # drops the image: must differ


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    import torch

    from msmigrate.testbeds.standin import write_standin

    root = tmp_path_factory.mktemp("mapping")
    source = root / "source"
    source.mkdir()
    (source / "configuration_dictlm.py").write_text(CONFIG)
    (source / "modeling_dictlm.py").write_text(MODELING)
    (source / "config.json").write_text(json.dumps({
        "model_type": "dictlm", "architectures": ["DictLM"], "vocab_size": 40, "hidden_size": 16,
        "auto_map": {"AutoConfig": "configuration_dictlm.DictLMConfig", "AutoModel": "modeling_dictlm.DictLM"}}))
    target = write_standin(root / "target", with_assets=False)
    upstream = target / "mindspeed_mm/fsdp/models/dictlm/upstream"
    upstream.mkdir(parents=True)
    (upstream / "__init__.py").write_text("")
    (upstream / "configuration_dictlm.py").write_text(CONFIG)
    (upstream / "modeling_dictlm.py").write_text(MODELING.replace(
        "from .configuration_dictlm", "from mindspeed_mm.fsdp.models.dictlm.upstream.configuration_dictlm"))
    torch.manual_seed(0)
    ids = torch.randint(0, 40, (1, 6))
    batch = root / "batch.pt"
    torch.save({"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone(),
                "pixel_values": torch.rand(1, 3, 4, 4)}, batch)
    return source, target, batch, root


def run_parity(setup, body: str, batch_file: str | None):
    from msmigrate.tools.target_checks import model_parity

    source, target, batch, root = setup
    (target / "mindspeed_mm/fsdp/models/dictlm/__init__.py").write_text(PLUGIN.replace("{body}", body))
    ctx = SimpleNamespace(target=target, source=source, runtime_python=sys.executable, run_dir=root / "run",
                          approval=False, code_approved=True, probe_timeout_s=300.0)
    res = model_parity(ctx, plugins=["mindspeed_mm/fsdp/models/dictlm"], model_id="dictlm", trust_remote_code=True,
                       batch_file=batch_file)
    assert res.ok, res.error
    return res.data["result"]


def test_g1_batch_stays_not_comparable(setup):
    out = run_parity(setup, FAITHFUL, None)
    assert out["passed"] is None and out["unfed"] == ["data"]


def test_the_collated_batch_feeds_the_dict_argument_and_compares(setup):
    out = run_parity(setup, FAITHFUL, str(setup[2]))
    assert out["passed"] is True, out
    assert out["source_called_as"].startswith("forward(data=<batch>, labels=")
    assert out["eager"]["max_abs_dlogit"] == 0.0
    # a plugin that loses the image is caught: the comparison is real, not a formality
    wrong = run_parity(setup, NO_VISION, str(setup[2]))
    assert wrong["passed"] is False and any("eager" in p for p in wrong["problems"])
