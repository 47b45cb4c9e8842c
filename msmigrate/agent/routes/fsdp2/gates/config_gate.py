"""G3 config: the delivered YAML against the target's own argument schema (unknown / misplaced keys are errors
here, unlike in the framework), registry cross-references, plugin paths, and the pattern audit over the real
module tree of the plugin class; weakened configs are errors too, and so is a config that would train a source
that ships its weights from a random init, and optimizer settings and a record order that depart from the source's own
recipe (``optimizer_recipe.py``). The launch script must run that YAML, its rendezvous host must resolve in the runtime,
and run through the shell up to torchrun it must hand torchrun a script and paths that resolve
(``launch_dry_run_checks.py``)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import yaml

from msmigrate.agent.launch_script_checks import (continuation_findings, data_parallel_ranks, parallel_size_findings,
                                                 port_findings, rank_env_findings, rendezvous_findings,
                                                 route_env_findings, sample_count_findings)
from msmigrate.agent.launch_dry_run_checks import dry_run_findings
from msmigrate.agent.launch_size import launch_size_findings
from msmigrate.agent.routes.fsdp2.attention_choice import attention_findings
from msmigrate.agent.routes.fsdp2.draft_config import derived_script
from msmigrate.agent.routes.fsdp2.gates.bound_inputs import bound_config
from msmigrate.agent.routes.fsdp2.optimizer_recipe import (data_order_findings, decay_group_findings, freeze_findings,
                                                            recipe_findings)
from msmigrate.agent.routes.fsdp2.gates.settings_fit import (expert_parallel_findings, ignored_trained_findings,
                                                             log_interval_findings, other_model_findings,
                                                             reduce_dtype_findings,
                                                             repeated_dataset_findings, step_records_findings,
                                                             written_folder_findings)
from msmigrate.agent.routes.fsdp2.gates.source_settings import (default_dtype_findings, optimizer_state_findings,
                                                                precision_findings)
from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.agent.routes.fsdp2.weights_load import hf_weight_dir, weights_origin
from msmigrate.tools.repo_reader.trained_parts import source_trained_parts
from msmigrate.tools.repo_reader.training_recipe import source_data_order, source_recipe
from msmigrate.tools.launcher.command import TRAINER_REL
from msmigrate.tools.yaml_validator.yaml_lines import load_yaml
from msmigrate.tools.target_checks import (config_check, decay_groups_check, launch_args_check, module_tree,
                                           rendezvous_check, trainer_args_check)


# a Python file a launch line runs: `torchrun ... path/to/trainer.py`, `python path/x.py` (a relative path: the
# target's own entry point; an absolute one or a variable is the user's business)
_ENTRY = re.compile(r"(?:torchrun|python3?|-m torch\.distributed\.run)\b[^\n]*?\s([\w./-]+\.py)\b")


def script_entries(script_text: str) -> list[str]:
    """The relative .py entry points the launch script runs."""
    joined = script_text.replace("\\\n", " ")
    return [e for e in dict.fromkeys(m.group(1) for m in _ENTRY.finditer(joined)) if not e.startswith("/")]


def missing_entries(script_text: str, target: Path) -> list[str]:
    """The relative .py entry points the launch script runs that the target does not have."""
    return [e for e in script_entries(script_text) if not (Path(target) / e).is_file()]


def _yaml(config: Path) -> dict[str, Any]:
    """The YAML as a dict; empty when unreadable (the validator reports that)."""
    try:
        cfg = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def weights_findings(config: Path, source: Path, target: Path | None = None) -> list[str]:
    """A config that would train the source's model from a random init while the source ships its weights (no
    ``training.load``, or one that names a folder with no checkpoint of either kind: a save folder that does not
    exist yet, read from the checkout's root, ``target``)."""
    cfg = _yaml(config)
    if not cfg:
        return []
    kind, folder = weights_origin(cfg)
    if kind == "dcp-load" and target is not None and hf_weight_dir(source):
        here = Path(folder) if Path(folder).is_absolute() else Path(target) / folder
        if not hf_weight_dir(here) and not (here.is_dir() and dcp_checkpoint(here)):
            return [f"[random-init] training.load: {folder} holds no checkpoint here (no DCP checkpoint, no Hugging "
                    f"Face weights{'' if here.is_dir() else ': the folder does not exist'}), so the user's launch "
                    f"loads nothing and trains from a fresh init while the source's weights are in {source}; set "
                    f"training.load to that folder (load_format auto, no_load_optim and no_load_rng true), and "
                    f"training.save to another"]
    if kind == "random" and hf_weight_dir(source):
        return [f"[random-init] training: init_model_with_meta_device without training.load trains from a random "
                f"init; the source's weights are in {source} (set training.load to it, load_format auto, "
                "no_load_optim and no_load_rng true)"]
    if kind == "dcp-load" and hf_weight_dir(folder) and not dcp_checkpoint(Path(folder)):
        # the gates' launches load their own checkpoints (G4 the HF weights with load_format auto, G5 G4's DCP
        # save): only this check sees the delivered pair
        return [f"[load-format-mismatch] training.load_format: {_training_value(cfg, 'load_format')!r} reads "
                f"training.load ({folder}) as a DCP checkpoint, but that folder holds Hugging Face weights "
                f"(model.safetensors) and no DCP checkpoint (latest_checkpointed_iteration.txt or .metadata): set "
                f"training.load_format to auto (or hf)"]
    return []


_MODEL_PATHS = (("model", "model_name_or_path"),
                ("data", "dataset_param", "preprocess_parameters", "model_name_or_path"))


def hub_name_findings(config: Path, target: Path, source: Path) -> list[str]:
    """Model folders the delivered YAML names (as written, before G1–G6 bind them to this run's source) that are no
    folder: a relative name that resolves to nothing from the checkout's root (where the launch runs) is what
    transformers' ``from_pretrained`` takes for a Hub repo id and downloads — an offline host fails there, an online
    one trains whatever the Hub serves instead of the weights this run verified. An absolute path that is not here
    names another machine's folder and is not judged."""
    cfg = _yaml(config)
    out = []
    for keys in _MODEL_PATHS:
        value: Any = cfg
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, str) or not value.strip() or Path(value).is_absolute():
            continue
        if not (Path(target) / value).exists() and not Path(value).exists():
            out.append(f"[model-path-not-local] {'.'.join(keys)}: {value!r} is no folder from the checkout's root, "
                       f"where the launch runs: transformers reads it as a Hugging Face Hub repo id and downloads "
                       f"it (an offline host fails; an online one trains what the Hub serves, not the weights this "
                       f"run verified): set it to the weights folder ({source})")
    return out


def as_written_findings(config: Path, bound: Path) -> list[dict[str, Any]]:
    """What only the delivered file as written shows when the gates read a bound copy: a key written twice in one
    mapping (the copy is re-dumped from what the loader kept, the last value, so its own check sees one)."""
    if bound == config:
        return []
    loaded = load_yaml(config.read_text(encoding="utf-8", errors="replace"))
    return [f.to_dict() for f in loaded.findings if f.code == "yaml-duplicate-key"]


def dcp_checkpoint(folder: Path) -> bool:
    """Whether a folder holds a DCP checkpoint the trainer can resume: its iteration tracker, or a DCP
    ``.metadata`` in it or in one of its ``iter_*`` folders."""
    return (folder / "latest_checkpointed_iteration.txt").is_file() or (folder / ".metadata").is_file() or \
        any((d / ".metadata").is_file() for d in folder.glob("iter_*"))


def _training_value(cfg: dict[str, Any], key: str) -> Any:
    training = cfg.get("training")
    return training.get(key) if isinstance(training, dict) else None


def gate_config(deps: Any, state: dict[str, Any]) -> dict[str, Any]:
    plan, ctx = state["plan"], deps.ctx
    config = ctx.target / plan["config_path"]
    script = ctx.target / plan["script_path"]
    t0 = time.time()
    problems, codes = [], []
    dry: dict[str, Any] = {"examined": False}
    decay: dict[str, Any] = {"examined": False, "why_not": "no delivered config"}
    dry_found: list[dict[str, Any]] = []
    if not config.is_file():
        problems.append(f"{plan['config_path']} does not exist")
    if not script.is_file():
        problems.append(f"{plan['script_path']} does not exist")
    elif plan["config_path"] not in script.read_text(errors="replace"):
        problems.append(f"{plan['script_path']} does not launch {plan['config_path']}")
    else:
        for entry in missing_entries(script.read_text(errors="replace"), ctx.target):
            problems.append(f"[launch-entry-missing] {plan['script_path']}: it runs {entry}, which is not a file of "
                            f"the target")
            codes.append("launch-entry-missing")
        text = script.read_text(errors="replace")
        present = [e for e in script_entries(text) if (ctx.target / e).is_file()]
        for f in [*launch_size_findings(text, state.get("runtime"), plan["script_path"],
                                       plan.get("launch_size")),
                  *port_findings(text, plan["script_path"]), *continuation_findings(text, plan["script_path"]),
                  *route_env_findings(text, plan["script_path"], ctx.target, present),
                  *rank_env_findings(text, plan["script_path"], ctx.target, present),
                  *rendezvous_findings(text, plan["script_path"], lambda host: rendezvous_check(ctx, host))]:
            problems.append(f"[{f['code']}] {f['key']}: {f['message']}")
            codes.append(f["code"])
        dry_found, dry = dry_run_findings(plan["script_path"], ctx.target, lambda argv: launch_args_check(ctx, argv),
                                          reference=derived_script(ctx.target, plan),
                                          read=lambda args, cwd: trainer_args_check(ctx, args, cwd),
                                          trainer=TRAINER_REL)
        for f in dry_found:
            problems.append(f"[{f['code']}] {f['path']}: {f['message']}")
            codes.append(f["code"])
    findings: list[dict] = list(dry_found)
    if config.is_file():
        tree_file = state["gates"].get("G1", {}).get("module_tree_file")
        if tree_file and Path(tree_file).is_file():
            tree = json.loads(Path(tree_file).read_text())
        else:
            res_tree = module_tree(ctx, plugins=[plan["plugin_dir"]], model_id=plan["model_id"],
                                   trust_remote_code=plan["route"] == "custom")
            tree = res_tree.data.get("result") if res_tree.ok else None
        bound = bound_config(deps, config)
        res = config_check(ctx, bound, tree=tree, device=None)
        findings += res.data.get("findings", []) + attention_findings(_yaml(bound), plan, tree,
                                                                             state.get("runtime")) + \
            as_written_findings(config, bound)
        errors = [f for f in findings if f["severity"] == "error"]
        codes = sorted({*codes, *(f["code"] for f in errors)})
        problems += [f"[{f['code']}] {f['path']}: {f['message']}" for f in errors]
        if not res.ok and not errors:
            problems.append(res.error or "validator failed")
        # the delivered pair as written, then as bound to this run's inputs: binding points training.load at the
        # source with the HF load entries, so a delivered load_format that misreads its own folder shows only here
        problems += list(dict.fromkeys([*weights_findings(config, ctx.source, ctx.target),
                                        *weights_findings(bound, ctx.source)]))
        problems += hub_name_findings(config, ctx.target, ctx.source)
        other = other_model_findings(_yaml(config), (*_MODEL_PATHS, ("training", "load")), ctx.target, ctx.source,
                                     config.name)
        findings += other
        problems += [f"[{f['code']}] {f['path']}: {f['message']}" for f in other]
        codes = sorted({*codes, *(f["code"] for f in other)})
        entries = script_entries(script.read_text(errors="replace")) if script.is_file() else []
        recipe, defaults = source_recipe(ctx.source), res.data.get("training_defaults") or {}
        decay_found, decay = decay_group_findings(
            _yaml(config), defaults, recipe, plan["config_path"],
            lambda: decay_groups_check(ctx, plugins=[plan["plugin_dir"]], model_id=plan["model_id"],
                                       config_path=bound, trust_remote_code=plan["route"] == "custom"))
        unexercised = [*optimizer_state_findings(_yaml(config), _yaml(bound)),
                       *precision_findings(_yaml(config), ctx.source, ctx.target, entries),
                       *default_dtype_findings(_yaml(config), state.get("runtime"), plan["config_path"]),
                       *recipe_findings(_yaml(config), defaults, recipe, plan["config_path"]), *decay_found,
                       *data_order_findings(_yaml(config), source_data_order(ctx.source), plan["config_path"]),
                       *freeze_findings(_yaml(config), source_trained_parts(ctx.source), plan["config_path"]),
                       *expert_parallel_findings(_yaml(config), tree, ctx.source, plan["config_path"]),
                       *ignored_trained_findings(_yaml(config), tree, plan["config_path"]),
                       *reduce_dtype_findings(_yaml(config), plan["config_path"]),
                       *written_folder_findings(_yaml(config), ctx.target, plan["config_path"]),
                       *repeated_dataset_findings(_yaml(config), ctx.target, plan["config_path"]),
                       *log_interval_findings(_yaml(config), plan["config_path"])]
        findings += unexercised
        # a warning (a weight decay the user chose against a source that states none) is reported, not gating
        blocking = [f for f in unexercised if f["severity"] == "error"]
        problems += [f"[{f['code']}] {f['path']}: {f['message']}" for f in blocking]
        codes = sorted({*codes, *(f["code"] for f in blocking)})
        if script.is_file():
            script_text = script.read_text(errors="replace")
            sizes = [*parallel_size_findings(_yaml(config), script_text, plan["script_path"], plan["config_path"]),
                     *sample_count_findings(_yaml(config), script_text, plan["script_path"], plan["config_path"]),
                     *step_records_findings(_yaml(config), data_parallel_ranks(_yaml(config), script_text),
                                            ctx.target, plan["script_path"], plan["config_path"])]
            findings += sizes
            problems += [f"[{f['code']}] {f['path']}: {f['message']}" for f in sizes]
            codes = sorted({*codes, *(f["code"] for f in sizes)})
    failure = "\n".join(problems)
    ev = evidence_item("strict validation", ["validate_config", plan["config_path"]], 0 if not problems else 1, t0,
                       time.time(), failure, {"findings": findings[:40], "error_codes": codes, "launch_dry_run": dry,
                        "decay_groups": decay})
    warnings = sum(f["severity"] != "error" for f in findings)
    return {"gate": "G3", "passed": not problems, "summary": "; ".join(problems[:5]) or
            f"{plan['config_path']} valid against the target schema; 0 errors, {warnings} warning(s); patterns audited; "
            + ("launch script dry-run: what torchrun is handed resolves" if dry.get("examined") else
               f"launch script dry-run not examined ({dry.get('why_not') or 'no script'})"),
            "evidence": [ev], "failure_text": failure, "finding_codes": codes}
