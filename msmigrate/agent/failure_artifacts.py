"""This run's artifacts for the classify node's context rules (knowledge/failure_context.py): the plugin package,
the data path, the YAML and launch script from the plan; the training records from the run context; the YAML's
keys; and the phase whose artifact this run's own commits changed last before the failing gate."""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

import yaml

from msmigrate.agent.input_checks import read_records
from msmigrate.agent.launch_script_checks import script_sets
from msmigrate.core.python_files import folder_modules
from msmigrate.knowledge.failure_context import (IMPORT_FAILED, Artifacts, ContextVerdict, RegistryFact, backend_env_owner,
                                                 attention_class_owner, attention_flag_owner, broken_install_owner,
                                                 finding_remedy_owner, gate_remedy_owner, input_folder_owner,
                                                 interpreter_switch_owner,
                                                 keys_named, keys_valued, media_path_owner, plugin_import_owner,
                                                 yaml_file_owner,
                                                 registration_owner, runtime_decode_owner, runtime_env_owner,
                                                 signature_owner, warning_raised_owner, yaml_keys,
                                                 yaml_values)
from msmigrate.tools.launcher.command import TRAINER_REL
from msmigrate.tools.repo_reader.target_inventory import target_inventory
from msmigrate.tools.worktree import git
from msmigrate.tools.yaml_validator.patterns import frozen_parts


def run_artifacts(ctx: Any, state: dict[str, Any], failed: dict[str, Any]) -> tuple[Artifacts, str | None]:
    plan = state.get("plan") or {}
    target = Path(ctx.target)
    model = tuple(p for p in [plan.get("plugin_dir")] if p)
    data = tuple(dict.fromkeys(p for p in [plan.get("data_plugin"), *_data_code(target, plan)] if p))
    config = tuple(p for p in [plan.get("config_path"), plan.get("script_path")] if p)
    records_dir = Path(ctx.data_path).parent if getattr(ctx, "data_path", None) else Path(ctx.source) / "data"
    records = tuple(str(p) for p in dict.fromkeys([records_dir, records_dir.resolve()]))
    loaded = _yaml_data(target, plan.get("config_path")) or {}  # (a YAML that does not load: no keys)
    artifacts = Artifacts(model=model, data=data, config=config, records=records, yaml_keys=yaml_keys(loaded),
                          yaml_values=yaml_values(loaded), frozen=frozen_parts(loaded) if loaded else None,
                          environment=runtime_variables(state.get("runtime")),
                          host_memory=host_memory(), runtime_env=target_env(state.get("runtime")),
                          interpreter_env={k: str(v) for k, v in
                                           ((state.get("runtime") or {}).get("python_env") or {}).items()})
    return artifacts, _changed_last(target, ctx, artifacts, failed)


def target_env(runtime: dict[str, Any] | None) -> dict[str, tuple[str, str | None]]:
    """The variables the target's code reads that G0's env probe found set, in a rank's view, to another value than
    the code's default: name -> (value, default)."""
    said = (runtime or {}).get("target_env") or {}
    return {k: (str(v.get("value")), None if v.get("default") is None else str(v["default"]))
            for k, v in said.items() if isinstance(v, dict) and v.get("value") is not None}


def runtime_variables(runtime: dict[str, Any] | None) -> dict[str, str]:
    """The runtime's variables a failure's value is traced back to (variables_valued): the communication ones and
    those the target's code reads."""
    return {**dict((runtime or {}).get("comm_env") or {}), **{k: v for k, (v, _) in target_env(runtime).items()}}


def host_memory() -> int | None:
    """Bytes of physical memory of this host, where the gates run their probes; None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


# (the YAML key, the plan's key, the inventory's list, the owner whose artifact registers such ids)
REGISTRIES = (("model.model_id", "model_id", "model_ids", "model"),
              ("data.dataset_param.dataset_type", "dataset_type", "dataset_types", "data"),
              ("data.dataset_param.basic_parameters.template", "template", "templates", "data"),
              ("data.dataloader_param.collate_param.collator_id", "collator", "collators", "data"))


def run_facts_owner(text: str, artifacts: Artifacts, state: dict[str, Any], ctx: Any,
                    gate_lines: str = "", findings: list[dict[str, Any]] | None = None) -> ContextVerdict | None:
    """Facts of this run that decide an owner even against a matched case: a value the error quotes that the
    runtime's environment gave a variable the target's code reads, whose import failed (the source's architecture,
    or a name only the plugin asks for), which side of a registry lookup left the plan (the plan's id in the YAML
    but registered nowhere, or another id in the YAML), a setting the failed gate's own check (``gate_lines``: its
    problem lines; ``findings``: its structured findings) measured as the cause, and an error the source's own
    processor met in this runtime on records whose media decode outside it."""
    plan = state.get("plan") or {}
    # a value the code took from the process environment comes first: the code object a gate traced the effect to
    # (its mm_plugin, its collator) did what the variable told it, as with a YAML setting (gate_remedy_owner)
    target = Path(ctx.target)
    from_env = runtime_env_owner(text, artifacts, _script_sets(target, plan.get("script_path"), artifacts.runtime_env))
    if from_env is not None:
        return from_env
    backend = backend_env_owner(text, artifacts, _script_sets(target, plan.get("script_path"), artifacts.environment))
    if backend is not None:
        return backend
    script = target / plan["script_path"] if plan.get("script_path") else None
    launch = script.read_text(encoding="utf-8", errors="replace") if script is not None and script.is_file() else ""
    raised = warning_raised_owner(text, artifacts, launch) or interpreter_switch_owner(text, artifacts, launch)
    if raised is not None:
        return raised
    remedy = finding_remedy_owner(findings) or gate_remedy_owner(gate_lines, artifacts)
    if remedy is not None:
        return remedy
    decoded = media_decoded(getattr(ctx, "data_path", None))
    if decoded is not None:
        from_runtime = runtime_decode_owner(text, source_batch_error(state), *decoded)
        if from_runtime is not None:
            return from_runtime
    resolved = media_path_owner(text, artifacts, Path(ctx.target), Path(artifacts.records[0]) if artifacts.records
                                else None) or input_folder_owner(text, getattr(ctx, "source", None)) or \
        yaml_file_owner(text, artifacts, Path(ctx.target), [getattr(ctx, "source", None), *artifacts.records])
    if resolved is not None:
        return resolved
    classes = plugin_classes(Path(ctx.target), plan.get("plugin_dir"))
    signature = signature_owner(text, classes)
    if signature is not None:
        return signature
    flagged = attention_flag_owner(text, {name: Path(ctx.target) / path for name, path in classes.items()})
    if flagged is not None:
        return flagged
    refused = attention_class_owner(text, model_classes(state, ctx))
    if refused is not None:
        return refused
    broken = broken_install_owner(text)
    if broken is not None:
        return broken
    text += _import_sites(Path(ctx.target), plan.get("plugin_dir"), text)
    said = plugin_import_owner(text, artifacts, plan.get("hf_class"), plan.get("model_type"),
                               target_imports_of(Path(ctx.target), plan.get("plugin_dir"), text))
    if said is not None:
        return said
    inventory = target_inventory(Path(ctx.target))
    data = _yaml_data(Path(ctx.target), plan.get("config_path"))
    if not inventory.ok or data is None:
        return None
    facts = []
    for key, plan_key, kind, registrar in REGISTRIES:
        value = _get(data, key)
        if not isinstance(value, str):
            continue
        entries = inventory.data.get(kind) or []
        if kind == "model_ids":  # the plugin's own registrations decide the plugin's side
            plugin = plan.get("plugin_dir") or ""
            entries = [e for e in entries if str(e.get("file", "")).startswith(plugin + "/")] if plugin else []
        where = entries[0]["file"] if entries and kind == "model_ids" else \
            (plan.get("plugin_dir") if registrar == "model" else "the data path")
        facts.append(RegistryFact(key, value, plan.get(plan_key), tuple(e["id"] for e in entries), registrar,
                                  where or ""))
    return registration_owner(text, facts)


def source_batch_error(state: dict[str, Any]) -> str:
    """The error G1's forward probe met building its batch with the source's own processor from the records (it
    then ran on a synthetic batch), from the newest G1 record; '' when it met none."""
    for record in reversed(state.get("gate_history") or []):
        if record.get("gate") == "G1":
            return next((str(e["metrics"]["sample_batch_error"]) for e in record.get("evidence") or []
                         if (e.get("metrics") or {}).get("sample_batch_error")), "")
    return ""


MAX_DECODED = 16  # media files of the records decoded outside the runtime (the first ones)


def media_decoded(data_path: Any, limit: int = MAX_DECODED) -> tuple[list[str], int] | None:
    """The records' image files, decoded with msmigrate's own Pillow (outside the target runtime): (those that do not
    decode, how many were tried). None when there are no records, no image files or no Pillow here."""
    if not data_path or not Path(data_path).is_file():
        return None
    try:
        from PIL import Image
    except ImportError:
        return None
    base = Path(data_path).parent
    paths: list[Path] = []
    for record in read_records(Path(data_path)) or []:
        media = record.get("images", record.get("image")) if isinstance(record, dict) else None
        for p in [media] if isinstance(media, str) else media if isinstance(media, list) else []:
            if isinstance(p, str):
                paths.append(Path(p) if os.path.isabs(p) else base / p)
        if len(paths) >= limit:
            break
    paths = list(dict.fromkeys(paths))[:limit]
    if not paths:
        return None
    bad = []
    for path in paths:
        try:
            with Image.open(path) as image:
                image.load()
        except (OSError, ValueError, SyntaxError) as exc:  # Pillow's errors for a file it cannot decode
            bad.append(f"{path.name}: {type(exc).__name__}: {exc}"[:200])
    return bad, len(paths)


def _script_sets(target: Path, script: str | None, names: Iterable[str]) -> list[str]:
    """Of ``names``, the variables the run's launch script sets itself."""
    path = target / script if script else None
    if path is None or not path.is_file():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    return [n for n in names if script_sets(text, n) is not None]


def _required_imports(tree: ast.Module, package: str = "") -> set[str]:
    """The modules a file imports unconditionally when it is imported: its top-level ``import`` / ``from … import``
    statements, not those inside a ``try`` (an optional dependency it does without), an ``if`` (one platform's) or a
    function (imported when called). ``package``: the file's own package, for its relative imports."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level and package:
            base = ".".join([*package.split(".")[:len(package.split(".")) - node.level + 1],
                             *([node.module] if node.module else [])])
            # the module, and each imported name as a submodule of it (a name that is none resolves to no file)
            out |= {base, *(f"{base}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return out


def _module_file(target: Path, module: str) -> Path | None:
    base = target.joinpath(*module.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def trainer_closure(target: Path, entry: str, limit: int = 2000) -> dict[Path, set[str]] | None:
    """The target's files the trainer imports when it starts (``entry`` and, transitively, every module of the
    target a file of it imports unconditionally, with the packages holding them), each with what it requires; None
    when the entry is not there."""
    start = target / entry
    if not start.is_file():
        return None
    top = Path(entry).parts[0]
    seen: dict[Path, set[str]] = {}
    todo = [start]
    while todo and len(seen) < limit:
        path = todo.pop()
        if path in seen:
            continue
        rel = path.relative_to(target).with_suffix("")
        parts = list(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        package = ".".join(parts if rel.name == "__init__" else parts[:-1])
        try:
            seen[path] = _required_imports(ast.parse(path.read_text(encoding="utf-8", errors="replace")), package)
        except (OSError, SyntaxError, ValueError):
            seen[path] = set()
        for module in seen[path]:
            names = module.split(".")
            if names[0] != top:
                continue
            # the module, or the name imported from it, and every package on the way (their __init__ runs first)
            todo += [f for i in range(1, len(names) + 1) if (f := _module_file(target, ".".join(names[:i])))
                     and f not in seen]
    return seen


def target_imports_of(target: Path, plugin_dir: str | None, text: str, entry: str = TRAINER_REL) -> set[str]:
    """Of the modules the failure says could not be imported, those the target's own code (its package holding the
    plugin, the plugin itself left out) requires too — a top-level import of one of its files (``_required_imports``):
    a dependency of the target, not of the plugin alone. A module the target imports only behind a ``try`` or a
    platform check (``torch_npu`` off an Ascend host) is one it does without: a plugin that requires it is the
    plugin's to guard. Where the trainer ``entry`` is there, only the files it imports when it starts are read
    (``trainer_closure``: a module the target's other tasks require is no dependency of this trainer)."""
    wanted = {m.group("mod") or m.group("missing") for m in IMPORT_FAILED.finditer(text)} - {None, ""}
    if not wanted or not plugin_dir:
        return set()
    plugin = (target / plugin_dir).resolve()
    closure = trainer_closure(target, entry)
    if closure is not None:  # what the trainer itself imports (an NPU-only module it never loads is no dependency)
        required = set().union(set(), *(r for f, r in closure.items() if plugin not in f.resolve().parents))
        return {m for m in wanted if any(r == m or r.startswith(m + ".") for r in required)}
    package = target / Path(plugin_dir).parts[0]
    found: set[str] = set()
    for py in package.rglob("*.py"):
        if plugin in py.resolve().parents:
            continue
        try:
            body = py.read_text(encoding="utf-8", errors="replace")
            if not any(m in body for m in wanted - found):
                continue
            required = _required_imports(ast.parse(body))
        except (OSError, SyntaxError, ValueError):
            continue
        found |= {m for m in wanted if any(r == m or r.startswith(m + ".") for r in required)}
        if found == wanted:
            break
    return found


def defined_classes(folder: Path) -> dict[str, Path]:
    """The classes the Python files of ``folder`` define: name -> the file (the first one that defines it)."""
    found: dict[str, Path] = {}
    for path, tree in folder_modules(folder):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, path)
    return found


def plugin_classes(target: Path, plugin: str | None) -> dict[str, str]:
    """The classes the run's plugin package defines: name -> its file (relative to the target)."""
    return {name: str(path.relative_to(target)) for name, path in defined_classes(target / plugin).items()} \
        if plugin else {}


def model_classes(state: dict[str, Any], ctx: Any) -> set[str]:
    """The run's model classes: every module class of the plugin's model as G1's module tree recorded it, the
    classes the plugin package and the source's own code define, and the source's architecture."""
    plan = state.get("plan") or {}
    found = {plan.get("hf_class")} - {None}
    tree = ((state.get("gates") or {}).get("G1") or {}).get("module_tree_file")
    if tree and Path(tree).is_file():
        try:
            data = json.loads(Path(tree).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            data = {}
        found |= set((data.get("classes") or {}).values()) | {str(data.get("model_class", "")).rsplit(".", 1)[-1]}
    folders = [Path(ctx.source)] + ([Path(ctx.target) / plan["plugin_dir"]] if plan.get("plugin_dir") else [])
    for folder in folders:
        found |= set(defined_classes(folder))
    return found - {""}


def _get(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _yaml_data(target: Path, config: str | None) -> Any:
    if not config or not (target / config).is_file():
        return None
    try:
        return yaml.safe_load((target / config).read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return None


def _import_sites(target: Path, plugin: str | None, text: str) -> str:
    """When a probe reports a failed import without its traceback, the plugin's own import lines that name the
    missing module or name, as frames (``File "...", line N``), so the context rules see whose code imports it."""
    found = IMPORT_FAILED.search(text)
    if not found or not plugin or not (target / plugin).is_dir():
        return ""
    missing = found.group("name") or found.group("missing") or found.group("lazy") or ""
    sites = []
    for path in sorted((target / plugin).rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if "import" in line and missing.rsplit(".", 1)[-1] in line:
                sites.append(f'\n  File "{path.relative_to(target)}", line {number}, in <module>')
    return "".join(sites[:3])


def where_to_fix(owner: str | None, ctx: Any, state: dict[str, Any], text: str = "",
                 artifacts: Artifacts | None = None) -> str:
    """The run's own files an owner's fix goes in, named for the diagnosis (a case's advice is general; the user
    needs this run's file): the plugin's modules (model); the template, mm_plugin and collator this run uses, each at
    its registration, and the training records (data); the YAML and launch script (config); the runtime interpreter
    (environment). '' when the owner is unknown."""
    plan, target = state.get("plan") or {}, Path(ctx.target)
    if owner == "model" and plan.get("plugin_dir") and (target / plan["plugin_dir"]).is_dir():
        files = sorted(str(p.relative_to(target)) for p in (target / plan["plugin_dir"]).glob("*.py"))
        return f"The model plugin's files: {', '.join(files)}." if files else ""
    if owner == "data":
        inventory = target_inventory(target)
        named, files = [], []
        for kind, key in (("templates", "template"), ("mm_plugins", "mm_plugin"), ("collators", "collator")):
            entry = next((e for e in (inventory.data.get(kind) or []) if inventory.ok and e.get("id") == plan.get(key)),
                         None)
            if entry:
                files.append(entry["file"])
                named.append(f"{key} {entry['id']}{' (' + entry['target'] + ')' if entry.get('target') else ''} at "
                             f"{Path(entry['file']).name}:{entry.get('line')}")
        # file names with their common folder once: the report cuts the diagnosis, and the records come last
        under = f" (under {os.path.commonpath(files)}/)" if len(files) > 1 and os.path.commonpath(files) else \
            (f" ({str(Path(files[0]).parent)}/)" if files else "")
        records = getattr(ctx, "data_path", None) or Path(ctx.source) / "data"
        return "This run's data path: " + "; ".join(named) + under + f"; the training records {records}."
    if owner == "config":
        files = [p for p in (plan.get("config_path"), plan.get("script_path")) if p]
        keys = config_keys(text, artifacts)
        said = f" (the failure names {', '.join(keys)})" if keys else ""
        return f"This run's settings: {', '.join(files)}{said}." if files else ""
    if owner == "environment":
        return f"The target runtime: {getattr(ctx, 'runtime_python', '')} (its installed packages and host)."
    return ""


def config_keys(text: str, artifacts: Artifacts | None, facts: Iterable[str] = (), limit: int = 4) -> list[str]:
    """The run's YAML keys a failure names (at most ``limit``): the dotted keys ``facts`` state (the reasons of the
    context rules that decided on this run's own files, which name the key they decided on), G3's own finding paths,
    dotted keys or specific leaves the error lines name, keys whose value they quote."""
    if artifacts is None:
        return []
    stated = [d for d in artifacts.yaml_keys.values()
              if any(re.search(rf"(?<![\w.]){re.escape(d)}(?![\w])", f) for f in facts)]
    return list(dict.fromkeys(stated + finding_keys(text, artifacts) + keys_named(text, artifacts) +
                              keys_valued(text, artifacts)))[:limit]


# G3's problem lines: "[finding-code] dotted.key: message" (routes/fsdp2/gates/config_gate.py)
_FINDING_LINE = re.compile(r"^\[[\w-]+\] (?P<key>[A-Za-z_][\w.]*):", re.M)


def finding_keys(text: str, artifacts: Artifacts) -> list[str]:
    """The YAML keys G3's own findings name at the head of their lines (the validator's path of each finding)."""
    keys = set(artifacts.yaml_keys.values())
    return [m.group("key") for m in _FINDING_LINE.finditer(text) if m.group("key") in keys]


def _data_code(target: Path, plan: dict[str, Any]) -> list[str]:
    """Where the run's template, mm_plugin and collator are defined (the target's static inventory): the folder of
    the template and mm_plugin modules (the data utilities they share: formatters, conversion, the seq2seq collator)
    and the registered collator's own file (not its folder: the framework's sampler and loader live there)."""
    inventory = target_inventory(target)
    if not inventory.ok:
        return []
    wanted = {"templates": plan.get("template"), "mm_plugins": plan.get("mm_plugin"), "collators": plan.get("collator")}
    found = []
    for kind, ident in wanted.items():
        for entry in inventory.data.get(kind) or []:
            if entry.get("id") == ident and entry.get("file"):
                found.append(entry["file"] if kind == "collators" else str(Path(entry["file"]).parent))
    return found


def _changed_last(target: Path, ctx: Any, artifacts: Artifacts, failed: dict[str, Any]) -> str | None:
    """The owner of the newest file this run's own commits (since its base tag, up to the failed gate's commit)
    changed among its artifacts; None when the run committed nothing (``msmigrate verify``) or nothing of them."""
    base = f"refs/tags/{ctx.work_branch}/base" if hasattr(ctx, "work_branch") else None
    if base is None or not (target / ".git").exists():
        return None
    upto = failed.get("target_commit") or "HEAD"
    log = git(target, "log", "--name-only", "--format=", f"{base}..{upto}", check=False)
    if log.returncode != 0:
        return None
    for path in (p.strip() for p in log.stdout.splitlines()):
        owner = artifacts.owner_of(path) if path else None
        if owner:
            return owner
    return None
