"""``validate_config``: the G3 config check. Pure: reads the YAML text, a schema dict, and optional inventory /
module tree / target root; returns a ToolResult whose ``data["findings"]`` lists every problem found."""

from __future__ import annotations

from pathlib import Path

from msmigrate.core.tool_result import ToolResult
from msmigrate.tools.yaml_validator.checks import SchemaChecker
from msmigrate.tools.yaml_validator.crossrefs import crossref_checks, inventory_from_target
from msmigrate.tools.yaml_validator.entry_point import GENERIC_TRAINER, entry_point_of, names_read_by
from msmigrate.tools.yaml_validator.findings import Finding
from msmigrate.tools.yaml_validator.patterns import ModuleTree, pattern_checks, pattern_syntax_checks
from msmigrate.tools.yaml_validator.ranges import range_checks
from msmigrate.tools.yaml_validator.schema import root_node
from msmigrate.tools.yaml_validator.semantics import get, semantic_checks
from msmigrate.tools.yaml_validator.yaml_lines import load_yaml


def _read(yaml_text_or_path: str | Path) -> tuple[str, str | None]:
    """A Path, or a one-line string ending in .yaml/.yml that names an existing file, is read; anything else is text."""
    if isinstance(yaml_text_or_path, Path) or (
            "\n" not in yaml_text_or_path and yaml_text_or_path.endswith((".yaml", ".yml"))
            and Path(yaml_text_or_path).is_file()):
        path = Path(yaml_text_or_path)
        return path.read_text(encoding="utf-8"), str(path)
    return yaml_text_or_path, None


def validate_config(
    yaml_text_or_path: str | Path,
    *,
    schema: dict,
    inventory: dict | None = None,
    module_tree: ModuleTree | dict | None = None,
    target_root: Path | None = None,
    device: str | None = None,
    extra_allowed: tuple[str, ...] = (),
    min_train_iters: int = 5,
) -> ToolResult:
    """Validate one plugin-route YAML.

    ``ok`` is True when there is no *error* finding (warnings allowed). ``inventory`` defaults to a static scan of
    ``target_root`` when only the root is given. ``device`` ("cpu"/"cuda"/"npu") enables device-specific checks.
    ``extra_allowed`` lists extra undeclared key paths to accept (module_match syntax, e.g. ``model.my_*``)."""
    if isinstance(yaml_text_or_path, str) and "\n" not in yaml_text_or_path and yaml_text_or_path.endswith(
            (".yaml", ".yml")) and not Path(yaml_text_or_path).is_file():
        return ToolResult.failure(f"config file not found: {yaml_text_or_path}")
    text, source = _read(yaml_text_or_path)
    loaded = load_yaml(text)
    findings: list[Finding] = list(loaded.findings)
    data = loaded.data
    if data is not None:
        dataset_type = get(data, "data.dataset_param.dataset_type")
        checker = SchemaChecker(root_node(schema), dataset_type if isinstance(dataset_type, str) else None,
                                tuple(extra_allowed))
        findings += checker.check(data)
        findings += semantic_checks(data, device=device, min_train_iters=min_train_iters)
        said = {f.path for f in findings if f.severity == "error"}  # one error a key: the more specific one first
        findings += range_checks(data, root_node(schema), said)
        if inventory is None and target_root is not None:
            inventory = inventory_from_target(Path(target_root))
        findings += crossref_checks(data, inventory, Path(target_root) if target_root else None)
        if module_tree is not None:
            tree = ModuleTree.from_dict(module_tree) if isinstance(module_tree, dict) else module_tree
            findings += pattern_checks(data, tree)
        else:
            findings += pattern_syntax_checks(data)
    entry = None
    as_path = yaml_text_or_path if isinstance(yaml_text_or_path, Path) else (
        Path(yaml_text_or_path) if "\n" not in yaml_text_or_path and len(yaml_text_or_path) < 4096 else None)
    if target_root is not None and as_path is not None and as_path.is_file():
        entry = entry_point_of(as_path.resolve(), Path(target_root))
        if entry and entry != GENERIC_TRAINER:
            findings = _read_by_entry(findings, entry, names_read_by(entry, Path(target_root)))
    for f in findings:
        if f.line is None and f.path:
            f.line = loaded.line_of(f.path)
    findings = _dedupe(findings)
    findings.sort(key=lambda f: (f.severity != "error", f.line or 0, f.path))
    errors = [f for f in findings if f.severity == "error"]
    summary = (f"{len(errors)} error(s), {len(findings) - len(errors)} warning(s)"
               + (f"; first: [{errors[0].code}] {errors[0].path}" if errors else ""))
    payload = dict(source=source, summary=summary, findings=[f.to_dict() for f in findings],
                   entry_point=entry, checked={"schema": True, "inventory": inventory is not None, "module_tree": module_tree is not None,
                            "files": target_root is not None})
    if errors:
        return ToolResult.failure(f"config invalid: {summary}", **payload)
    return ToolResult.success(**payload)


def _read_by_entry(findings: list[Finding], entry: str, read: set[str]) -> list[Finding]:
    """An undeclared key that the config's own task entry point reads is not silently ignored: a warning that says
    who reads it, not an error."""
    out = []
    for f in findings:
        last = f.path.rsplit(".", 1)[-1].split("[", 1)[0]
        if f.code == "unknown-key" and last in read:
            f = Finding("warning", "read-by-entry-point", f.path,
                        f"`{f.path}` is not declared by the argument models, but this config's entry point "
                        f"{entry} reads `{last}` itself", None, f.line)
        out.append(f)
    return out


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for f in findings:
        key = (f.code, f.path, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
