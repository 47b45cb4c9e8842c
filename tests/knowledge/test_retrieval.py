"""read_knowledge / search_knowledge cores and their LangChain wrappers."""

import json

from msmigrate.knowledge.retrieval import (read_knowledge, read_knowledge_tool, search_knowledge,
                                           search_knowledge_tool, tokenize)


def test_read_knowledge_returns_fields_and_body():
    result = read_knowledge("recompute-past-key-values")
    assert result.ok
    assert result.data["kind"] == "failure" and result.data["fields"]["owner"] == "config"
    assert "past_key_values" in result.data["body"]


def test_read_knowledge_unknown_id_suggests():
    result = read_knowledge("collator")
    assert not result.ok and "collator-not-specified" in result.data["similar_ids"]


def test_search_ranks_relevant_entry_first():
    hits = search_knowledge("which collator and template for qwen3 vl dense stand-in", kind="case").data["hits"]
    assert hits[0]["id"] == "standin-qwen3-vl"
    hits = search_knowledge("model_provider forward_step loss_func megatron", kind="doc").data["hits"]
    assert hits[0]["id"] == "megatron-route"


def test_search_rejects_bad_kind_and_empty_query():
    assert not search_knowledge("x y", kind="recipe").ok
    assert not search_knowledge("!!").ok


def test_tokenize_keeps_identifiers_whole_and_split():
    assert {"collator_id", "collator", "id"} <= set(tokenize("collate_param.collator_id"))


def test_langchain_tools_have_described_schemas_and_run():
    tool = read_knowledge_tool()
    schema = tool.args_schema.model_json_schema()
    assert schema["properties"]["entry_id"]["description"]
    out = json.loads(tool.invoke({"entry_id": "ascend-environment"}))
    assert out["ok"] and "set_env.sh" in out["data"]["body"]
    out = json.loads(search_knowledge_tool().invoke({"query": "HCCL timeout", "kind": "failure"}))
    assert out["data"]["hits"][0]["id"] == "hccl-timeout"
