"""Check (runs in a target runtime; imports nothing from msmigrate): after the trainer's meta-device path, does a
model plugin class hold the same buffers as an eager build of the same class? The build is ModelHub's (accelerate's
``init_empty_weights``: parameters on meta, buffers computed for real); the storage call is the target's own
``to_empty_if_needed`` (mode ``framework``) or a plain ``Module.to_empty`` (mode ``plain_to_empty``, which the
framework never calls: it empties buffers too, so the check can be seen to fail). Uninitialised memory is filled
(NaN / max int), so a buffer nobody rebuilds shows.

    python plugin_buffers_check.py TARGET_ROOT PLUGIN_MODULE CLASS SOURCE_DIR [MODE]

Prints one JSON line: {"transformers": version, "builds": {build: {buffer: "equal" | "differs" | "missing"}}}.
"""
import importlib
import json
import os
import sys


def main(root, module_name, class_name, source, mode="framework"):
    os.environ["NON_MEGATRON"] = "true"
    sys.path.insert(0, root)
    import torch
    import torch._dynamo  # noqa: F401  (torch 2.7: a meta-device build can hit a half-imported _dynamo otherwise)
    import transformers
    from accelerate import init_empty_weights

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    cls = getattr(importlib.import_module(module_name), class_name)
    config = transformers.AutoConfig.from_pretrained(source)
    reference = dict(cls._from_config(config).float().named_buffers())
    with init_empty_weights():
        model = cls._from_config(config).float()
    for module in model.modules():  # as ModelHub does, so a later init_weights does not skip them
        if getattr(module, "_is_hf_initialized", False):
            module._is_hf_initialized = False
    if mode == "framework":
        from mindspeed_mm.fsdp.utils.utils import to_empty_if_needed

        to_empty_if_needed(model, device="cpu")
    else:
        model.to_empty(device="cpu")
    got = dict(model.named_buffers())
    builds = {mode: {name: ("missing" if name not in got else "equal" if torch.equal(got[name], ref) else "differs")
                     for name, ref in reference.items()}}
    print(json.dumps({"transformers": transformers.__version__, "builds": builds}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
