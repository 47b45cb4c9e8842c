"""Shared by the probes that call a source's own processor (runs in the target runtime; imports nothing from
msmigrate): load it the way the trainer would, or compose it where this runtime cannot load all of it."""
import json
import os


def call_with_images(proc, text, images, **kwargs):
    """The processor on one prompt and its images. Processors take a prompt's images in one of two forms: a flat
    list, or one list per prompt (Idefics counts image lists against prompts and refuses two flat images for one
    prompt). The flat form first; where the processor refuses it, the nested one; where both are refused, the flat
    form's error, which is the processor's own word on its input. A bare tokenizer (a source that ships no processor
    class) takes no images at all: it gets the text alone (transformers 5 ignores an ``images`` keyword there, 4.x's
    fast tokenizer raises TypeError on it). A processor is asked for tensors unless the caller asks otherwise: a
    training pipeline calls it so, and some processors' own expansion code reads its image outputs as tensors."""
    from transformers import PreTrainedTokenizerBase

    if isinstance(proc, PreTrainedTokenizerBase):
        return proc(text=[text], **kwargs)
    kwargs.setdefault("return_tensors", "pt")
    if not images:
        return proc(text=[text], images=None, **kwargs)
    try:
        return proc(text=[text], images=images, **kwargs)
    except (ValueError, TypeError) as flat:
        try:
            return proc(text=[text], images=[list(images)], **kwargs)
        except (ValueError, TypeError):
            raise flat from None


def load_processor(folder, trust_remote_code):
    """AutoProcessor; where it cannot load (transformers 5 video processors need torchvision), the recorded
    processor class built from its tokenizer + image processor alone (video is then unavailable, images are not)."""
    import transformers
    from transformers import AutoImageProcessor, AutoProcessor, AutoTokenizer

    cls_name, kwargs = recorded_processor(folder)
    try:
        proc = AutoProcessor.from_pretrained(folder, trust_remote_code=trust_remote_code)
        return proc, "AutoProcessor", type(proc).__name__, kwargs
    except Exception as exc:  # probe boundary: fall back to composing the processor
        first = f"{type(exc).__name__}: {exc}"
    base = getattr(transformers, cls_name or "", None)
    if base is None:
        raise RuntimeError(f"AutoProcessor failed ({first}) and no processor class is recorded")
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
        image_processor = AutoImageProcessor.from_pretrained(folder, trust_remote_code=trust_remote_code)
    except Exception as exc:  # probe boundary: both errors say why (the first often names a missing package)
        raise RuntimeError(f"AutoProcessor failed ({first}); composing it from its parts failed too: "
                           f"{type(exc).__name__}: {exc}") from exc

    composed = image_only_class(base)
    # transformers 5.x saves each sub-processor's settings inside processor_config.json under its attribute name
    # ("image_processor": {...}); those were loaded above from the same file and must not reach __init__ twice
    slots = set(_sub_processor_slots(base)) | {"video_processor", "image_processor", "tokenizer"}
    extra = {k: v for k, v in kwargs.items() if k not in slots and not _is_sub_processor_entry(v)}
    template = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(template):
        with open(template, encoding="utf-8") as fh:
            extra.setdefault("chat_template", fh.read())
    return (composed(image_processor, tokenizer, **extra), f"{cls_name} composed without a video processor ({first})",
            cls_name, kwargs)


def image_only_class(base):
    """``base`` (a processor class whose __init__ takes a video processor) without one: the family's own __init__
    runs (its token attributes, its kwargs), and its sub-processors reach ProcessorMixin by name.

    The family __init__ hands its sub-processors to ``super().__init__`` positionally, in ITS signature's order
    (Video-LLaVA: image, video, tokenizer; LLaVA-NeXT-Video: video, image, tokenizer), while ProcessorMixin pairs
    positional arguments with the attributes of the class being built, which has no video slot. A shim placed
    just above ProcessorMixin in the MRO names the arguments by the family's order, drops the video
    processor and passes the rest on in the composed class's order, so no family's argument order is assumed."""
    from transformers import ProcessorMixin

    mro = base.__mro__
    family_slots = _sub_processor_slots(mro[mro.index(ProcessorMixin) - 1])  # the class that calls the mixin

    class _DropVideo(ProcessorMixin):
        def __init__(self, *args, **kwargs):
            named = dict(zip(family_slots, args))
            extra = list(args[len(family_slots):])
            named.update({k: kwargs.pop(k) for k in list(kwargs) if k in family_slots})
            named.pop("video_processor", None)
            mine = _sub_processor_slots(type(self))
            super().__init__(*[named.get(k) for k in mine], *extra, **kwargs)

    def __init__(self, image_processor=None, tokenizer=None, **kw):
        base.__init__(self, image_processor=image_processor, tokenizer=tokenizer, video_processor=None, **kw)

    return type(f"ImageOnly{base.__name__}", (base, _DropVideo), {"__init__": __init__, "video_processor": None})


def _sub_processor_slots(cls):
    """The sub-processor parameter names of ``cls.__init__`` in order (transformers 5 ``get_attributes``; 4.x lists
    them in the ``attributes`` class attribute)."""
    if hasattr(cls, "get_attributes"):
        return list(cls.get_attributes())
    return list(getattr(cls, "attributes", ["image_processor", "tokenizer"]))


def _is_sub_processor_entry(value):
    """A nested sub-processor's saved settings (a dict naming its own class), whatever attribute holds it."""
    return isinstance(value, dict) and any(k.endswith(("_processor_type", "processor_class", "tokenizer_class",
                                                          "feature_extractor_type")) for k in value)


def recorded_processor(folder):
    """(processor class, processor_config.json kwargs) as the folder records them."""
    cls_name, kwargs = None, {}
    for name in ("processor_config.json", "preprocessor_config.json"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            cls_name = cls_name or data.get("processor_class")
            if name == "processor_config.json":
                kwargs = {k: v for k, v in data.items() if k != "processor_class"}
    return cls_name, kwargs
