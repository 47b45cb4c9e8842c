"""The code templates of the generated framework code (``code_templates_j2/``: the FSDP2 route's model plugin, the
data branch B mm_plugin class, template call and collator both routes write)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).parent / "code_templates_j2"


def render_template(template_file: str, **values: Any) -> str:
    """A template rendered; generated Python comes out formatted by the framework's own formatter (black, its
    ``lint`` extra), so a new file or an added block is clean under it."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, keep_trailing_newline=True)
    env.filters["py"] = repr  # a Python literal (tojson would write null / true into generated Python)
    text = env.get_template(template_file).render(**values)
    return framework_style(text) if template_file.endswith(".py.j2") else text


def framework_style(code: str) -> str:
    """``code`` as black writes it (default settings, as MindSpeed-MM's pyproject leaves them); the blank lines that
    separate an added block from what precedes it are kept."""
    import black

    body = code.lstrip("\n")
    return code[: len(code) - len(body)] + black.format_str(body, mode=black.Mode())
