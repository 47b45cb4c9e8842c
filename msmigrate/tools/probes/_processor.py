"""Shared by the probes that call a source's own processor (runs in the target runtime; imports nothing from
msmigrate): load it the way the trainer would, or compose it where this runtime cannot load all of it."""
import json
import os


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
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
    image_processor = AutoImageProcessor.from_pretrained(folder, trust_remote_code=trust_remote_code)

    def __init__(self, image_processor=None, tokenizer=None, **kw):
        base.__init__(self, image_processor, tokenizer, None, **kw)

    composed = type(f"ImageOnly{cls_name}", (base,), {"__init__": __init__, "video_processor": None})
    extra = dict(kwargs)
    template = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(template):
        with open(template, encoding="utf-8") as fh:
            extra.setdefault("chat_template", fh.read())
    return (composed(image_processor, tokenizer, **extra), f"{cls_name} composed without a video processor ({first})",
            cls_name, kwargs)


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
