"""The attention implementations a source supports, read from its built classes' own flags (the module-tree probe),
chosen by the draft and checked by G3: a delivered ``attn_implementation: sdpa`` of a remote-code class that sets
``_supports_sdpa = False`` passed G1–G3 and failed G4's launch with transformers' "does not support an attention
implementation through torch.nn.functional.scaled_dot_product_attention yet"."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from msmigrate.agent.routes.fsdp2.attention_choice import attention_findings, choose_attention
from msmigrate.agent.routes.fsdp2.rules.autofix import apply_failure
from msmigrate.tools.runtime import run_probe

CONFIGURATION = '''
from transformers import PretrainedConfig


class TinyAttnConfig(PretrainedConfig):
    model_type = "tiny_attn"

    def __init__(self, hidden_size=8, vocab_size=32, **kwargs):
        self.hidden_size = hidden_size
        self.vocab_size = vocab_size
        super().__init__(**kwargs)
'''

MODELING = '''
from torch import nn
from transformers import PreTrainedModel

from .configuration_tiny_attn import TinyAttnConfig


class TinyTower(PreTrainedModel):
    config_class = TinyAttnConfig
    _supports_sdpa = True

    def __init__(self, config):
        super().__init__(config)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)


class TinyAttnForCausalLM(PreTrainedModel):
    config_class = TinyAttnConfig
    _supports_sdpa = False

    def __init__(self, config):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.tower = TinyTower(config)
        self.head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def forward(self, input_ids=None, labels=None, **kwargs):
        return self.head(self.tower.proj(self.embed(input_ids)))
'''


@pytest.fixture(scope="module")
def no_sdpa_source(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("no_sdpa")
    (folder / "configuration_tiny_attn.py").write_text(textwrap.dedent(CONFIGURATION))
    (folder / "modeling_tiny_attn.py").write_text(textwrap.dedent(MODELING))
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["TinyAttnForCausalLM"], "model_type": "tiny_attn", "hidden_size": 8, "vocab_size": 32,
        "auto_map": {"AutoConfig": "configuration_tiny_attn.TinyAttnConfig",
                     "AutoModelForCausalLM": "modeling_tiny_attn.TinyAttnForCausalLM"}}))
    return folder


def test_transformers_refuses_sdpa_on_the_fixture_class(no_sdpa_source):
    """The fixture reproduces the launch failure: building it with sdpa raises transformers' own error."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(no_sdpa_source, trust_remote_code=True)
    with pytest.raises(ValueError, match="scaled_dot_product_attention"):
        AutoModelForCausalLM.from_config(cfg, trust_remote_code=True, attn_implementation="sdpa")


def test_the_module_tree_probe_reads_support_from_the_built_classes(no_sdpa_source):
    res = run_probe(sys.executable, "module_tree", ["--model", str(no_sdpa_source), "--trust-remote-code"],
                    timeout=300)
    assert res.ok, res.error
    support = res.data["result"]["attention_support"]
    assert support["supported"] == ["eager"]
    # the top class sets the flag False; the tower declares sdpa but no flash attention
    assert support["lacks"]["sdpa"] == ["TinyAttnForCausalLM"]
    assert support["lacks"]["flash_attention_2"] == ["TinyAttnForCausalLM", "TinyTower"]


TREE = {"model_class": "modeling_tiny_attn.TinyAttnForCausalLM",
        "attention_support": {"supported": ["eager"], "lacks": {"sdpa": ["TinyAttnForCausalLM"],
                                                                 "flash_attention_2": ["TinyAttnForCausalLM"]}}}


def test_the_draft_picks_an_implementation_the_source_supports():
    assert choose_attention({}, TREE, "sdpa")[0] == "eager"
    value, why = choose_attention({}, TREE, "flash_attention_2")
    assert value == "eager" and "TinyAttnForCausalLM" in why and "flash_attention_2" in why
    assert choose_attention({}, TREE, None)[0] == "eager"
    # a source that supports the example's value keeps it, and sdpa is the pick where the example names none
    full = {"attention_support": {"supported": ["eager", "sdpa", "flash_attention_2"], "lacks": {}}}
    assert choose_attention({}, full, "flash_attention_2") == ("flash_attention_2", None)
    assert choose_attention({}, full, None) == ("sdpa", None)
    # no built tree yet: the remote code's AST facts the plan recorded decide
    assert choose_attention({"attention_flags_missing": {"sdpa": ["X"]}}, {}, None)[0] == "eager"


def test_g3_fails_an_unsupported_implementation_with_key_value_and_what_the_source_supports():
    found = attention_findings({"model": {"attn_implementation": "sdpa"}}, {}, TREE)
    assert len(found) == 1 and found[0]["code"] == "attn-unsupported" and found[0]["severity"] == "error"
    assert found[0]["path"] == "model.attn_implementation" and found[0]["value"] == "sdpa"
    assert "TinyAttnForCausalLM" in found[0]["message"] and "supports eager" in found[0]["message"]
    # the key absent: the target's default (flash_attention_2) is what the build asks for
    assert attention_findings({"model": {}}, {}, TREE)[0]["value"] == "flash_attention_2"
    assert attention_findings({"model": {"attn_implementation": "eager"}}, {}, TREE) == []


def test_the_rules_repair_sets_the_value_the_draft_derives():
    cfg = {"model": {"attn_implementation": "sdpa"}}
    found = attention_findings(cfg, {}, TREE)
    fresh = {"model": {"attn_implementation": choose_attention({}, TREE, "sdpa")[0]}}
    done = apply_failure(cfg, {"gate": "G3", "autofix": []}, found, TREE, reference=fresh)
    assert cfg["model"]["attn_implementation"] == "eager" and done


def test_g3s_finding_is_a_catalog_case_owned_by_config():
    from msmigrate.knowledge.classifier import classify

    found = attention_findings({"model": {"attn_implementation": "sdpa"}}, {}, TREE)[0]
    line = f"[{found['code']}] {found['path']}: {found['message']}"
    verdict = classify(line, [found["code"]], gate_verdict=[line])
    assert (verdict.case_id, verdict.owner) == ("attn-implementation-unsupported", "config")
