"""Render the Jinja prompt templates in ``prompts/templates/`` with StrictUndefined.

- ``render_system(**vars)`` — the system prompt (variables: SYSTEM_VARS).
- ``render(name, **vars)`` — a node prompt (``prepare``, ``plan``, ``model``, ``data``, ``config``, ``verify``,
  ``classify``, ``report``; variables: NODE_VARS) or ``format_error`` (FORMAT_ERROR_VARS).

Missing variables raise :class:`PromptVariableError` naming them (before Jinja would fail on first use); unknown extra
variables are rejected too, so a renamed state field cannot silently drop out of a prompt. Each template documents its
variables in a leading Jinja comment; a test keeps those comments and these tuples in sync.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from msmigrate.knowledge.owners import deciding_facts_text, owner_semantics_text
from msmigrate.prompts.fence import fence
from msmigrate.tools.repo_reader.wiring_facts import collate_advice

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"

NODE_NAMES = ("prepare", "plan", "model", "data", "config", "verify", "classify", "report")
# the Megatron route's work phases and system prompt (a plan with backend megatron): same variables as the
# plugin route's, their own contract (templates/megatron/*.j2)
MEGATRON_NODE_NAMES = ("megatron_model", "megatron_data", "megatron_config")
MEGATRON_SYSTEM = "megatron_system"
SYSTEM_VARS = ("model_name", "source_path", "target_path", "editable_paths", "knowledge_index", "tools")
NODE_VARS = ("phase", "model_name", "attempt", "max_attempts", "source_summary", "target_summary", "plan",
             "gate_results", "last_failure", "instructions", "handoff")
FORMAT_ERROR_VARS = ("tool_name", "error", "schema", "raw_call")


class PromptVariableError(ValueError):
    """A prompt was rendered with missing or unexpected variables."""


def template_vars(name: str) -> tuple[str, ...]:
    if name in ("system", MEGATRON_SYSTEM):
        return SYSTEM_VARS
    if name == "format_error":
        return FORMAT_ERROR_VARS
    if name in NODE_NAMES or name in MEGATRON_NODE_NAMES:
        return NODE_VARS
    raise PromptVariableError(f"unknown prompt {name!r}; known: system, format_error, {', '.join(NODE_NAMES)}")


@lru_cache(maxsize=1)
def _environment() -> Environment:
    # autoescape off: prompts are plain text/Markdown, not HTML. keep_trailing_newline for stable snapshots.
    env = Environment(loader=FileSystemLoader(str(TEMPLATE_DIR)), undefined=StrictUndefined, autoescape=False,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    # the owner definitions are written once (knowledge/owners.py); every prompt that names owners renders this text
    env.globals["owner_semantics"] = owner_semantics_text()
    env.globals["deciding_facts"] = deciding_facts_text()
    env.globals["collate_advice"] = collate_advice  # what batches a branch-C dataset (the target's own wiring)
    env.filters["fence"] = fence  # untrusted text: {{ excerpt | fence("log excerpt") }} (see fence.py)
    return env


# Each route's prompts live in its own folder (templates/fsdp2/, templates/megatron/); the rest are shared. The prompt
# names (what trajectories and snapshots record) stay as they were.
ROUTE_TEMPLATES = {"system": "fsdp2/system.j2", "model": "fsdp2/model.j2", "data": "fsdp2/data.j2",
                   "config": "fsdp2/config.j2", MEGATRON_SYSTEM: "megatron/system.j2",
                   **{name: f"megatron/{name.removeprefix('megatron_')}.j2" for name in MEGATRON_NODE_NAMES}}


def template_file(name: str) -> str:
    """The template of prompt ``name``, relative to ``TEMPLATE_DIR``."""
    return ROUTE_TEMPLATES.get(name, f"{name}.j2")


def _check(name: str, variables: dict[str, Any]) -> None:
    expected = set(template_vars(name))
    missing = sorted(expected - variables.keys())
    extra = sorted(variables.keys() - expected)
    if missing or extra:
        raise PromptVariableError(f"prompt {name!r}: missing {missing}, unexpected {extra}")


def render(name: str, **variables: Any) -> str:
    """Render prompt ``name``'s template (``template_file``) after checking the variable set."""
    _check(name, variables)
    return _environment().get_template(template_file(name)).render(**variables)


def render_system(backend: str | None = None, **variables: Any) -> str:
    return render(MEGATRON_SYSTEM if backend == "megatron" else "system", **variables)


def estimate_tokens(text: str) -> int:
    """Token estimate used for budgets: ceil(chars / 3.5). English prose with code averages ~4 chars/token on
    GPT-style BPE vocabularies; 3.5 errs on the high side so budgets stay safe. No tokenizer download needed."""
    return -(-len(text) * 2 // 7)


def knowledge_brief(catalog: Any) -> str:
    """The knowledge the system prompt carries on every request: the framework docs' index lines and the ids of the
    similar cases; the failure cases (over a hundred) are named by count only and found with ``search_knowledge``
    when a failure needs them (resending the whole index cost ~10k chars per request)."""
    cases = sorted(e.id for e in catalog.of_kind("case"))
    failures = list(catalog.of_kind("failure"))
    return "\n".join([catalog.index_text(kinds=("doc",)),
                      f"- similar migration cases: {', '.join(cases)}",
                      f"- {len(failures)} failure cases: find them with `search_knowledge` (an error message or "
                      f"keywords), read one with `read_knowledge`"])
