"""The plugin-route YAML for a migrated model, derived from the most similar existing example (its training knobs,
parallel and dataloader settings are kept — the maintainers' rule "copy the baseline, fill model/data entries" —
minus what does not apply to this model: see config_fit),
with the model, data, plugin and sharding entries filled from the plan, the sample data and the real module tree."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from msmigrate.agent.routes.fsdp2.config_fit import fit_to_model
from msmigrate.tools.module_plan import apply_modules_from_tree, recompute_from_tree

ROLE_PAIRS = (("role", "content", "user", "assistant"), ("from", "value", "human", "gpt"))


def attr_from_samples(data_json: Path) -> dict[str, Any]:
    """The ``attr`` mapping (framework concept → JSON key) read off the first sample, so roles and keys are facts."""
    samples = json.loads(Path(data_json).read_text(encoding="utf-8"))
    first = samples[0] if isinstance(samples, list) and samples else {}
    messages_key = next((k for k in ("messages", "conversations") if k in first), "messages")
    turn = (first.get(messages_key) or [{}])[0]
    attr: dict[str, Any] = {"messages": messages_key}
    for role_tag, content_tag, user, assistant in ROLE_PAIRS:
        if role_tag in turn:
            attr.update(role_tag=role_tag, content_tag=content_tag, user_tag=user, assistant_tag=assistant)
            break
    for media in ("images", "videos", "audios"):
        if media in first:
            attr[media] = media
    return attr


def _section(cfg: dict[str, Any], *keys: str) -> dict[str, Any]:
    for k in keys:
        cfg = cfg.setdefault(k, {})
    return cfg


def tied_embeddings(source: Path, tree: dict[str, Any] | None = None) -> bool:
    """Whether the model ties its LM head to the token embedding: the built model's fact from the module tree probe
    where it has one (config.json omits ``tie_word_embeddings`` when it equals the class default), else config.json."""
    if tree is not None and isinstance(tree.get("tied_embeddings"), bool):
        return tree["tied_embeddings"]
    try:
        cfg = json.loads((Path(source) / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return bool(cfg.get("tie_word_embeddings", False))


def ships_fast_tokenizer(source: Path) -> bool:
    """Whether the source's tokenizer is a ``tokenizers`` file (tokenizer.json), i.e. loads as a fast tokenizer."""
    return (Path(source) / "tokenizer.json").is_file()


def draft_config(plan: dict[str, Any], baseline: dict[str, Any], *, source: Path, data_json: Path,
                 tree: dict[str, Any]) -> dict[str, Any]:
    cfg = copy.deepcopy(baseline)
    fit_to_model(cfg, tree=tree, source=source)  # only what applies to this model survives from the example
    tree = {**tree, "tied_embeddings": tied_embeddings(source, tree)}
    model = _section(cfg, "model")
    for stale in ("model_name_or_path", "model_id", "freeze"):
        model.pop(stale, None)
    model.update(model_id=plan["model_id"], model_name_or_path=str(source),
                 trust_remote_code=plan["route"] == "custom", freeze=[])
    model.setdefault("attn_implementation", "sdpa")
    ds = _section(cfg, "data", "dataset_param")
    ds["dataset_type"] = plan["dataset_type"]
    ds["attr"] = attr_from_samples(data_json)
    pre = _section(ds, "preprocess_parameters")
    pre.update(model_name_or_path=str(source), trust_remote_code=plan["route"] == "custom")
    if ships_fast_tokenizer(source):
        # the example's `use_fast_tokenizer: false` is about its own tokenizer; a source with only a tokenizers
        # file has no slow class, and transformers 4.57's AutoProcessor then fails (the real load_tokenizer
        # swallows that and reports "Processor was not found")
        pre["use_fast_tokenizer"] = True
    basic = _section(ds, "basic_parameters")
    basic.update(template=plan["template"], dataset=str(data_json), dataset_dir=str(Path(data_json).parent))
    basic.pop("chat_template", None)
    collate = _section(cfg, "data", "dataloader_param", "collate_param")
    collate.pop("model_name", None)
    collate["collator_id"] = plan["collator"]
    fsdp = _section(cfg, "parallel", "fsdp_plan")
    fsdp["apply_modules"] = apply_modules_from_tree(tree)
    features = _section(cfg, "features")
    recompute = recompute_from_tree(tree)
    features["recompute"] = bool(recompute)
    _section(features, "recompute_plan")["apply_modules"] = recompute
    training = _section(cfg, "training")
    training["plugin"] = [plan["plugin_dir"], plan["data_plugin"]]
    for stale in ("load", "save"):
        training.pop(stale, None)
    return cfg


def input_overrides(source: Path, data_json: Path, cache_dir: Path | None = None) -> dict[str, Any]:
    """The keys of a plugin-route YAML that name the model folder and the sample data, set to ``source`` and
    ``data_json`` (images resolve against ``dataset_dir``; ``max_samples`` becomes the sample count). Used to check an existing config against the spec's
    inputs without editing it; ``cache_dir`` keeps the dataset cache out of the target checkout."""
    basic: dict[str, Any] = {"dataset": str(data_json), "dataset_dir": str(Path(data_json).parent)}
    try:  # the real huggingface dataset selects range(max_samples): a cap above the sample count crashes it
        samples = json.loads(Path(data_json).read_text(encoding="utf-8"))
        if isinstance(samples, list) and samples:
            basic["max_samples"] = len(samples)
    except (OSError, json.JSONDecodeError):
        pass
    if cache_dir is not None:
        basic["cache_dir"] = str(cache_dir)
    return {"model": {"model_name_or_path": str(source)},
            "data": {"dataset_param": {"preprocess_parameters": {"model_name_or_path": str(source)},
                                       "basic_parameters": basic}}}


def launch_script(baseline_script: str, baseline_config: str, new_config: str) -> str:
    """The baseline example's launch script with its YAML swapped — same env, same torchrun shape."""
    if baseline_config not in baseline_script:
        raise ValueError(f"baseline script does not reference {baseline_config}")
    return baseline_script.replace(baseline_config, new_config)


def load_baseline(target: Path, example: str | None) -> tuple[dict[str, Any], str | None, str | None]:
    """(baseline YAML dict, its launch script text, the script's path) for the similar example."""
    import yaml

    if not example or not (target / example).is_file():
        raise FileNotFoundError(f"similar example {example!r} not found in {target}")
    cfg = yaml.safe_load((target / example).read_text()) or {}
    scripts = sorted((target / example).parent.glob("finetune_*.sh"))
    naming = [s for s in scripts if Path(example).name in s.read_text(errors="replace")]
    script = (naming or scripts or [None])[0]
    return cfg, (script.read_text() if script else None), (str(script.relative_to(target)) if script else None)
