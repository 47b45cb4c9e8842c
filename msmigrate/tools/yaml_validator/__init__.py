"""Strict validator for plugin-route YAML configs (gate G3). See ``core.validate_config``."""

from msmigrate.tools.yaml_validator.core import validate_config
from msmigrate.tools.yaml_validator.findings import Finding
from msmigrate.tools.yaml_validator.patterns import ModuleTree
from msmigrate.tools.yaml_validator.schema import load_schema_file, schema_from_target
from msmigrate.tools.yaml_validator.tool import validate_config_from_files, validate_config_tool

__all__ = ["validate_config", "Finding", "ModuleTree", "load_schema_file", "schema_from_target",
           "validate_config_from_files", "validate_config_tool"]
