"""The plugin-route YAML for a migrated model, derived from the most similar existing example (its training knobs,
parallel and dataloader settings are kept — the maintainers' rule "copy the baseline, fill model/data entries" —
minus what does not apply to this model: see config_fit, and its optimizer knobs where they depart from the source's
own recipe: optimizer_recipe),
with the model, data, plugin and sharding entries filled from the plan, the sample data and the real module tree."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap

from msmigrate.agent.routes.fsdp2.attention_choice import choose_attention
from msmigrate.agent.routes.fsdp2.config_fit import fit_to_model
from msmigrate.agent.routes.fsdp2.cutoff_size import sized_cutoff
from msmigrate.agent.routes.fsdp2.optimizer_recipe import data_order_findings, departures
from msmigrate.agent.routes.fsdp2.pixel_limits import derived_pixel_limits, largest_sample_image
from msmigrate.agent.routes.fsdp2.weights_load import delivered_weights, hf_load_entries, hf_weight_dir, weights_folder
from msmigrate.tools import yaml_roundtrip as rt
from msmigrate.tools.checkpoint_conversion import converted_from
from msmigrate.tools.file_writer import last_written_version
from msmigrate.tools.module_plan import apply_modules_from_tree, recompute_from_tree
from msmigrate.tools.repo_reader.training_recipe import source_data_order, source_recipe
from msmigrate.agent.launch_size import size_launch_script

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
                 tree: dict[str, Any], notes: list[str] | None = None,
                 runtime_attention: dict[str, Any] | None = None) -> dict[str, Any]:
    """The example's document with the keys the migration owns set in place (round trip: the example's comments,
    anchors and key order stay; a key the example lacks is added at the end of its section). ``notes`` collects why
    a value the example sets was changed for this source; ``runtime_attention``: the attention implementations the
    target runtime can run (the env probe's), so the draft asks for none it cannot."""
    notes = notes if notes is not None else []
    if isinstance(baseline, CommentedMap):
        cfg = rt.clone(baseline)
    else:
        cfg = rt.load(rt.dump(copy.deepcopy(baseline))) if baseline else CommentedMap()
    fit_to_model(cfg, tree=tree, source=source)  # only what applies to this model survives from the example
    tree = {**tree, "tied_embeddings": tied_embeddings(source, tree)}
    custom = plan["route"] == "custom"

    def put(where: dict[str, Any], key: str, value: Any) -> None:
        rt.put(cfg, where, key, value)

    model = rt.section(cfg, "model")
    for key, value in (("model_id", plan["model_id"]), ("model_name_or_path", str(source)),
                       ("trust_remote_code", custom), ("freeze", [])):
        put(model, key, value)
    attn, why = choose_attention(plan, tree, model.get("attn_implementation"), runtime_attention)
    if attn != model.get("attn_implementation"):
        put(model, "attn_implementation", attn)
    if why:
        notes.append(why)
    ds = rt.section(cfg, "data", "dataset_param")
    put(ds, "dataset_type", plan["dataset_type"])
    rt.put_mapping(cfg, ds, "attr", attr_from_samples(data_json))
    pre = rt.section(cfg, "data", "dataset_param", "preprocess_parameters")
    put(pre, "model_name_or_path", str(source))
    put(pre, "trust_remote_code", custom)
    if ships_fast_tokenizer(source):
        # the example's `use_fast_tokenizer: false` is about its own tokenizer; a source with only a tokenizers
        # file has no slow class, and transformers 4.57's AutoProcessor then fails (the real load_tokenizer
        # swallows that and reports "Processor was not found")
        put(pre, "use_fast_tokenizer", True)
    # the processor's own bounds, never the example's; none below a sample image (it would be resampled twice)
    limits, why = derived_pixel_limits(source, pre, largest_sample_image(data_json))
    if any(pre.get(k) != v for k, v in limits.items()) or not limits:
        notes.append(why)
    for key, value in limits.items():
        if value is None:
            rt.remove(pre, key)
        else:
            put(pre, key, value)
    basic = rt.section(cfg, "data", "dataset_param", "basic_parameters")
    put(basic, "template", plan["template"])
    put(basic, "dataset", str(data_json))
    put(basic, "dataset_dir", str(Path(data_json).parent))
    rt.remove(basic, "chat_template")
    if basic.get("max_samples") is not None:
        # the example's cap is its own demo's: the real huggingface dataset selects range(max_samples), which
        # crashes on a dataset smaller than the cap and silently drops the rest of a larger one
        notes.append(f"data.dataset_param.basic_parameters.max_samples: the example's cap {basic.get('max_samples')} "
                     "set to null (every sample of the user's dataset; the real dataset selects range(max_samples), "
                     "which fails on fewer samples than the cap)")
        put(basic, "max_samples", None)
    cutoff, why = sized_cutoff(plan, basic.get("cutoff_len"))
    if why:
        put(basic, "cutoff_len", cutoff)
        notes.append(why)
    collate = rt.section(cfg, "data", "dataloader_param", "collate_param")
    rt.remove(collate, "model_name")
    put(collate, "collator_id", plan["collator"])
    put(rt.section(cfg, "parallel", "fsdp_plan"), "apply_modules", apply_modules_from_tree(tree))
    features = rt.section(cfg, "features")
    recompute = recompute_from_tree(tree)
    put(features, "recompute", bool(recompute))
    put(rt.section(cfg, "features", "recompute_plan"), "apply_modules", recompute)
    training = rt.section(cfg, "training")
    put(training, "plugin", [plan["plugin_dir"], plan["data_plugin"]])
    rt.remove(training, "save")  # the example's output folder; the user names their own
    # train from the user's checkpoint (converted where transformers converts it at load), never a random init
    for key, value in delivered_weights(weights_folder(plan, source)).items():
        if value is None:
            rt.remove(training, key)
        else:
            put(training, key, value)
    # the example's optimizer knobs where they depart from the source's own recipe (G3 holds the YAML to it)
    for d in departures(training, {}, source_recipe(source))[0]:
        put(training, d["key"], d["source_value"])
        notes.append(f"training.{d['key']}: the example's {d['value']:g} set to {d['source_value']:g}, the source's "
                     f"recipe ({d['where']}): {d['why']}")
    # the order the source draws its records in, where the example's sampler departs from it (G3 holds it too)
    for d in data_order_findings(cfg, source_data_order(source), "the draft"):
        put(rt.section(cfg, "data", "dataloader_param"), "shuffle", d["source_value"])
        notes.append(f"data.dataloader_param.shuffle: the example's {str(d['value']).lower()} set to "
                     f"{str(d['source_value']).lower()}, the order the source's training draws its records in")
    return cfg


def input_overrides(source: Path, data_json: Path, cache_dir: Path | None = None,
                    config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The keys of a plugin-route YAML that name the model folder and the sample data, set to ``source`` and
    ``data_json`` (images resolve against ``dataset_dir``; ``max_samples`` becomes the sample count). Used to check an existing config against the spec's
    inputs without editing it; ``cache_dir`` keeps the dataset cache out of the target checkout. A ``config`` that
    loads weights (``training.load``) loads the source's safetensors instead, or keeps the checkpoint the migration
    converted from this source (its record names the source)."""
    basic: dict[str, Any] = {"dataset": str(data_json), "dataset_dir": str(Path(data_json).parent)}
    try:  # the real huggingface dataset selects range(max_samples): a cap above the sample count crashes it
        samples = json.loads(Path(data_json).read_text(encoding="utf-8"))
        if isinstance(samples, list) and samples:
            basic["max_samples"] = len(samples)
    except (OSError, json.JSONDecodeError):
        pass
    if cache_dir is not None:
        basic["cache_dir"] = str(cache_dir)
    out: dict[str, Any] = {"model": {"model_name_or_path": str(source)},
                           "data": {"dataset_param": {"preprocess_parameters": {"model_name_or_path": str(source)},
                                                      "basic_parameters": basic}}}
    training = (config or {}).get("training") if isinstance(config, dict) else None
    if isinstance(training, dict) and training.get("load") and hf_weight_dir(source):
        # the config loads weights from the author's folder: the spec's source's weights, loaded the same way
        weights = training["load"] if converted_from(training["load"], source) else str(source)
        out["training"] = {k: v for k, v in hf_load_entries(str(weights)).items() if k != "init_model_with_meta_device"}
    return out


def launch_script(baseline_script: str, baseline_config: str, new_config: str) -> str:
    """The baseline example's launch script with its YAML swapped — same env, same torchrun shape."""
    if baseline_config not in baseline_script:
        raise ValueError(f"baseline script does not reference {baseline_config}")
    return baseline_script.replace(baseline_config, new_config)


def example_launch_script(target: Path, plan: dict[str, Any]) -> str | None:
    """The launch script the config phase derives for ``plan`` from its similar example (its YAML swapped, sized by
    the plan's launch size when it has one); None when the example has no script."""
    script, _ = baseline_script(target, plan["similar_case"])
    if not script:
        return None
    text = launch_script(script, plan["similar_case"], plan["config_path"])
    return size_launch_script(text, plan["launch_size"]) if plan.get("launch_size") else text


def derived_script(target: Path, plan: dict[str, Any]) -> tuple[str, str] | None:
    """(what, text) of the launch script the delivered one stands in for: the script the config phase derives from
    the similar example, else (the similar example is the delivered config itself: a verify of a migration on its
    branch) the version msmigrate last wrote of it — what G3's dry run compares a script that stops before its
    launcher with. None when neither differs from the delivered script or neither is there."""
    script = target / plan["script_path"]
    current = script.read_text(errors="replace") if script.is_file() else None
    try:
        text = example_launch_script(target, plan) if plan.get("similar_case") else None
    except (FileNotFoundError, ValueError):  # no similar example in this checkout, or its script names another YAML
        text = None
    if text and text != current:
        return f"the script derived from {plan['similar_case']}", text
    written = last_written_version(target, plan["script_path"])
    if written and written[1] != current:
        return f"the version msmigrate wrote at {written[0]}", written[1]
    return None


def baseline_script(target: Path, example: str | None) -> tuple[str | None, str | None]:
    """(the similar example's launch script text, its path): the ``finetune_*.sh`` beside it that names it, else the
    first one there; the YAML itself is not read (a launch check must not depend on it parsing)."""
    if not example or not (target / example).is_file():
        raise FileNotFoundError(f"similar example {example!r} not found in {target}")
    scripts = sorted((target / example).parent.glob("finetune_*.sh"))
    naming = [s for s in scripts if Path(example).name in s.read_text(errors="replace")]
    script = (naming or scripts or [None])[0]
    return (script.read_text() if script else None), (str(script.relative_to(target)) if script else None)


def load_baseline(target: Path, example: str | None) -> tuple[dict[str, Any], str | None, str | None]:
    """(baseline YAML document, round trip, its launch script text, the script's path) for the similar example."""
    script, path = baseline_script(target, example)
    return rt.load((target / example).read_text(encoding="utf-8")), script, path
