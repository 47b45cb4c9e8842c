"""The FSDP2 plugin route's code templates (``templates/``: model plugin, mm_plugin class, template call, collator)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).parent / "templates"


def render_template(template_file: str, **values: Any) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, keep_trailing_newline=True)
    env.filters["py"] = repr  # a Python literal (tojson would write null / true into generated Python)
    return env.get_template(template_file).render(**values)
