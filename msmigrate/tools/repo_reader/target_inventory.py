"""Static inventory of a MindSpeed-MM checkout, used to pick the most similar existing case for a migration.

Reads ``mindspeed_mm/fsdp/**.py`` with ``ast`` (registrations: model ids, dataset types, templates, mm_plugins,
collators) and ``examples/**/*.yaml`` with ``yaml.safe_load`` (plugin-route configs: training.plugin, model_id,
dataset_type, template, collator id, apply_modules). Never imports the target's code. Works on the real repository
and on the stand-in, which share the layout (contract §4, §8, §12).
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict
from pathlib import Path

import yaml

from msmigrate.core.tool_result import ToolResult
from msmigrate.tools.repo_reader.files import list_files
from msmigrate.tools.repo_reader.outline import registrations_in
from msmigrate.tools.repo_reader.trainer_facts import meta_init_facts
from msmigrate.tools.repo_reader.wiring_facts import collate_wiring_facts, loss_wiring_facts

FSDP_PREFIX = "mindspeed_mm/fsdp/"
# Cheap text filter before parsing: only files that can contain a registration are parsed.
_MARKERS = ("register", "PLUGINS", "DATA_COLLATOR")


def _get(d: object, *keys: str):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _class_bases(tree: ast.Module) -> dict[str, list[str]]:
    return {n.name: [ast.unparse(b) for b in n.bases] for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}


def scan_registrations(root: Path, files: list[str]) -> tuple[dict[str, list[dict]], list[str]]:
    by_kind: dict[str, list[dict]] = {"model": [], "data": [], "template": [], "mm_plugin": [], "collator": []}
    errors: list[str] = []
    for rel in files:
        if not (rel.startswith(FSDP_PREFIX) and rel.endswith(".py")):
            continue
        text = (root / rel).read_text(encoding="utf-8", errors="replace")
        if not any(m in text for m in _MARKERS):
            continue
        try:
            tree = ast.parse(text, filename=rel)
        except SyntaxError as exc:
            errors.append(f"{rel}: does not parse ({exc.msg} at line {exc.lineno})")
            continue
        bases = _class_bases(tree)
        for reg in registrations_in(tree, rel):
            entry = asdict(reg)
            if reg.kind == "model" and reg.target in bases:
                entry["bases"] = bases[reg.target]
            by_kind[reg.kind].append(entry)
    return by_kind, errors


def summarize_example_yaml(rel: str, text: str) -> dict | None:
    """The similarity-relevant fields of one example YAML; None when it is not a plugin-route config."""
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {"file": rel, "parse_error": first}
    if not isinstance(cfg, dict):
        return None
    plugin = _get(cfg, "training", "plugin")
    model_id = _get(cfg, "model", "model_id")
    if plugin is None and model_id is None:
        return None  # bridge-route fsdp2_config.yaml, model.json-style data, etc.
    collate = _get(cfg, "data", "dataloader_param", "collate_param") or {}
    return {
        "file": rel,
        "plugin": plugin if isinstance(plugin, list) else ([plugin] if plugin else []),
        "model_id": model_id,
        "model_name_or_path": _get(cfg, "model", "model_name_or_path"),
        "dataset_type": _get(cfg, "data", "dataset_param", "dataset_type"),
        "template": _get(cfg, "data", "dataset_param", "basic_parameters", "template"),
        "collator_id": collate.get("collator_id") if isinstance(collate, dict) else None,
        "collator_model_name": collate.get("model_name") if isinstance(collate, dict) else None,
        "apply_modules": _get(cfg, "parallel", "fsdp_plan", "apply_modules") or [],
        "freeze": _get(cfg, "model", "freeze") or [],
        "recompute_modules": _get(cfg, "features", "recompute_plan", "apply_modules") or [],
        "loss_type": _get(cfg, "features", "loss_cfg", "loss_type"),
        "moe": example_is_moe(cfg),
        "parameters_b": size_in_name(rel),
    }


def example_is_moe(cfg: dict) -> bool:
    """An example configured for a mixture-of-experts model: expert parallelism over > 1 rank, or expert modules in
    its sharding or expert plans."""
    ep = _get(cfg, "parallel", "expert_parallel_size")
    if isinstance(ep, int) and ep > 1:
        return True
    patterns = list(_get(cfg, "parallel", "fsdp_plan", "apply_modules") or []) + \
        list(_get(cfg, "parallel", "ep_plan", "apply_modules") or [])
    return any(isinstance(p, str) and "experts" in p.split(".") for p in patterns)


def size_in_name(rel: str) -> float | None:
    """The parameter count (billions) an example's file name states (``qwen3_5_122B_config.yaml`` → 122.0)."""
    m = re.search(r"(?:^|[_\-/.])(\d+(?:\.\d+)?)[bB](?=$|[_\-.])", rel.rsplit("/", 1)[-1])
    return float(m.group(1)) if m else None


def target_inventory(root: Path) -> ToolResult:
    root = root.resolve()
    if not (root / "mindspeed_mm").is_dir():
        return ToolResult.failure(f"{root} has no mindspeed_mm/ package; not a MindSpeed-MM checkout")
    files = list_files(root)
    regs, errors = scan_registrations(root, files)
    examples: list[dict] = []
    scripts: dict[str, list[dict]] = {}
    for rel in files:
        if not rel.startswith("examples/"):
            continue
        if rel.endswith((".yaml", ".yml")):
            summary = summarize_example_yaml(rel, (root / rel).read_text(encoding="utf-8", errors="replace"))
            if summary is not None:
                examples.append(summary)
        elif rel.endswith(".sh"):
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
            route = "plugin" if "mindspeed_mm/fsdp/" in text else ("bridge" if "pretrain_" in text else "other")
            scripts.setdefault(rel.rsplit("/", 1)[0], []).append({"file": rel, "route": route, "text": text})
    for ex in examples:
        in_dir = scripts.get(ex["file"].rsplit("/", 1)[0], [])
        # Prefer the launch scripts that name this YAML; a directory often mixes plugin and bridge scripts.
        naming = [s for s in in_dir if ex["file"].rsplit("/", 1)[1] in s["text"]]
        ex["scripts"] = [{"file": s["file"], "route": s["route"]} for s in (naming or in_dir)]
        ex["route"] = "plugin" if any(s["route"] == "plugin" for s in ex["scripts"]) else (
            ex["scripts"][0]["route"] if ex["scripts"] else "unknown")
    ids = {k: sorted({r["id"] for r in v}) for k, v in regs.items()}
    plugin_launched = sum(e.get("route") == "plugin" for e in examples)
    headline = (f"found {len(ids['model'])} model ids, {len(ids['data'])} dataset types, {len(ids['template'])} "
                f"templates, {len(ids['mm_plugin'])} mm_plugins, {len(ids['collator'])} collators, "
                f"{len(examples)} example YAMLs ({plugin_launched} launched by plugin-route scripts)")
    return ToolResult.success(
        root=str(root), headline=headline, ids=ids,
        model_ids=regs["model"], dataset_types=regs["data"], templates=regs["template"],
        mm_plugins=regs["mm_plugin"], collators=regs["collator"], examples=examples, parse_errors=errors,
        meta_init=meta_init_facts(root), loss_wiring=loss_wiring_facts(root), collate_wiring=collate_wiring_facts(root),
    )


SECTIONS = {"models": "model_ids", "datasets": "dataset_types", "templates": "templates", "mm_plugins": "mm_plugins",
            "collators": "collators", "examples": "examples"}
_EXAMPLE_KEYS = ("file", "model_id", "dataset_type", "template", "collator_id", "collator_model_name", "route",
                 "parse_error")


def inventory_view(result: ToolResult, section: str = "overview", match: str = "") -> ToolResult:
    """A prompt-sized slice of an inventory: ``overview`` (ids + one line per example YAML) or one full section,
    optionally filtered to entries whose JSON contains ``match`` (case-insensitive)."""
    if not result.ok:
        return result
    d = result.data
    if section == "overview":
        examples = [{k: e[k] for k in _EXAMPLE_KEYS if e.get(k) is not None} for e in d["examples"]]
        return ToolResult.success(root=d["root"], headline=d["headline"], ids=d["ids"], examples=examples,
                                  parse_errors=d["parse_errors"])
    key = SECTIONS.get(section)
    if key is None:
        return ToolResult.failure(f"unknown section {section!r}; use overview or one of {sorted(SECTIONS)}")
    import json

    entries = [e for e in d[key] if match.lower() in json.dumps(e, default=str).lower()]
    return ToolResult.success(root=d["root"], section=section, match=match, entries=entries)
