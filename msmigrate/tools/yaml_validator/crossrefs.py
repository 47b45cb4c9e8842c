"""Cross-references between the YAML and the target's registries and files (contract §4, §8, §13 #6-#16).

Inventory shape (what ``repo_reader.target_inventory`` returns in ``data``, or a hand-made dict): for each of
``model_ids``, ``dataset_types``, ``templates``, ``mm_plugins``, ``collators`` either
``{id: {"file": rel_path, "line": n}}`` / ``{id: rel_path}`` or a list of ``{"id": ..., "file": ..., "line": ...}``.
Files are relative to the target root. A registration counts for ``model.model_id`` / ``dataset_type`` only when its
file lies inside one of the ``training.plugin`` paths, because ``import_plugin`` imports nothing else.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from msmigrate.tools.yaml_validator.findings import Finding
from msmigrate.tools.yaml_validator.semantics import get

KINDS = ("model_ids", "dataset_types", "templates", "mm_plugins", "collators")


def normalize_inventory(inventory: dict) -> dict[str, dict[str, str | None]]:
    """→ {kind: {id: file or None}} whatever the accepted input shape."""
    out: dict[str, dict[str, str | None]] = {}
    for kind in KINDS:
        raw = inventory.get(kind)
        table: dict[str, str | None] = {}
        if isinstance(raw, dict):
            for ident, where in raw.items():
                table[str(ident)] = where.get("file") if isinstance(where, dict) else where
        elif isinstance(raw, list):
            for entry in raw:
                if isinstance(entry, dict) and "id" in entry:
                    table.setdefault(str(entry["id"]), entry.get("file"))
                elif isinstance(entry, str):
                    table.setdefault(entry, None)
        out[kind] = table
    return out


def inventory_from_target(target_root: Path) -> dict | None:
    """Fallback when no inventory is passed: the static scan of ``repo_reader`` (never imports the target)."""
    from msmigrate.tools.repo_reader.target_inventory import target_inventory

    result = target_inventory(Path(target_root))
    return result.data if result.ok else None


def plugin_module_path(entry: str) -> str:
    """``mindspeed_mm/fsdp/models/x`` or ``mindspeed_mm.fsdp.models.x`` → ``mindspeed_mm/fsdp/models/x``
    (the target turns ``/`` into ``.`` and strips leading/trailing dots before ``import_module``)."""
    return entry.replace("/", ".").strip(".").replace(".", "/")


def _inside(file: str | None, plugin_paths: list[str]) -> bool:
    if file is None:
        return True  # unknown location: cannot prove it is outside
    file = file.replace("\\", "/")
    return any(file == f"{p}.py" or file.startswith(p + "/") for p in plugin_paths)


def _close(ident: str, known: dict) -> str | None:
    near = difflib.get_close_matches(ident, list(known), n=3, cutoff=0.5)
    return ("did you mean " + " or ".join(f"`{n}`" for n in near) + "?") if near else (
        "registered: " + ", ".join(sorted(known)[:12]) if known else None)


def crossref_checks(data: dict, inventory: dict | None, target_root: Path | None) -> list[Finding]:
    out: list[Finding] = []
    plugins = get(data, "training.plugin") or []
    plugins = [p for p in plugins if isinstance(p, str)] if isinstance(plugins, list) else []
    plugin_paths = [plugin_module_path(p) for p in plugins]

    if target_root is not None:
        root = Path(target_root)
        for i, (entry, rel) in enumerate(zip(plugins, plugin_paths)):
            if not ((root / rel).is_dir() or (root / f"{rel}.py").is_file()):
                out.append(Finding("error", "plugin-not-importable", f"training.plugin[{i}]",
                                   f"plugin `{entry}` is neither a package directory nor a module under the target "
                                   f"root; the target prints `Import failed: {rel.replace('/', '.')}` and later "
                                   "fails with `ID '...' is not registered.`",
                                   "use a path relative to the target root, e.g. mindspeed_mm/fsdp/models/<name>"))

    model_id = get(data, "model.model_id")
    if model_id is not None and not plugins:
        out.append(Finding("error", "plugin-missing", "training.plugin",
                           "model.model_id is set but training.plugin is empty: nothing imports the registration",
                           "list the model plugin directory (and the dataset plugin directory)"))
    if inventory is None:
        return out
    inv = normalize_inventory(inventory)

    def registered(kind: str, ident: Any, path: str, what: str, need_plugin: bool) -> None:
        if not isinstance(ident, str):
            return
        table = inv[kind]
        if ident not in table:
            out.append(Finding("error", f"{what}-unregistered", path,
                               f"`{ident}` is not registered in the target (`ID '{ident}' is not registered.`)"
                               if need_plugin else f"`{ident}` is not a registered {what.replace('-', ' ')}",
                               _close(ident, table)))
        elif need_plugin and plugins and not _inside(table[ident], plugin_paths):
            folder = str(Path(table[ident]).parent)
            out.append(Finding("error", f"{what}-outside-plugin", path,
                               f"`{ident}` is registered in {table[ident]}, which no training.plugin entry imports",
                               f"add `{folder}` to training.plugin"))

    registered("model_ids", model_id, "model.model_id", "model-id", True)
    ds = "data.dataset_param"
    registered("dataset_types", get(data, f"{ds}.dataset_type"), f"{ds}.dataset_type", "dataset-type", True)
    if get(data, f"{ds}.basic_parameters.chat_template") is None:  # a chat_template file wins over `template`
        registered("templates", get(data, f"{ds}.basic_parameters.template"), f"{ds}.basic_parameters.template",
                   "template", False)

    cp = "data.dataloader_param.collate_param"
    collator_id, legacy = get(data, f"{cp}.collator_id"), get(data, f"{cp}.model_name")
    if collator_id is not None and legacy is not None and collator_id != legacy:
        out.append(Finding("error", "collator-conflict", f"{cp}.model_name",
                           f"`collator_id and deprecated model_name refer to different data collators: "
                           f"{collator_id} != {legacy}.`", "keep only collator_id"))
    chosen, chosen_path = (collator_id, f"{cp}.collator_id") if collator_id is not None else (legacy, f"{cp}.model_name")
    dataset_type = get(data, f"{ds}.dataset_type")
    if chosen is None and dataset_type == "huggingface":
        out.append(Finding("error", "collator-missing", f"{cp}.collator_id",
                           "`No data collator is specified.` (the huggingface dataset has no collate_fn)",
                           "set collator_id (e.g. qwen3vl)"))
    elif isinstance(chosen, str) and chosen not in inv["collators"]:
        # datasets with their own collate_fn ignore the id, so only the huggingface route makes this fatal
        out.append(Finding("error" if dataset_type == "huggingface" else "warning", "collator-unregistered",
                           chosen_path, f"`No data collator is registered as {chosen}.`", _close(chosen, inv["collators"])))
    return out
