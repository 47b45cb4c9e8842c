"""Probe (runs in the target runtime): the forward signature of a transformers-native model class.

Usage: python forward_signature.py <ClassName>
Prints one line ``MSMIGRATE_PROBE_RESULT {json}`` with the parameters of ``ClassName.forward`` and where it is defined.
Standalone on purpose: it imports nothing from msmigrate.
"""

import inspect
import json
import sys

MARKER = "MSMIGRATE_PROBE_RESULT "


def emit(payload):
    print(MARKER + json.dumps(payload, default=str), flush=True)


def describe(cls_name):
    import transformers

    cls = getattr(transformers, cls_name, None)
    if cls is None:
        return {"error": f"transformers {transformers.__version__} has no class {cls_name!r}", "class": cls_name}
    fwd = cls.forward
    sig = inspect.signature(fwd)
    params = []
    for p in sig.parameters.values():
        params.append({
            "name": p.name,
            "kind": p.kind.name,
            "default": None if p.default is inspect.Parameter.empty else repr(p.default),
            "annotation": None if p.annotation is inspect.Parameter.empty else str(p.annotation),
        })
    owner = fwd.__qualname__.split(".")[0]
    return {
        "class": cls_name,
        "module": cls.__module__,
        "defined_in": owner,
        "signature": f"forward{sig}",
        "parameters": params,
        "accepts_var_kwargs": any(p["kind"] == "VAR_KEYWORD" for p in params),
        "transformers_version": transformers.__version__,
    }


def main():
    if len(sys.argv) != 2:
        emit({"error": "usage: forward_signature.py <ClassName>"})
        return 2
    result = describe(sys.argv[1])
    emit(result)
    return 1 if result.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
