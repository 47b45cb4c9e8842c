"""What the LLM policy offers per phase (agent/policies/phase_offer.py): the tools that phase's work can use, schemas
with a repeated field description said once, the source facts that phase reads — measured on the real tool set."""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.utils.function_calling import convert_to_openai_tool

from msmigrate.agent.policies.phase_offer import (MEGATRON_PHASE_TOOLS, PHASE_TOOLS, PLUGIN_ROUTE_TOOLS,
                                                  compact_field, offered_tools, openai_schemas,
                                                  phase_source_facts)
from msmigrate.agent.runner import build_tools
from msmigrate.core.run_context import RunContext


def real_tools(tmp_path):
    return build_tools(RunContext("t", tmp_path / "run", tmp_path / "src", tmp_path / "tgt", "m"))


def test_each_phase_gets_its_tools_and_every_phase_can_finish(tmp_path):
    tools = real_tools(tmp_path)
    names = {t.name for t in tools}
    assert set(PHASE_TOOLS) <= names  # the table names real tools (a renamed tool would silently stay offered)
    for phase in ("model", "data", "config"):
        offered = {t.name for t in offered_tools(phase, tools)}
        assert {"finish_phase", "read_file", "write_file", "edit_file", "rollback"} <= offered
        assert offered == {n for n in names if phase in PHASE_TOOLS.get(n, {phase}) and n not in MEGATRON_PHASE_TOOLS}
    assert "vendor_remote_code" in {t.name for t in offered_tools("model", tools)}
    assert "vendor_remote_code" not in {t.name for t in offered_tools("data", tools)}
    assert "check_config" not in {t.name for t in offered_tools("model", tools)}
    # the prompt carries the source summary: the tool that fetches it again is offered in no work phase
    assert not any("hf_model_summary" in {t.name for t in offered_tools(p, tools)} for p in ("model", "data", "config"))
    # unknown phase: all of the route's tools (the Megatron route's check tools only on a Megatron plan)
    assert [t.name for t in offered_tools("classify", tools)] == [t.name for t in tools
                                                                 if t.name not in MEGATRON_PHASE_TOOLS]


def test_a_megatron_plan_offers_the_routes_tools_in_the_phase_whose_gate_they_answer_for(tmp_path):
    tools = real_tools(tmp_path)
    names = {t.name for t in tools}
    assert set(MEGATRON_PHASE_TOOLS) | PLUGIN_ROUTE_TOOLS <= names
    offered = {p: {t.name for t in offered_tools(p, tools, "megatron")} for p in ("model", "data", "config")}
    assert offered["model"] & set(MEGATRON_PHASE_TOOLS) == {"convert_weights"}
    assert offered["data"] & set(MEGATRON_PHASE_TOOLS) == {"check_megatron_data"}
    assert offered["config"] & set(MEGATRON_PHASE_TOOLS) == {"check_parallel_sizes", "check_megatron_config"}
    for phase, got in offered.items():
        # the plugin route's tools build / check an FSDP2 plugin and its YAML: none of it exists on this route
        assert not got & PLUGIN_ROUTE_TOOLS and "hf_model_summary" not in got, phase
        assert {"finish_phase", "read_file", "write_file", "edit_file", "grep", "read_knowledge"} <= got, phase
    # and the FSDP2 route never sees the Megatron tools
    assert not any({t.name for t in offered_tools(p, tools)} & set(MEGATRON_PHASE_TOOLS)
                   for p in ("model", "data", "config", "classify"))


def test_schemas_say_a_repeated_description_once_and_keep_every_field(tmp_path):
    tools = real_tools(tmp_path)
    full = [convert_to_openai_tool(t) for t in tools]
    short = openai_schemas(tools)
    assert len(json.dumps(short)) < len(json.dumps(full))
    seen = {}
    for f, s in zip(full, short):
        fp, sp = f["function"]["parameters"]["properties"], s["function"]["parameters"]["properties"]
        assert fp.keys() == sp.keys() and f["function"]["parameters"].get("required") == \
            s["function"]["parameters"].get("required")
        for field, spec in fp.items():
            text = spec.get("description")
            if sp[field].get("description", "").startswith("as "):
                assert seen[text] == sp[field]["description"][3:]  # points at the tool.field that said it
            elif text:
                seen.setdefault(text, f"{f['function']['name']}.{field}")
            optional = field not in (f["function"]["parameters"].get("required") or [])
            expected = compact_field(spec) if optional else spec
            assert {k: v for k, v in expected.items() if k != "description"} == \
                {k: v for k, v in sp[field].items() if k != "description"}
    assert any(d["description"].startswith("as repo_tree.where")
               for s in short for d in s["function"]["parameters"]["properties"].values() if "description" in d)


def test_source_facts_per_phase():
    facts = {"chat_template": {"text": "..."}, "processor_configs": {}, "weight_files": ["m.safetensors"],
             "architectures": ["X"], "data_sample": {"records": 2}}
    assert set(phase_source_facts("data", facts)) == {"chat_template", "processor_configs", "architectures",
                                                      "data_sample"}
    assert set(phase_source_facts("model", facts)) == {"weight_files", "architectures"}
    assert phase_source_facts("classify", facts) == facts


def test_optional_fields_lose_what_says_nothing_and_keep_what_does():
    """An optional field's ``anyOf [X, null]`` with default null is X, an empty default is dropped (``required`` already
    says the field is optional), a default that says something stays; the tool still accepts null (pydantic)."""
    assert compact_field({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": None,
                          "description": "d"}) == {"type": "integer", "minimum": 1, "description": "d"}
    assert compact_field({"type": "string", "default": ""}) == {"type": "string"}
    assert compact_field({"type": "boolean", "default": False}) == {"type": "boolean"}
    assert compact_field({"type": "array", "default": []}) == {"type": "array"}
    for kept in ({"type": "string", "default": "target"}, {"type": "integer", "default": 0},
                 {"type": "integer", "default": 4}, {"anyOf": [{"type": "string"}, {"type": "integer"}], "default": None}):
        assert compact_field(kept) == {k: v for k, v in kept.items() if k != "default" or v is not None}
