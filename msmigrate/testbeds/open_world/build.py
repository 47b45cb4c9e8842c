"""Build one family's tiny source from the family's own classes, and verify it the way a user would load it.

``build_family(model_type, dest)`` writes config.json + model.safetensors (random weights, seed 0), the family's
processor (its image processor with default settings, a tiny trained tokenizer that knows the family's special
tokens, the chat template ``chat_style`` picks) and ShareGPT sample data with PIL images, then reloads the folder
with ``AutoProcessor`` / ``AutoModelForImageTextToText`` and runs a forward with labels. It never raises for a
family it cannot build: the ``BuildResult`` says at which stage and why (the sweep prints it as "not buildable").
Run as ``python -m msmigrate.testbeds.open_world.build TYPE DEST`` it prints the result as one JSON line: the sweep
runs it that way in the runtime the source is meant for (one with torchvision, where the family's processor
needs it).
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
import shutil
import sys
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..fixtures.sample_data import to_chat_messages, write_sample_data
from ..fixtures.tokenizer import build_tokenizer
from .chat_style import chat_styles
from .fit import fit_media_count, fit_rotary_sections, fit_tiles, is_int
from .shrink import IMAGE_TOKENS, PATCHES_PER_SIDE, shrink_config, shrunk_token_count
from .tokens import (_SPECIAL_FIELDS, family_tokens, fresh_token, token_fields, token_for_field,
                     unset_token_fields)

STAGES = ("classes", "tokens", "config", "processor", "model", "save", "verify", "done")


@dataclass
class BuildResult:
    family: str
    ok: bool = False
    stage: str = "classes"  # the stage reached (the failing one when not ok)
    reason: str = ""
    architecture: str = ""
    processor_class: str = ""
    image_processor_class: str = ""
    template_source: str = ""
    loss: float | None = None
    details: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


class NotBuildable(Exception):
    """A family this builder cannot make faithfully; the message says why."""


def has_torchvision() -> bool:
    if importlib.util.find_spec("torchvision") is None:
        return False
    try:
        import torchvision  # noqa: F401  (a CUDA build next to a CPU torch fails here)
    except (ImportError, RuntimeError, OSError):
        return False
    return True


def _processor_family(model_type: str, proc_cls, mapping: dict) -> str:
    """``model_type`` where ``mapping`` has it, else the model type the processor class belongs to (a MoE variant
    that reuses its dense sibling's processor: that family's parts are the ones it takes)."""
    if model_type in mapping or proc_cls is None:
        return model_type
    module = getattr(proc_cls, "__module__", "")  # transformers.models.<family>.processing_<family>
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "models" else model_type


def _image_processor(model_type: str, torchvision: bool, proc_cls=None):
    from transformers.models.auto.image_processing_auto import (IMAGE_PROCESSOR_MAPPING_NAMES,
                                                                get_image_processor_class_from_name)

    model_type = _processor_family(model_type, proc_cls, IMAGE_PROCESSOR_MAPPING_NAMES)
    names = IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type) or {}
    if isinstance(names, str):
        names = {"torchvision": names}
    order = ("torchvision", "pil") if torchvision else ("pil",)
    for backend in order:
        if names.get(backend):
            cls = get_image_processor_class_from_name(names[backend])
            if cls is not None:
                return cls()
    if names and not torchvision:
        raise NotBuildable(f"image processor {names} needs torchvision (not importable in this runtime)")
    return None


def _other_part(param: str, model_type: str, torchvision: bool, proc_cls=None):
    """A default video processor / feature extractor of the family, for processors that take one."""
    if param == "video_processor":
        from transformers.models.auto.video_processing_auto import (VIDEO_PROCESSOR_MAPPING_NAMES,
                                                                    video_processor_class_from_name)
        name = VIDEO_PROCESSOR_MAPPING_NAMES.get(_processor_family(model_type, proc_cls,
                                                                   VIDEO_PROCESSOR_MAPPING_NAMES))
        if isinstance(name, dict):
            name = name.get("torchvision")
        if name and torchvision:
            return video_processor_class_from_name(name)()
        return None
    if param == "feature_extractor":
        from transformers.models.auto.feature_extraction_auto import (FEATURE_EXTRACTOR_MAPPING_NAMES,
                                                                      feature_extractor_class_from_name)
        name = FEATURE_EXTRACTOR_MAPPING_NAMES.get(model_type)
        return feature_extractor_class_from_name(name)() if name else None
    return None


def _config_value_suffix(cfg, suffix: str):
    """The first int field of the config tree whose name ends with ``suffix`` (``_merge_size``)."""
    from transformers import PretrainedConfig

    todo = [cfg]
    while todo:
        node = todo.pop(0)
        for key, value in vars(node).items():
            if key.endswith(suffix) and isinstance(value, int) and not isinstance(value, bool):
                return value
        todo.extend(v for v in vars(node).values() if isinstance(v, PretrainedConfig))
    return None


def _config_value(cfg, name: str):
    """``name`` from the config tree (top level first): a processor parameter a real checkpoint sets from it."""
    from transformers import PretrainedConfig

    todo = [cfg]
    while todo:
        node = todo.pop(0)
        if name in vars(node) and getattr(node, name) is not None:
            return getattr(node, name)
        todo.extend(v for v in vars(node).values() if isinstance(v, PretrainedConfig))
    return None


def _side(value):
    """A square size given as one number or as (height, width): its first side."""
    return value[0] if isinstance(value, (list, tuple)) and value else value


def _tower_patches(cfg, report) -> int | None:
    """Patches a side of the vision tower: PATCHES_PER_SIDE when the shrink set its input size, else the family's
    own ``image_size // patch_size`` (the first config of the tree that has both)."""
    if report.old_patches_per_side:
        return PATCHES_PER_SIDE
    size, patch = _side(_config_value(cfg, "image_size")), _side(_config_value(cfg, "patch_size"))
    return size // patch if is_int(size) and is_int(patch) and size >= patch else None


def _config_name(param: str) -> str:
    """The config field a processor parameter names, abbreviations spelled out (``img_size`` is ``image_size``)."""
    return param.replace("img_", "image_") if param.startswith("img_") else param


def _fit_image_processor(image_processor, cfg) -> None:
    """The image processor as a checkpoint saves it next to its config: its int settings that the config tree also
    has (``patch_size``, ``temporal_patch_size``; ``merge_size`` as ``spatial_merge_size``) take the config's
    value, and a fixed-size one resizes to the tower's input size (class defaults and config defaults disagree for
    some families: patch 14 vs 16, 224 vs 336 pixels)."""
    for attr, value in list(vars(image_processor).items()):
        if is_int(value) and attr.endswith("_size"):
            theirs = _config_value(cfg, attr) or _config_value_suffix(cfg, "_" + attr)
            if is_int(theirs):
                setattr(image_processor, attr, theirs)
    side = _side(_config_value(cfg, "image_size"))
    if not isinstance(side, int) or side <= 0:
        return
    for attr in ("size", "crop_size"):
        size = getattr(image_processor, attr, None)
        if size is None:
            continue
        items = size if isinstance(size, dict) else vars(size) if hasattr(size, "__dict__") else {}
        keys = {k for k, v in items.items() if v is not None}  # a SizeDict lists every key, unset ones as None
        if keys & {"height", "width"}:
            setattr(image_processor, attr, {"height": side, "width": side})
        elif "shortest_edge" in keys and attr == "size" and getattr(image_processor, "crop_size", None):
            setattr(image_processor, attr, {"shortest_edge": side})


def _image_tokens_followed(name: str, value, report) -> int | None:
    """The shrunk count for a processor setting ``name`` that counts media tokens per image (``image_seq_length``,
    ``num_image_tokens`` …) and holds the family's unshrunk count of such a config field: the processor writes as
    many tokens as the tiny tower gives features."""
    if not IMAGE_TOKENS.match(name) or not isinstance(value, int) or isinstance(value, bool):
        return None
    for path, (old, new) in report.changes.items():
        if IMAGE_TOKENS.match(path.rsplit(".", 1)[-1]) and old == value:
            return new
    # no config field holds it (the processor alone counts the tokens): it follows the shrunk tower all the same
    return shrunk_token_count(value, report.old_patches_per_side) if report.old_patches_per_side else None


def _config_count(cfg) -> int | None:
    """The config tree's media-token count per image (``num_image_tokens`` …), top level first."""
    from transformers import PretrainedConfig

    todo = [cfg]
    while todo:
        node = todo.pop(0)
        for key, value in vars(node).items():
            if IMAGE_TOKENS.match(key) and "audio" not in key and isinstance(value, int) and value > 0:
                return value
        todo.extend(v for v in vars(node).values() if isinstance(v, PretrainedConfig))
    return None


def _make_vision_config(cfg) -> list[str]:
    """Make the vision sub-configs the family's default config leaves None (declared optional in its
    ``sub_configs``, the class named there) from their own defaults: an image-text source needs its tower, and a
    model built without one has no image path. Returns the fields made."""
    made = []
    for key, cls in (getattr(type(cfg), "sub_configs", None) or {}).items():
        if "vision" in key and getattr(cfg, key, None) is None and isinstance(cls, type) \
                and hasattr(cls, "model_type") and cls.model_type:
            setattr(cfg, key, cls())
            made.append(key)
    return made


def _has_class_token(model) -> bool:
    """Whether a vision tower of ``model`` prepends a learned class embedding to the patches."""
    return any(name.rsplit(".", 1)[-1] == "class_embedding" for name, _ in model.named_parameters())


def _expanded_media_token(processor, tok) -> int | None:
    """The id the processor writes most often for one image, measured: ``processor`` is called on a text holding
    its own image placeholder once, with one image, and the id repeated most among those the plain text lacks is
    the one the model scatters image features into (a placeholder expanded into patch tokens, row / column
    markers around them, or the placeholder itself repeated). None when the processor cannot be called so or
    repeats nothing; the model config is then bound by name."""
    from collections import Counter

    from PIL import Image

    placeholder = getattr(processor, "image_token", None)
    placeholder = getattr(placeholder, "content", placeholder)
    if not isinstance(placeholder, str) or placeholder not in tok.get_vocab():
        return None
    try:  # a batch item: the family's own processor code decides whether it takes this call
        ids = processor(text=[f"look {placeholder} here"], images=[Image.new("RGB", (64, 48), (90, 120, 150))],
                        return_tensors="pt")["input_ids"][0].tolist()
    except Exception:  # noqa: BLE001
        return None
    plain = set(tok("look here")["input_ids"])
    counts = Counter(i for i in ids if i not in plain)
    if not counts:
        return None
    token_id, n = counts.most_common(1)[0]
    return token_id if n > 1 and token_id != tok.unk_token_id else None


def _bind_token_ids(cfg, tok, tokens, processor=None, notes: dict | None = None) -> dict[str, str]:
    """Point every token-id field of the config at the tiny tokenizer's id of the token it names: the processor's
    own ``X_token`` for a field ``X_token_id`` / ``X_token_index`` where the built processor has one (it is the
    authority on which token it expands), else the family token or a fresh one of that name."""
    special = {"bos": tok.bos_token_id, "eos": tok.eos_token_id, "pad": tok.pad_token_id,
               "decoder_start": tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id,
               "unk": tok.unk_token_id, "sep": tok.eos_token_id}
    bound = {}
    media_id = _expanded_media_token(processor, tok) if processor is not None else None
    for node, key in token_fields(cfg):
        value = getattr(node, key)
        if key in _SPECIAL_FIELDS:
            new = special[key.removesuffix("_token_id")]
            if new is None:
                new = tok.pad_token_id
            token = key
        else:
            stem = key.removesuffix("_id").removesuffix("_index").removesuffix("_token")
            # the token the checkpoint's tokenizer names (the one a processor repeats: a processor's own
            # ``image_token`` can be the placeholder it expands into those), else the processor's
            theirs = getattr(tok, f"{stem}_token", None) if token_for_field(key, tokens.named) else None
            if not (isinstance(theirs, str) and theirs in tok.get_vocab()) and processor is not None:
                theirs = getattr(processor, f"{stem}_token", None)
            theirs = getattr(theirs, "content", theirs)  # an AddedToken the processor made itself
            token = theirs if isinstance(theirs, str) and theirs in tok.get_vocab() else \
                token_for_field(key, tokens.named) or fresh_token(key)
            if stem == "image" and media_id is not None:  # what the processor writes, measured
                if notes is not None and tok.convert_ids_to_tokens(media_id) != token:
                    notes[key] = {"by_name": token, "measured": tok.convert_ids_to_tokens(media_id)}
                token = tok.convert_ids_to_tokens(media_id)
            new = tok.convert_tokens_to_ids(token)
        if isinstance(value, list):
            new = [new] if key in _SPECIAL_FIELDS else [new] * len(value)
        setattr(node, key, new)
        bound[key] = token
    if processor is not None:  # a field left unset (None) by the family's defaults that a checkpoint fills in
        for node, key in unset_token_fields(cfg):
            stem = key.removesuffix("_id").removesuffix("_index").removesuffix("_token")
            theirs = getattr(processor, f"{stem}_token", None)
            theirs = getattr(theirs, "content", theirs)
            if isinstance(theirs, str) and theirs in tok.get_vocab():
                setattr(node, key, tok.convert_tokens_to_ids(theirs))
                bound[key] = theirs
    return bound


def _tiny_tokenizer(cfg, tokens):
    """The tokenizer: family tokens plus one fresh special token per config token field no family token names."""
    extra = list(tokens.extra)
    for _node, key in token_fields(cfg):
        if key not in _SPECIAL_FIELDS and token_for_field(key, tokens.named) is None:
            extra.append(fresh_token(key))
    return build_tokenizer(list(dict.fromkeys(extra)), bos=tokens.bos, eos=tokens.eos, pad=tokens.pad,
                           unk="<unk>", named_tokens=dict(tokens.named))


def _write(model_type: str, dest: Path, result: BuildResult, torchvision: bool, images: bool,
           class_token: bool = True) -> None:
    import torch
    from transformers import AutoModelForImageTextToText
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES, processor_class_from_name

    result.architecture = MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES[model_type]
    proc_name = PROCESSOR_MAPPING_NAMES.get(model_type)
    if not proc_name:
        raise NotBuildable("transformers maps no processor class to this model type")
    proc_cls = processor_class_from_name(proc_name)
    if proc_cls is None:
        raise NotBuildable(f"processor class {proc_name} does not import")
    result.processor_class = proc_name

    result.stage = "tokens"
    tokens = family_tokens(proc_cls)
    cfg = CONFIG_MAPPING[model_type]()
    result.details["vision_config_made"] = _make_vision_config(cfg) or None
    tok = _tiny_tokenizer(cfg, tokens)
    result.details["special_tokens"] = tokens.all()

    result.stage = "config"
    vocab = (len(tok) + 63) // 64 * 64
    report = shrink_config(cfg, vocab, images=images)
    result.details["image_sizes_shrunk"] = any(k.endswith("image_size") for k in report.changes)
    result.details["token_fields"] = _bind_token_ids(cfg, tok, tokens)
    result.details["shrunk_fields"] = len(report.changes)

    result.stage = "model"
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(cfg)
    result.details["parameters"] = sum(p.numel() for p in model.parameters())
    fitted = fit_rotary_sections(model, cfg)
    if fitted:  # the model below is built again from the config, with the sections it now states
        result.details["rotary_sections_fitted"] = {k: list(v) for k, v in fitted.items()}

    result.stage = "processor"
    styles = chat_styles(proc_cls, tokens)
    style = styles[0]
    result.template_source = style.source
    tok.chat_template = style.template
    result.details["candidate_templates"] = [s.template for s in styles]
    kwargs = {}
    params = inspect.signature(proc_cls.__init__).parameters
    for name, param in params.items():
        if name == "image_processor":
            kwargs[name] = _image_processor(model_type, torchvision, proc_cls)
            result.image_processor_class = type(kwargs[name]).__name__ if kwargs[name] is not None else ""
        elif name == "tokenizer" or name.endswith("_tokenizer"):
            kwargs[name] = tok  # a second tokenizer (a Q-Former's) is the same tiny one: it knows the tokens
        elif name in ("video_processor", "feature_extractor"):
            part = _other_part(name, model_type, torchvision, proc_cls)
            if part is not None:  # absent rather than None: the processor's class check rejects None
                kwargs[name] = part
        elif name == "chat_template":
            kwargs[name] = style.template
        elif name == "num_additional_image_tokens" and param.default == 0 and _has_class_token(model):
            # the tower prepends a class token to its patch features; whether the model keeps it among the image
            # features is the model's code (no config field says so when it always drops it): both are tried
            result.details["class_token_counted"] = class_token
            if class_token:
                kwargs[name] = 1
        elif _image_tokens_followed(name, param.default, report) is not None:
            kwargs[name] = _image_tokens_followed(name, param.default, report)
        elif param.default is None and IMAGE_TOKENS.match(name) and _tower_patches(cfg, report) \
                and _config_value(cfg, name) is None:
            # a count a checkpoint's processor config carries and no config field holds: one token per patch of
            # the tower first (the verify tells whether the family merges patches)
            kwargs[name] = _config_count(cfg) or _tower_patches(cfg, report) ** 2
        elif param.default is None and name not in ("self", "kwargs", "args"):
            value = _config_value(cfg, name)  # e.g. patch_size / vision_feature_select_strategy
            if value is not None:
                kwargs[name] = value
        elif is_int(param.default) and is_int(_config_value(cfg, _config_name(name))):
            # an int setting the config tree also holds (patch_size, downsample_factor, img_size as image_size): a
            # checkpoint saves its processor with the model's value, so the tiny one takes the shrunk config's
            kwargs[name] = _config_value(cfg, _config_name(name))
    if kwargs.get("image_processor") is not None:
        _fit_image_processor(kwargs["image_processor"], cfg)
        for attr, value in list(vars(kwargs["image_processor"]).items()):
            if _image_tokens_followed(attr, value, report) is not None:
                setattr(kwargs["image_processor"], attr, _image_tokens_followed(attr, value, report))
            elif value is None and IMAGE_TOKENS.match(attr) and (_config_count(cfg) or _tower_patches(cfg, report)):
                # a checkpoint saves the model's count; else one token per patch of the tower
                setattr(kwargs["image_processor"], attr, _config_count(cfg) or _tower_patches(cfg, report) ** 2)
        tiles = fit_tiles(kwargs["image_processor"], _side(_config_value(cfg, "image_size")))
        if tiles:
            result.details["tiles_fitted"] = {k: list(v) for k, v in tiles.items()}
    processor = proc_cls(**kwargs)
    media_id = _expanded_media_token(processor, tok) if result.details.get("tiles_fitted") else None
    if media_id is not None:  # the count per tile follows the tiles: what the model gives for the processor's pixels
        counted = fit_media_count(processor, model, media_id)
        if counted:
            result.details["media_count_fitted"] = {k: list(v) for k, v in counted.items()}
    result.details["token_fields"] = _bind_token_ids(cfg, tok, tokens, processor,
                                                     notes=result.details.setdefault("media_token_measured", {}))
    image_token = getattr(processor, "image_token", None)
    image_token = getattr(image_token, "content", image_token)  # an AddedToken the processor made itself
    styles = chat_styles(proc_cls, tokens, image_token if isinstance(image_token, str) else None)
    result.template_source = styles[0].source
    processor.chat_template = tok.chat_template = styles[0].template
    result.details["candidate_templates"] = [s.template for s in styles]
    result.details["candidate_sources"] = [s.source for s in styles]
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(cfg)  # again: with the ids the processor writes

    result.stage = "save"
    model.save_pretrained(dest)
    for weights in dest.glob("*.safetensors"):
        weights.chmod(0o644)
    processor.save_pretrained(dest)
    cfg_path = dest / "config.json"
    data = json.loads(cfg_path.read_text(encoding="utf-8"))
    if not data.get("architectures"):
        data = {"architectures": [type(model).__name__], **data}
        cfg_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    write_sample_data(dest)
    (dest / "README.md").write_text(
        f"# tiny {model_type}\n\nRandom weights, built offline from transformers' `{type(cfg).__name__}` (shrunk), "
        f"`{proc_name}` and a chat template ({style.source}) by msmigrate's open-world sweep.\n", encoding="utf-8")


def verify(dest: Path) -> float:
    """Load ``dest`` as a user would and run one sample with labels; returns the (finite) loss."""
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(dest)
    model = AutoModelForImageTextToText.from_pretrained(dest)
    sample = json.loads((dest / "data" / "train.json").read_text(encoding="utf-8"))[0]
    messages = to_chat_messages(sample)
    # the template lives on the processor, or on its tokenizer for processors that take none of their own
    holder = processor if getattr(processor, "chat_template", None) else getattr(processor, "tokenizer", processor)
    text = holder.apply_chat_template(messages, tokenize=False)
    image = Image.open(dest / "data" / sample["images"][0]).convert("RGB")
    batch = processor(text=[text], images=[image], return_tensors="pt")
    batch["labels"] = batch["input_ids"].clone()
    for key, value in batch.items():  # media follow the compute dtype (some processors return bf16 pixels)
        if torch.is_tensor(value) and value.is_floating_point():
            batch[key] = value.to(model.dtype)
    model.train()
    out = model(**batch)
    loss = getattr(out, "loss", None)
    if loss is None:
        raise NotBuildable("forward with labels returned no loss")
    if not math.isfinite(float(loss)):
        raise NotBuildable(f"forward with labels gave a non-finite loss {float(loss)}")
    return float(loss)


def _set_template(dest: Path, template: str) -> None:
    """Write ``template`` where the saved processor keeps its chat template (and the tokenizer's copy)."""
    for path in dest.glob("*.jinja"):
        path.write_text(template, encoding="utf-8")
    for name in ("processor_config.json", "tokenizer_config.json"):
        path = dest / name
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            if "chat_template" in data:
                data["chat_template"] = template
                path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _verify_candidates(dest: Path, templates: list[str], result: BuildResult) -> float:
    """Verify with the first template whose image placeholder the processor and model accept; the error of the
    first candidate when none does (the most likely placeholder's failure is the telling one)."""
    first: Exception | None = None
    for i, template in enumerate(templates):
        if i:
            _set_template(dest, template)
        try:  # a batch item: the family's own processor/model code decides
            loss = verify(dest)
        except Exception as exc:  # noqa: BLE001
            first = first or exc
            result.details.setdefault("candidate_errors", []).append(_reason(exc))
            continue
        result.details["placeholder_candidate"] = i
        result.template_source = result.details.get("candidate_sources", [result.template_source] * (i + 1))[i]
        return loss
    raise first


def build_family(model_type: str, dest: Path | str) -> BuildResult:
    """Write and verify ``model_type``'s tiny source in ``dest`` (created; must be empty or absent)."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"destination is not empty: {dest}")
    dest.mkdir(parents=True, exist_ok=True)
    torchvision = has_torchvision()
    first: BuildResult | None = None
    # shrunk image sizes first, the family's own where those break the build; a tower's class token counted among
    # the processor's image tokens first, not counted where the model drops it itself
    for images, class_token in ((True, True), (True, False), (False, True), (False, False)):
        if first is not None and (not images and not first.details.get("image_sizes_shrunk")
                                  or not class_token and "class_token_counted" not in result.details):
            continue  # this attempt would build the same source again
        result = BuildResult(family=model_type)
        result.details["torchvision"] = torchvision
        try:  # a batch item: any failure of the family's own code is that family's result, never the sweep's
            _write(model_type, dest, result, torchvision, images, class_token)
            result.stage = "verify"
            result.loss = _verify_candidates(dest, result.details.pop("candidate_templates"), result)
        except Exception as exc:  # noqa: BLE001
            result.reason = _reason(exc)
            result.details["traceback"] = traceback.format_exc(limit=-3)
            first = first or result
            shutil.rmtree(dest)
            dest.mkdir(parents=True)
            continue
        if first is not None:
            result.details["shrunk_image_sizes_failed"] = first.reason
        result.ok, result.stage = True, "done"
        return result
    if first is not result:
        result.details["shrunk_image_sizes_failed"] = first.reason
    return result  # the family's own image sizes failed too: that attempt's stage and reason are the telling ones


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if not isinstance(exc, NotBuildable) else text[:300]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m msmigrate.testbeds.open_world.build MODEL_TYPE DEST", file=sys.stderr)
        return 2
    result = build_family(args[0], Path(args[1]))
    print(result.to_json())
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
