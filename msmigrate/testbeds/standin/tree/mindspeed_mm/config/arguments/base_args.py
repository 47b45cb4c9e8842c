"""BaseArguments: pydantic v2 model with extra='allow' and class-level dynamic fields registered from YAML."""
from dataclasses import dataclass
from typing import Any, Dict, Optional, Type

from pydantic import BaseModel, ConfigDict

# class -> {field name -> FieldInfo}; kept outside the classes so pydantic does not treat it as a private attr.
_DYNAMIC_FIELDS: Dict[type, Dict[str, "FieldInfo"]] = {}


@dataclass
class FieldInfo:
    value_type: Optional[Type] = None
    default: Any = None
    description: str = ""
    required: bool = False


class BaseArguments(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=True)

    def __init__(self, **data):
        super().__init__(**data)
        for name, info in dynamic_fields_of(type(self)).items():
            if name not in data:
                setattr(self, name, info.default)

    @classmethod
    def register_field(cls, name, value_type=None, default=None, description="", required=False):
        """Register a field at class level (values arrive as pydantic extras)."""
        if name in cls.model_fields:
            raise AttributeError(f"Field '{name}' already exists, cannot register again")
        _DYNAMIC_FIELDS.setdefault(cls, {})[name] = FieldInfo(value_type, default, description, required)

    def to_dict(self) -> Dict[str, Any]:
        out = {}
        for key in list(type(self).model_fields) + list((self.model_extra or {}).keys()):
            value = getattr(self, key, None)
            out[key] = value.to_dict() if isinstance(value, BaseArguments) else value
        return out

    def to_str(self, indent: int = 0) -> str:
        lines = []
        for key, value in self.to_dict().items():
            if isinstance(value, dict):
                lines.append(" " * indent + f"{key}:")
                lines.extend(_dict_lines(value, indent + 2))
            else:
                lines.append(" " * indent + f"{key}: {value}")
        return "\n".join(lines)


def _dict_lines(d, indent):
    lines = []
    for key, value in d.items():
        if isinstance(value, dict):
            lines.append(" " * indent + f"{key}:")
            lines.extend(_dict_lines(value, indent + 2))
        else:
            lines.append(" " * indent + f"{key}: {value}")
    return lines


def dynamic_fields_of(cls) -> Dict[str, FieldInfo]:
    merged = {}
    for klass in reversed(cls.__mro__):
        merged.update(_DYNAMIC_FIELDS.get(klass, {}))
    return merged
