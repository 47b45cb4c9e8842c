"""Which PreTrainedModel classes remote code builds and the attention each declares, read by AST before anything runs:
blind live run 12's check_forward failed on a vendored vision tower without ``_supports_sdpa`` that nothing had
flagged. The remote code here follows conventions unlike the InternVL fixture's: a shared base class carrying the
flag, sub-models built with ``_from_config`` two levels deep, a language model built by transformers' Auto class."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from msmigrate.agent.nodes.plan import attention_reason
from msmigrate.tools.repo_reader.attention_facts import remote_attention_facts
from msmigrate.tools.repo_reader.hf_summary import hf_summary

FIXTURE = Path(__file__).resolve().parents[2] / "msmigrate" / "testbeds" / "fixtures" / "custom_code" / "internvl_chat"

MODELING = '''
import torch
from torch import nn
from transformers import AutoModelForCausalLM, PreTrainedModel
from transformers import modeling_utils


class OmniPreTrained(PreTrainedModel):
    _supports_sdpa = True
    _supports_flash_attn = True


class Resampler(modeling_utils.PreTrainedModel):
    """declares nothing: built by the audio tower, two levels down"""


class AudioTower(PreTrainedModel):
    _supports_sdpa: bool = True

    def __init__(self, config):
        super().__init__(config)
        self.resampler = Resampler._from_config(config)


class VisionTower(OmniPreTrained):
    def __init__(self, config):
        super().__init__(config)
        self.proj = nn.Linear(4, 4)  # a plain module: not a PreTrainedModel, not listed


class Unused(PreTrainedModel):
    pass


class OmniForCausalLM(OmniPreTrained):
    def __init__(self, config):
        super().__init__(config)
        self.vision = VisionTower(config.vision_config)
        self.audio = AudioTower(config.audio_config)
        self.llm = AutoModelForCausalLM.from_config(config.text_config)  # transformers declares its own flags
'''


def write_source(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "modeling_omni.py").write_text(textwrap.dedent(MODELING))
    (folder / "config.json").write_text(json.dumps({"architectures": ["OmniForCausalLM"], "model_type": "omni",
                                                    "auto_map": {"AutoModelForCausalLM":
                                                                 "modeling_omni.OmniForCausalLM"}}))
    return folder


def test_built_classes_their_builders_and_inherited_flags(tmp_path):
    facts = remote_attention_facts(write_source(tmp_path / "src"), "OmniForCausalLM")
    rows = {r["class"]: r for r in facts["classes"]}
    assert set(rows) == {"OmniForCausalLM", "VisionTower", "AudioTower", "Resampler"}  # not Unused, not the LLM
    assert rows["VisionTower"]["declares"]["_supports_sdpa"] is True  # from the shared base
    assert rows["Resampler"]["built_by"].startswith("AudioTower.__init__ (modeling_omni.py:")
    assert facts["lacks"] == {"sdpa": ["Resampler"], "flash_attention_2": ["AudioTower", "Resampler"]}
    reason = attention_reason({"remote_attention": facts})
    assert "no _supports_sdpa (sdpa) on Resampler (modeling_omni.py:" in reason and "built by AudioTower" in reason


def test_the_source_summary_carries_them_and_the_internvl_fixtures_vision_tower_is_flagged(tmp_path):
    summary = hf_summary(write_source(tmp_path / "src")).data
    assert summary["remote_attention"]["lacks"]["sdpa"] == ["Resampler"]
    facts = remote_attention_facts(FIXTURE, "InternVLChatModel")
    assert facts["lacks"]["sdpa"] == ["InternVisionModel"]
    assert "InternVLChatModel.__init__" in {r["class"]: r for r in facts["classes"]}["InternVisionModel"]["built_by"]


def test_nothing_to_flag_when_every_built_class_declares_it(tmp_path):
    src = write_source(tmp_path / "src")
    text = (src / "modeling_omni.py").read_text().replace('"""declares nothing: built by the audio tower, two '
                                                          'levels down"""', "_supports_sdpa = True")
    (src / "modeling_omni.py").write_text(text)
    facts = remote_attention_facts(src, "OmniForCausalLM")
    assert "sdpa" not in facts["lacks"]
    assert attention_reason({"remote_attention": {**facts, "lacks": {}}}) is None
    assert remote_attention_facts(src, "NotAClassHere") is None


NESTED = '''
from torch import nn
from transformers import PreTrainedModel


class TowerModel(PreTrainedModel):
    pass


class ImageEmbedding(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.tower = TowerModel(config)


class TopModel(PreTrainedModel):
    _supports_sdpa = True

    def __init__(self, config):
        super().__init__(config)
        self.embed = ImageEmbedding(config)
'''


def test_a_tower_nested_in_a_plain_module_is_covered(tmp_path):
    """A vision tower built inside an embedding module (not a PreTrainedModel itself) is built by the top class
    all the same, and transformers checks its attention flags: it is listed, with the chain that builds it."""
    (tmp_path / "modeling_top.py").write_text(NESTED)
    facts = remote_attention_facts(tmp_path, "TopModel")
    rows = {r["class"]: r for r in facts["classes"]}
    assert set(rows) == {"TopModel", "TowerModel"}  # the plain module is walked through, not listed
    assert rows["TowerModel"]["built_by"].startswith("TopModel.__init__ (modeling_top.py:")
    assert "→ ImageEmbedding.__init__ (modeling_top.py:" in rows["TowerModel"]["built_by"]
    assert facts["lacks"]["sdpa"] == ["TowerModel"]


def test_a_reader_that_raises_is_a_recorded_fact_not_a_crash(tmp_path, monkeypatch):
    """Source analysis never crashes: the reader's attention facts raising (remote code it cannot read) becomes
    ``could not derive the attention facts of the remote code: …`` in the summary, which the plan shows."""
    import importlib

    module = importlib.import_module("msmigrate.tools.repo_reader.hf_summary")

    def boom(*_a, **_k):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(module, "remote_attention_facts", boom)
    summary = module.hf_summary(write_source(tmp_path / "src"))
    assert summary.ok and "remote_attention" not in summary.data
    assert summary.data["could_not_derive"] == [
        "could not derive the attention facts of the remote code: RecursionError: maximum recursion depth exceeded"]
