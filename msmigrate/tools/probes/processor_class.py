"""Probe (runs in the target runtime): what ``AutoProcessor.from_pretrained`` really returns for a source folder.

Usage: python processor_class.py <folder> [--trust-remote-code]
Prints one line ``MSMIGRATE_PROBE_RESULT {json}``: the loaded class, its module, what kind of object it is
(``processor`` = a ProcessorMixin, ``tokenizer``, ``image_processor``, ``other``) and which media parts it carries.
The framework's data loading calls AutoProcessor the same way; a folder that declares no processor class gets a bare
tokenizer back, and then nothing in the huggingface dataset can turn images into pixels. A load failure is a fact
too (``loaded: false`` with the error), not a probe failure. Standalone on purpose: it imports nothing from msmigrate.
"""

import json
import sys

MARKER = "MSMIGRATE_PROBE_RESULT "


def emit(payload):
    print(MARKER + json.dumps(payload, default=str), flush=True)


def kind_of(obj):
    from transformers import PreTrainedTokenizerBase, ProcessorMixin

    if isinstance(obj, ProcessorMixin):
        return "processor"
    if isinstance(obj, PreTrainedTokenizerBase):
        return "tokenizer"
    names = [c.__name__ for c in type(obj).__mro__]
    if any(n in ("BaseImageProcessor", "BaseImageProcessorFast", "ImageProcessingMixin") for n in names):
        return "image_processor"
    return "other"


def describe(folder, trust_remote_code):
    import transformers
    from transformers import AutoProcessor

    base = {"folder": folder, "trust_remote_code": trust_remote_code,
            "transformers_version": transformers.__version__}
    try:
        proc = AutoProcessor.from_pretrained(folder, trust_remote_code=trust_remote_code)
    except Exception as exc:  # probe boundary: a folder AutoProcessor cannot load is the fact we report
        return {**base, "loaded": False, "load_error": f"{type(exc).__name__}: {str(exc)[:500]}"}
    kind = kind_of(proc)
    parts = {name: type(getattr(proc, name)).__name__
             for name in ("tokenizer", "image_processor", "video_processor", "feature_extractor")
             if getattr(proc, name, None) is not None}
    return {**base, "loaded": True, "class": type(proc).__name__, "module": type(proc).__module__, "kind": kind,
            "parts": parts, "handles_images": kind == "image_processor" or "image_processor" in parts,
            "handles_video": "video_processor" in parts}


def main():
    args = sys.argv[1:]
    trust = "--trust-remote-code" in args
    rest = [a for a in args if a != "--trust-remote-code"]
    if len(rest) != 1:
        emit({"error": "usage: processor_class.py <folder> [--trust-remote-code]"})
        return 2
    emit(describe(rest[0], trust))
    return 0


if __name__ == "__main__":
    sys.exit(main())
