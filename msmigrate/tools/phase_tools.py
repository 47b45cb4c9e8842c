"""Two tools a work phase needs besides reading and writing:

- ``finish_phase(summary, delivered, decisions_changed)``: the explicit hand-off. The tool itself only acknowledges;
  the tools node records the call in the state (``finish_request``) and the work node then runs the phase gate,
  without asking the policy again. The summary and delivered list go into the phase hand-off record the next
  phase's prompt opens with.
- ``vendor_remote_code(plugin_dir, files)``: copies the source's remote-code ``.py`` files (``auto_map`` modules and
  what they import) into the plugin dir through the file writer (validated, committed), rewriting the package's
  relative imports to absolute ones, and reports what it copied — instead of the model echoing whole files through
  ``write_file``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from pydantic import BaseModel, Field

from msmigrate.core.run_context import RunContext
from msmigrate.core.tool_result import ToolResult, make_tool

FINISH_TOOL = "finish_phase"
RELATIVE_IMPORT = re.compile(r"^(\s*)from \.(\w+) import ", re.M)


class FinishPhaseArgs(BaseModel):
    summary: str = Field(..., description="What this phase delivered and why, in a few sentences; the next phase "
                                          "reads it.")
    delivered: list[str] = Field(default_factory=list, description="Paths written or edited and ids registered "
                                                                   "(model_id, template, mm_plugin, dataset_type…).")
    decisions_changed: list[str] = Field(default_factory=list, description="Plan decisions this phase changed and "
                                                                           "why, e.g. 'data branch B -> C: "
                                                                           "AutoProcessor returns a bare tokenizer'.")


def finish_phase(summary: str, delivered: list[str] | None = None,
                 decisions_changed: list[str] | None = None) -> ToolResult:
    return ToolResult.success(accepted=True, note="the phase gate runs now; its result opens the next prompt",
                              summary=summary[:2000], delivered=list(delivered or [])[:50],
                              decisions_changed=list(decisions_changed or [])[:20])


class VendorArgs(BaseModel):
    plugin_dir: str = Field(..., description="Model plugin dir in the target, e.g. 'mindspeed_mm/fsdp/models/<name>'.")
    files: list[str] = Field(default_factory=list, description="Source-relative .py files to copy; empty = every "
                                                               "top-level .py file of the source.")


def vendored_text(text: str, package: str) -> tuple[str, int]:
    """``from .x import`` → ``from <package>.x import`` (the plugin dir is imported as a package path)."""
    return RELATIVE_IMPORT.subn(lambda m: f"{m.group(1)}from {package}.{m.group(2)} import ", text)


def vendor_remote_code(ctx: RunContext, plugin_dir: str, files: list[str] | None = None) -> ToolResult:
    from msmigrate.tools.file_writer import write_file

    source = Path(ctx.source)
    names = list(files or sorted(p.name for p in source.glob("*.py")))
    if not names:
        return ToolResult.failure(f"no .py files in the source {source}; nothing to vendor")
    package = plugin_dir.strip("/").replace("/", ".") + ".upstream"
    copied, problems = [], []
    for name in names:
        src = (source / name).resolve()
        if source.resolve() not in src.parents or not src.is_file() or src.suffix != ".py":
            problems.append(f"{name}: not a .py file of the source")
            continue
        text, rewrites = vendored_text(src.read_text(encoding="utf-8"), package)
        dest = f"{plugin_dir.strip('/')}/upstream/{src.name}"
        res = write_file(ctx, dest, text, reason=f"vendor remote code {src.name}")
        if not res.ok:
            problems.append(f"{name}: {res.error}")
            continue
        copied.append({"from": name, "to": dest, "lines": text.count("\n") + 1, "imports_rewritten": rewrites,
                       "sha256": hashlib.sha256(text.encode()).hexdigest()[:12]})
    init = f"{plugin_dir.strip('/')}/upstream/__init__.py"
    if copied and not (Path(ctx.target) / init).is_file():
        write_file(ctx, init, '"""Remote code of the source checkpoint, vendored by msmigrate."""\n',
                   reason="vendored package marker")
    if not copied:
        return ToolResult.failure("nothing copied: " + "; ".join(problems), problems=problems)
    return ToolResult.success(package=package, copied=copied, problems=problems,
                              note=f"import it as `from {package}.<module> import <Class>`")


def phase_tools(ctx: RunContext) -> list:
    return [
        # when and how to call it is the phase rules' (prompts/templates/_macros.j2), in every phase prompt
        make_tool(FINISH_TOOL, "End this phase: its gate runs now and decides (see the phase rules).",
                  FinishPhaseArgs, finish_phase),
        make_tool("vendor_remote_code", "Copy the source's remote-code .py files into '<plugin_dir>/upstream/' "
                                        "(relative imports made absolute, validated, committed); reports what was "
                                        "copied.",
                  VendorArgs, lambda plugin_dir, files=None: vendor_remote_code(ctx, plugin_dir, files)),
    ]
