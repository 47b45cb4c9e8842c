"""LangChain wrapper of ``validate_config`` (pydantic args). Schema / inventory / module tree are read from JSON
files so a policy can pass paths it got from earlier tool calls (probe outputs saved in the run dir)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from msmigrate.core.tool_result import ToolResult, make_tool
from msmigrate.tools.yaml_validator.core import validate_config
from msmigrate.tools.yaml_validator.schema import load_schema_file


class ValidateConfigArgs(BaseModel):
    config_path: str = Field(description="Path of the plugin-route YAML to check (the file the launcher will pass).")
    schema_path: str = Field(description="JSON schema of the target's argument models (output of the "
                                         "config_schema probe, saved in the run dir).")
    target_root: str | None = Field(None, description="Target checkout root; enables plugin-path checks and, "
                                                       "without inventory_path, a static registry scan.")
    inventory_path: str | None = Field(None, description="JSON of the target inventory (model_ids, dataset_types, "
                                                         "templates, mm_plugins, collators).")
    module_tree_path: str | None = Field(None, description="JSON of the built model's module tree (names, classes, "
                                                           "no_split_modules, accepts_past_key_values).")
    device: str | None = Field(None, description="Device of the run: cpu, cuda or npu (enables device checks).")


def validate_config_from_files(config_path: str, schema_path: str, target_root: str | None = None,
                               inventory_path: str | None = None, module_tree_path: str | None = None,
                               device: str | None = None) -> ToolResult:
    for label, p in (("schema", schema_path), ("inventory", inventory_path), ("module tree", module_tree_path)):
        if p is not None and not Path(p).is_file():
            return ToolResult.failure(f"{label} file not found: {p}")
    if not Path(config_path).is_file():
        return ToolResult.failure(f"config file not found: {config_path}")
    inventory = json.loads(Path(inventory_path).read_text()) if inventory_path else None
    if isinstance(inventory, dict) and "data" in inventory and "model_ids" not in inventory:
        inventory = inventory["data"]  # a saved ToolResult
    tree = json.loads(Path(module_tree_path).read_text()) if module_tree_path else None
    return validate_config(Path(config_path), schema=load_schema_file(schema_path), inventory=inventory,
                           module_tree=tree, target_root=Path(target_root) if target_root else None, device=device)


def validate_config_tool():
    return make_tool(
        "validate_config",
        "Strictly validate a MindSpeed-MM plugin-route YAML against the target's own argument schema: unknown or "
        "misplaced keys (which the framework silently ignores), types, Literals, required keys, YAML gotchas, "
        "registry cross-references and module patterns. Returns findings with code, key path, line and a fix.",
        ValidateConfigArgs, validate_config_from_files)
