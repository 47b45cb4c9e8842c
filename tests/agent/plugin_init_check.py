"""Check (runs in a target runtime; imports nothing from msmigrate): a generated model plugin class, built the way
the trainer builds it without ``training.load`` (meta device, the target's ``to_empty_if_needed``, every module's
init flags reset, ``init_weights``, the target's ``retie_embeddings``), against the upstream transformers class
built eagerly from the same config. Uninitialised memory is NaN-filled, so a parameter init skips shows.

    python plugin_init_check.py TARGET_ROOT PLUGIN_MODULE CLASS CONFIG_JSON [fresh|load]

``load``: the resumed-load path instead (``init_weights`` skipped: what splits a tie is then only mended by the
target's re-tie).

Prints one JSON line: {"nonfinite": [names], "tied": {"upstream": bool, "plugin": bool}, "shared": [[name, name it
shares]] (the upstream build's tied parameters), "split": [names the plugin build no longer shares], "custom_code":
bool}.
"""
import importlib
import json
import os
import sys


def main(root, module_name, class_name, config_json, path="fresh"):
    os.environ["NON_MEGATRON"] = "true"
    sys.path.insert(0, root)
    import torch
    import transformers
    from accelerate import init_empty_weights

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    cls = getattr(importlib.import_module(module_name), class_name)
    upstream = getattr(transformers, class_name)
    with open(config_json, encoding="utf-8") as fh:
        raw = json.load(fh)
    config = transformers.AutoConfig.for_model(**raw)
    eager = upstream(config)

    def shared(m):  # every parameter held under a second name: (second name, first name)
        first, pairs = {}, []
        for name, param in m.named_parameters(remove_duplicate=False):
            pairs += [[name, first[id(param)]]] if id(param) in first else []
            first.setdefault(id(param), name)
        return pairs

    with init_empty_weights():
        model = cls._from_config(config).float()
    from mindspeed_mm.fsdp.checkpoint.utils import retie_embeddings
    from mindspeed_mm.fsdp.utils.utils import to_empty_if_needed

    to_empty_if_needed(model, device="cpu")
    if path == "fresh":
        for module in model.modules():
            module._is_initialized = False
            module._is_hf_initialized = False
        model.init_weights()
    retie_embeddings(model)

    def tied(m):  # None where the model names no output embeddings (BLIP's head is its text decoder's)
        inp, out = m.get_input_embeddings(), m.get_output_embeddings()
        return None if inp is None or out is None else inp.weight is out.weight

    params = dict(model.named_parameters(remove_duplicate=False))
    with torch.no_grad():
        bad = [n for n, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    print(json.dumps({"nonfinite": bad, "tied": {"upstream": tied(eager), "plugin": tied(model)},
                      "shared": shared(eager), "split": [a for a, b in shared(eager) if params[a] is not params[b]],
                      "custom_code": bool(getattr(cls, "is_custom_code", lambda: False)())}))


if __name__ == "__main__":
    main(*sys.argv[1:6])
