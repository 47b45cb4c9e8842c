"""ConfigManager: YAML (+ code, + CLI key=value) -> pydantic `Arguments`, with dynamic YAML fields."""
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Type

import yaml

from mindspeed_mm.config.arguments.base_args import BaseArguments
from mindspeed_mm.config.exception import ConfigValidationError


def _print(msg: str):
    if int(os.environ.get("RANK", "0")) == 0:
        print(msg)


def _nested_class(annotation):
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseArguments) else None


class ConfigManager:
    def __init__(self, config_class: Optional[Type[BaseArguments]] = None, config_file_path: Optional[str] = None,
                 additional_args: Optional[Dict[str, Any]] = None, allow_register_yaml_fields: bool = True):
        if config_class is None:
            from mindspeed_mm.fsdp.params.argument import Arguments
            config_class = Arguments
        if not issubclass(config_class, BaseArguments):
            raise TypeError(f"config_class must be a subclass of BaseArguments: {config_class}")
        self.config_class = config_class
        self.additional_args = additional_args or {}
        self.allow_register_yaml_fields = allow_register_yaml_fields
        self.config_file_path = self._config_file_path(config_file_path)
        self._config = None
        self._defined = {}
        self._collect_defined(config_class, "")
        self._dynamic_fields = set()

    @staticmethod
    def _config_file_path(path):
        if path:
            if not Path(path).exists():
                raise FileNotFoundError(f"Configuration file does not exist: {path}")
            return path
        if len(sys.argv) >= 2 and sys.argv[1].endswith((".yaml", ".yml")) and Path(sys.argv[1]).exists():
            return sys.argv[1]
        return None

    def _collect_defined(self, cls, prefix):
        """Leaf fields by dotted path; BaseArguments-typed fields are recursed into (and not listed themselves)."""
        for name, info in cls.model_fields.items():
            sub = _nested_class(info.annotation)
            if sub is not None:
                self._collect_defined(sub, f"{prefix}{name}.")
            else:
                self._defined[f"{prefix}{name}"] = {"type": info.annotation, "cls": cls}

    def load_and_parse(self):
        _print("[INFO] Starting configuration loading...")
        try:
            yaml_config = self._load_yaml_config()
            cli_config = self._parse_cli_args()
            self._process_yaml_extensions(yaml_config)
            self._validate_cli_args(cli_config)
            merged = _deep_merge(_deep_merge(dict(yaml_config), self.additional_args), cli_config)
            config = self.config_class(**merged)
            self._config = config
            self.print_summary()
            return config
        except Exception as e:  # the real manager wraps every failure the same way
            _print(f"[ERROR] Configuration loading failed: {e}")
            if isinstance(e, ConfigValidationError):
                raise
            raise ConfigValidationError("Configuration loading failed") from e

    def _load_yaml_config(self) -> Dict[str, Any]:
        if not self.config_file_path:
            return {}
        try:
            with open(self.config_file_path, "r", encoding="utf-8") as f:
                config = yaml.safe_load(f)
        except yaml.YAMLError as e:
            raise ConfigValidationError(f"YAML parsing failed: {self.config_file_path} - {e}") from e
        except OSError as e:
            raise ConfigValidationError(f"Failed to load configuration file: {self.config_file_path} - {e}") from e
        _print(f"[INFO] Loaded configuration file: {self.config_file_path}")
        return config or {}

    def _parse_cli_args(self) -> Dict[str, Any]:
        cli = {}
        for arg in sys.argv[1:]:
            if arg.endswith((".yaml", ".yml")) or "=" not in arg or arg.startswith("-"):
                continue
            key, value = (part.strip() for part in arg.split("=", 1))
            if not key:
                continue
            target = cli
            parts = key.split(".")
            for part in parts[:-1]:  # dotted keys become nested dicts, so "training" is what gets validated
                target = target.setdefault(part, {})
            target[parts[-1]] = yaml.safe_load(value) if value else value
        return cli

    def _validate_cli_args(self, cli: Dict[str, Any]):
        allowed = sorted(list(self._defined) + list(self._dynamic_fields))
        for key in cli:
            if key in self._defined or key in self._dynamic_fields:
                continue
            raise ConfigValidationError(
                f"Command-line argument '{key}' is not defined in the configuration class.\n"
                f"Allowed fields: {allowed}\n"
                f"Please add this field via YAML configuration file or by inheriting the configuration class.")

    def _process_yaml_extensions(self, yaml_config: Dict[str, Any], prefix: str = ""):
        for key, value in (yaml_config or {}).items():
            full_key = f"{prefix}.{key}" if prefix else key
            if full_key in self._defined or full_key in self._dynamic_fields or isinstance(value, dict):
                if isinstance(value, dict):
                    self._process_yaml_extensions(value, full_key)
                continue
            if not self.allow_register_yaml_fields:
                _print(f"[WARNING] Found undefined field '{full_key}' in YAML, ignored")
                continue
            value_type = _infer_type(value)
            self._register_nested(full_key, value_type, value)
            _print(f"[INFO] Automatically registered YAML field: {full_key} (type: {value_type}, value: {value})")

    def _register_nested(self, name, value_type, default):
        parts = name.split(".")
        cls = self.config_class
        for i, part in enumerate(parts[:-1]):
            info = cls.model_fields.get(part)
            if info is None:
                _print(f"[WARNING] Field path '{'.'.join(parts[:i + 1])}' does not exist")
                self.config_class.register_field(name, value_type, default)
                break
            sub = _nested_class(info.annotation)
            if sub is None:
                _print(f"[WARNING] Field '{part}' exists but is not a BaseArguments subclass: {info.annotation}")
                self.config_class.register_field(name, value_type, default)
                break
            cls = sub
        else:
            cls.register_field(parts[-1], value_type, default)
        self._dynamic_fields.add(name)

    def print_summary(self):
        lines = ["=" * 60, "BaseArguments Configuration Manager Summary", "=" * 60,
                 f"\nConfiguration class: {self.config_class.__name__}",
                 f"Configuration file: {self.config_file_path or 'None'}",
                 f"Allow registering YAML fields: {self.allow_register_yaml_fields}",
                 f"\nDefined field count: {len(self._defined)}",
                 f"Dynamic field count: {len(self._dynamic_fields)}",
                 f"Total field count: {len(self._defined) + len(self._dynamic_fields)}",
                 "\n\n============ Configuration Details ============", self._config.to_str()]
        if self._dynamic_fields:
            lines.append("\n\n============ Dynamic Fields ============")
            lines.extend(f" {name}" for name in sorted(self._dynamic_fields))
        lines.append("=" * 60)
        _print("\n".join(lines))

    def get_defined_fields(self) -> List[str]:
        return sorted(list(self._defined) + list(self._dynamic_fields))


def _deep_merge(base: Dict[str, Any], override: Dict[str, Any]) -> Dict[str, Any]:
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = _deep_merge(dict(base[key]), value)
        else:
            base[key] = value
    return base


def _infer_type(value):
    if value is None:
        return None
    for t in (bool, int, float, str):
        if isinstance(value, t):
            return t
    if isinstance(value, list):
        if value and all(isinstance(v, type(value[0])) for v in value):
            return List[type(value[0])]
        return list
    return dict if isinstance(value, dict) else None
