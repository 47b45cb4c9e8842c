"""What the LLM policy offers the model in a phase: the tools that phase's work can use, as OpenAI function schemas
in which a field description already given by an earlier tool of the same request is said once, and the source
facts that phase's work reads.

Why: the schemas are sent whole with every request (the largest fixed part of it, ~12.8k chars for 18 tools), and a
tool that serves another phase's gate is noise the model still reads (and may call: a G3 check in the model phase,
before there is a config). Which phase a tool serves follows from what it does, never from a model family; every
tool not named here serves every phase. Only what is OFFERED changes: the tools node still runs any known tool, so
a replayed or resumed run that called one elsewhere replays as it was.
"""

from __future__ import annotations

import copy
from typing import Any

# tool -> the phases whose work it serves (each a fact about the tool, said in its comment)
PHASE_TOOLS: dict[str, frozenset[str]] = {
    # the source summary every work phase's prompt already opens with ("Source model"): a call only resends it
    "hf_model_summary": frozenset(),
    # copies the source's remote code into the MODEL plugin dir
    "vendor_remote_code": frozenset({"model"}),
    # the module tree: the plugin's blocks (model) and the FSDP wrap / recompute patterns (config)
    "inspect_model": frozenset({"model", "config"}),
    # one forward through the plugin class: G1's, or G2's on the collated batch
    "check_forward": frozenset({"model", "data"}),
    # G2's pipeline on a YAML (the data phase writes the YAML's data section, the config phase the rest of it)
    "check_data": frozenset({"data", "config"}),
    # G3's strict validation of a YAML
    "check_config": frozenset({"data", "config"}),
    # an outline of Python code: the model and data phases write it; the config phase writes a YAML and a launch
    # script and reads the module tree from inspect_model
    "python_outline": frozenset({"model", "data"}),
}


# The Megatron route (a plan with backend megatron): its check tools, each offered in the phase whose gate it
# answers for, and only on that route; the plugin route's tools build and check an FSDP2 plugin, its YAML and its
# vendored code, none of which the Megatron route has, so a Megatron plan does not offer them.
MEGATRON_PHASE_TOOLS: dict[str, frozenset[str]] = {
    "convert_weights": frozenset({"model"}),  # the converter step of the model phase (G1 repeats it)
    "check_megatron_data": frozenset({"data"}),  # G2's data-JSON check
    "check_parallel_sizes": frozenset({"config"}),  # the sizes the launch script sets
    "check_megatron_config": frozenset({"config"}),  # G3's model JSON + launch script check
}
PLUGIN_ROUTE_TOOLS = frozenset({"vendor_remote_code", "inspect_model", "check_forward", "check_data",
                                "check_config"})


def offered_tools(phase: str, tools: list[Any], backend: str | None = None) -> list[Any]:
    """The tools offered in ``phase`` of the plan's ``backend`` route (all of a route's tools in a phase these
    tables do not know)."""
    if backend == "megatron":
        table = {**PHASE_TOOLS, **MEGATRON_PHASE_TOOLS}
        return [t for t in tools if t.name not in PLUGIN_ROUTE_TOOLS
                and phase in table.get(t.name, frozenset({phase}))]
    tools = [t for t in tools if t.name not in MEGATRON_PHASE_TOOLS]
    known = set().union(*PHASE_TOOLS.values())
    if phase not in known:
        return list(tools)
    return [t for t in tools if phase in PHASE_TOOLS.get(t.name, frozenset({phase}))]


def compact_field(spec: dict[str, Any]) -> dict[str, Any]:
    """One optional field's schema without what says nothing new: ``anyOf [X, null]`` with default null is X (the
    field is optional; the tool still accepts null), and an empty default (``""``, ``false``, ``null``, ``[]``) is
    dropped; a default that says something (``"target"``, ``4``) stays."""
    spec = dict(spec)
    options = spec.get("anyOf")
    if isinstance(options, list) and spec.get("default", 0) is None:
        kept = [o for o in options if o != {"type": "null"}]
        if len(kept) == 1 and len(kept) < len(options):
            spec.pop("anyOf")
            spec = {**kept[0], **spec}
    if "default" in spec:
        value = spec["default"]
        if value is None or value is False or (isinstance(value, (str, list)) and not value):  # (not 0)
            spec.pop("default")
    return spec


def openai_schemas(tools: list[Any]) -> list[dict[str, Any]]:
    """The tools' OpenAI function schemas, sent whole with every request (a quarter of blind live run 12's prompt
    characters): a field whose description an earlier tool of this list gave word for word keeps its type and
    points there instead (``as <tool>.<field>``), and optional fields lose what says nothing (compact_field)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    said: dict[str, str] = {}  # description -> "tool.field" that said it first
    out = []
    for tool in tools:
        schema = copy.deepcopy(convert_to_openai_tool(tool))
        fn = schema["function"]
        params = fn.get("parameters") or {}
        required = set(params.get("required") or [])
        props = params.get("properties") or {}
        for field in list(props):
            spec = props[field] if field in required else compact_field(props[field])
            props[field] = spec
            text = spec.get("description")
            if not text or len(text) < 40:  # a short description costs less than the pointer's lookup
                continue
            if text in said:
                spec["description"] = f"as {said[text]}"
            else:
                said[text] = f"{fn['name']}.{field}"
        out.append(schema)
    return out


# source fact -> the phases that read it (every fact not named here goes to every phase)
PHASE_FACTS: dict[str, frozenset[str]] = {
    # the chat format and the image processor's settings: what the data pipeline must reproduce
    "chat_template": frozenset({"data"}),
    "processor_configs": frozenset({"data"}),
    # the sample data (file, record count, keys, first record): what the dataset's attr mapping reads
    "data_sample": frozenset({"data"}),
    # the checkpoint files: what the model plugin loads and the config points at
    "weight_files": frozenset({"model", "config"}),
    "weight_files_count": frozenset({"model", "config"}),
    # the remote code's PreTrainedModel classes and the attention each declares: what the plugin must declare (model)
    # and what model.attn_implementation may ask for (config)
    "remote_attention": frozenset({"model", "config"}),
}


def phase_source_facts(phase: str, facts: dict[str, Any]) -> dict[str, Any]:
    """The source facts shown in ``phase``'s prompt (all of them in a phase this table does not know)."""
    known = set().union(*PHASE_FACTS.values())
    if phase not in known:
        return dict(facts)
    return {k: v for k, v in facts.items() if phase in PHASE_FACTS.get(k, frozenset({phase}))}
