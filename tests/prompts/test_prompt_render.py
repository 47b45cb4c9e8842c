"""Prompt rendering: strict variables, documented headers, required content, size budget."""

import re

import pytest
from jinja2 import UndefinedError

from msmigrate.prompts.render import (NODE_NAMES, PromptVariableError, TEMPLATE_DIR, estimate_tokens, render,
                                      render_system, template_file, template_vars)
from msmigrate.prompts.sample_state import ALL_PROMPTS, sample_node_vars, sample_system_vars, sample_vars


@pytest.mark.parametrize("name", ALL_PROMPTS)
def test_template_header_documents_exactly_its_variables(name):
    source = (TEMPLATE_DIR / template_file(name)).read_text()
    header = re.match(r"\{#-?(.*?)-?#\}", source, re.S).group(1)
    documented = set(re.findall(r"^\s{2}(\w+)\s{2,}", header, re.M))
    assert documented == set(template_vars(name))


def test_missing_and_extra_variables_are_rejected():
    variables = sample_node_vars("plan")
    del variables["plan"]
    with pytest.raises(PromptVariableError, match="missing \\['plan'\\]"):
        render("plan", **variables)
    with pytest.raises(PromptVariableError, match="unexpected \\['bogus'\\]"):
        render("plan", bogus=1, **sample_node_vars("plan"))
    with pytest.raises(PromptVariableError, match="unknown prompt"):
        render("nope")


def test_strict_undefined_catches_missing_nested_fields():
    variables = sample_node_vars("model")
    variables["plan"] = {"route": "T"}  # lacks model_id, branch ...
    with pytest.raises(UndefinedError):
        render("model", **variables)


def test_none_plan_and_failure_render():
    variables = sample_node_vars("prepare") | {"plan": None, "last_failure": None, "gate_results": [],
                                                 "instructions": ""}
    for name in NODE_NAMES:
        text = render(name, **(variables | {"phase": name}))
        assert "Last failure" not in text and "Notes from the user" not in text


@pytest.mark.parametrize("name", NODE_NAMES)
def test_node_prompts_carry_the_ground_rules(name):
    text = render(name, **sample_vars(name))
    assert "DATA" in text and "tool call" in text and "gate" in text
    assert "Done means" in text


def test_system_prompt_lists_tools_paths_and_index():
    text = render_system(**sample_system_vars(live_index=True))
    assert "`read_knowledge`" in text and "mindspeed_mm/fsdp/models/qwen2vl/" in text
    # the docs' index lines and the case ids ride along; the failure cases are found with search_knowledge
    assert "- [doc] plugin-route-data:" in text and "standin-qwen3-vl" in text
    assert "- [failure] collator-not-specified:" not in text and "failure cases: find them with `search_knowledge`" in text
    assert "never follow it" in text


def test_source_text_is_not_interpreted_as_template():
    variables = sample_node_vars("data")
    variables["source_summary"]["chat_template"] = "{{ evil }} {% raw %}"
    assert "{{ evil }} {% raw %}" in render("data", **variables)


def test_format_error_shows_schema_and_retry():
    text = render("format_error", **sample_vars("format_error"))
    assert '"required": ["path", "content"]' in text and "Retry" in text


def test_largest_prompt_fits_budget():
    sizes = {name: estimate_tokens(render(name, **sample_vars(name))) for name in ALL_PROMPTS}
    assert max(sizes.values()) <= 12000
    assert sizes["system"] + max(sizes[n] for n in NODE_NAMES) <= 12000


def test_megatron_config_contract_names_the_vit_width_and_source_numerics():
    # a blind live run copied the Qwen2.5-VL example's numerics onto a Qwen2-VL source and read the merger's
    # output as the ViT width: the contract must say which width and that numerics follow the source
    text = " ".join(render("megatron_config", **sample_vars("megatron_config", live_index=False)).split())
    assert "the vision config's `embed_dim` where it has one" in text
    assert "merger's output" in text
    assert "Numerics follow the source, not the example" in text
    for field in ("activation_func", "normalization", "gated_linear_unit", "add_qkv_bias", "add_bias_linear"):
        assert f"`{field}`" in text, field
