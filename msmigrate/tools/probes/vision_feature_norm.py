"""Probe (runs in the target runtime): whether the vision tower's LAST entry of ``hidden_states`` — what a LLaVA-style
model reads for ``vision_feature_layer`` -1 — has passed the tower's post norm.

    python vision_feature_norm.py --model <hf folder> [--trust-remote-code]

Which it is depends on the transformers release the source runs under, not on the weights: transformers 4.56–4.57
build every entry of ``hidden_states`` from hooks on the layers and then replace the last one by the tower's
``last_hidden_state`` (the post-normed output), 5.x keeps the raw last layer for CLIP/SigLIP towers. So it is
measured: the tower of the source's vision config is built with random weights (2 layers: only the last entry is
asked about), run on one random image, and its ``hidden_states[-1]`` compared with its ``last_hidden_state`` and with
the output of its last layer (a forward hook).

Result: ``last_entry`` "post_norm" (equals ``last_hidden_state``, which differs from the last layer's output),
"last_layer" (equals the layer's output) or "neither"; ``tower_class``; ``transformers_version``.
Standalone: imports nothing from msmigrate.
"""
import argparse
import json
import sys

MARKER = "MSMIGRATE_PROBE_RESULT "
VISION_KEYS = ("vision_config", "vision_tower_config", "visual")


def emit(payload):
    print(MARKER + json.dumps(payload, default=str), flush=True)


def last_layer_module(tower, depth):
    """The tower's last transformer layer: the last item of the (only) ModuleList as long as the tower is deep."""
    import torch

    lists = [m for m in tower.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == depth]
    return lists[0][-1] if len(lists) == 1 else None


def measure(model, trust_remote_code):
    import torch
    import transformers
    from transformers import AutoConfig, AutoModel

    cfg = AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
    vision = next((getattr(cfg, k) for k in VISION_KEYS if getattr(cfg, k, None) is not None), None)
    if vision is None or isinstance(vision, dict):
        return {"error": f"{type(cfg).__name__} has no vision sub-config object ({', '.join(VISION_KEYS)})"}
    depth_key = next((k for k in ("num_hidden_layers", "depth", "num_layers") if hasattr(vision, k)), None)
    if depth_key is None:
        return {"error": f"{type(vision).__name__} names no layer count"}
    setattr(vision, depth_key, 2)
    torch.manual_seed(0)
    tower = AutoModel.from_config(vision, trust_remote_code=trust_remote_code).eval()
    layer = last_layer_module(tower, 2)
    if layer is None:
        return {"error": f"{type(tower).__name__}: no single list of 2 layers to hook"}
    seen = {}
    layer.register_forward_hook(lambda m, i, o: seen.setdefault("out", o[0] if isinstance(o, tuple) else o))
    size = getattr(vision, "image_size", None)
    size = size if isinstance(size, int) else (size or [224])[0]
    pixels = torch.randn(1, getattr(vision, "num_channels", 3), size, size)
    with torch.no_grad():
        out = tower(pixel_values=pixels, output_hidden_states=True)
    states, last = out.hidden_states, out.last_hidden_state
    if not states or "out" not in seen:
        return {"error": f"{type(tower).__name__} returned no hidden_states / its last layer did not run"}
    entry, raw = states[-1], seen["out"]
    same = lambda a, b: a.shape == b.shape and torch.allclose(a, b, atol=1e-6, rtol=1e-5)  # noqa: E731
    kind = ("last_layer" if same(entry, raw) else "post_norm" if same(entry, last) and not same(last, raw)
            else "neither")
    return {"last_entry": kind, "tower_class": type(tower).__name__, "entries": len(states),
            "transformers_version": transformers.__version__}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--trust-remote-code", action="store_true")
    a = ap.parse_args()
    try:
        emit(measure(a.model, a.trust_remote_code))
    except Exception as exc:  # the probe's boundary: an expected failure goes back as data
        emit({"error": f"{type(exc).__name__}: {str(exc)[:400]}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
