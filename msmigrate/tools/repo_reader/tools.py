"""LangChain wrappers binding the repo_reader cores to one run's source and target trees."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from msmigrate.core.tool_result import ToolResult, make_tool
from msmigrate.core.run_context import RunContext
from msmigrate.tools.repo_reader.files import grep, read_lines, resolve_inside, tree
from msmigrate.tools.repo_reader.hf_summary import hf_summary
from msmigrate.tools.repo_reader.outline import outline
from msmigrate.tools.repo_reader.runtime_packages import RuntimePackages
from msmigrate.tools.repo_reader.target_inventory import inventory_view, target_inventory

Where = Literal["source", "target", "runtime"]
_WHERE = Field("target", description="Tree to read: 'source' (the model being migrated; read-only), 'target' (the "
                                     "MindSpeed-MM checkout) or 'runtime' (the target runtime's installed packages, "
                                     "read-only; tree/grep need a package subdir such as 'transformers/models/qwen2').")


class TreeArgs(BaseModel):
    where: Where = _WHERE
    subdir: str = Field("", description="Relative to the tree root; empty = the root.")
    max_depth: int = Field(4, ge=1, le=12, description="Levels to expand; deeper files are only counted.")


class ReadArgs(BaseModel):
    where: Where = _WHERE
    path: str = Field(..., description="Relative to the tree root.")
    start: int = Field(1, ge=1, description="1-based.")
    end: int | None = Field(None, ge=1, description="Inclusive; omit for the end of the file.")


class GrepArgs(BaseModel):
    where: Where = _WHERE
    pattern: str = Field(..., description="Python regex, matched per line.")
    subdir: str = Field("", description="Only under this directory (relative to the tree root).")
    glob: str = Field("", description="Only file names matching this glob, e.g. '*.py'.")
    ignore_case: bool = Field(False, description="Case-insensitive matching.")


class OutlineArgs(BaseModel):
    where: Where = _WHERE
    path: str = Field(..., description="Relative to the tree root.")
    class_name: str = Field("", description="Only this class, with every method's signature and decorators "
                                            "(use for large files, whose default outline lists method names only).")


class HfSummaryArgs(BaseModel):
    subdir: str = Field("", description="Model folder relative to the source root; empty when the source root is "
                                        "the HF folder itself.")
    probe_forward: bool = Field(True, description="For transformers-native classes, probe the forward signature "
                                                  "in the target runtime (takes a few seconds).")


class InventoryArgs(BaseModel):
    section: Literal["overview", "models", "datasets", "templates", "mm_plugins", "collators", "examples"] = Field(
        "overview", description="'overview' = all registered ids plus one line per example YAML; any other value "
                                "returns that section in full (file, line, class, template tokens, apply_modules...).")
    match: str = Field("", description="Keep only entries containing this text (case-insensitive), e.g. 'qwen3vl'.")


def repo_reader_tools(ctx: RunContext) -> list:
    """The read-only tools over ``ctx.source``, ``ctx.target`` and the target runtime's packages for a policy to
    bind."""
    packages = RuntimePackages(ctx.runtime_python)

    def root(where: str) -> Path | None:
        if where == "runtime":
            return packages.root()
        return Path(ctx.source if where == "source" else ctx.target)

    def in_root(where: str, core) -> ToolResult:
        base = root(where)
        return packages.failure() if base is None else core(base)

    def _tree(where="target", subdir="", max_depth=4) -> ToolResult:
        if where != "runtime":
            return tree(root(where), subdir, max_depth)
        return packages.scoped(subdir, lambda base: tree(base, "", max_depth))

    def _grep(where="target", pattern="", subdir="", glob="", ignore_case=False) -> ToolResult:
        if where != "runtime":
            return grep(root(where), pattern, subdir, glob, ignore_case=ignore_case)
        return packages.scoped(subdir, lambda base: grep(base, pattern, "", glob, ignore_case=ignore_case))

    def _summary(subdir: str = "", probe_forward: bool = True) -> ToolResult:
        folder = resolve_inside(Path(ctx.source), subdir or ".")
        if folder is None:
            return ToolResult.failure(f"{subdir!r} is outside the source root")
        return hf_summary(folder, ctx.runtime_python if probe_forward else None, probe_timeout=ctx.probe_timeout_s)

    return [
        make_tool("repo_tree", "Gitignore-aware, bounded directory tree of the source, target or runtime packages.",
                  TreeArgs, _tree),
        make_tool("read_file", "Read a line range of a text file (numbered; long spans keep head and tail).", ReadArgs,
                  lambda where="target", path="", start=1, end=None:
                  in_root(where, lambda base: read_lines(base, path, start, end))),
        make_tool("grep", "Regex search over text files of the source, target or runtime packages; bounded hits as "
                          "path:line: text.", GrepArgs, _grep),
        make_tool("python_outline", "Classes, functions, signatures, decorators and MindSpeed-MM registrations "
                                    "(model/data register ids, templates, mm_plugins, collators) of a Python file.",
                  OutlineArgs,
                  lambda where="target", path="", class_name="":
                  in_root(where, lambda base: outline(base, path, class_name))),
        make_tool("hf_model_summary", "Summary of the source HF model folder: architectures, sub-configs and sizes, "
                                      "custom code, special/media tokens, chat template, processor configs, forward "
                                      "signature.", HfSummaryArgs, _summary),
        make_tool("target_inventory", "Registered model ids, dataset types, templates, mm_plugins, collators and "
                                      "example YAMLs of the target, for choosing the most similar existing case.",
                  InventoryArgs,
                  lambda section="overview", match="": inventory_view(target_inventory(Path(ctx.target)), section,
                                                                      match)),
    ]
