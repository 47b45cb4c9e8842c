"""Probe (Megatron route, static gate): does a vision encoder registered by model_id build from its model-JSON
fields and run one forward on random images in this runtime?

    python megatron_component_forward.py --target ROOT --registry MODULE:NAME --specs MODULE:NAME
        --model-id ID --fields JSON --images N --image-size PX

Runs in the target runtime, target root first on sys.path; imports nothing from msmigrate. The class is looked up
the way the framework does (``REGISTRY[model_id]``), its layer spec from the spec table (``SPECS[model_id]``), the
config is the JSON fields as attributes. Reports the output shape and the parameter names outside the blocks, or
the exception (a missing module is named: torch_npu / megatron mean the accelerator environment).
"""
import argparse
import sys

try:  # run as a script in the target runtime: the sibling module is on sys.path
    from _megatron_component import build_component, build_failure, emit, enter_target
except ModuleNotFoundError:  # imported from msmigrate (the unit tests of its pure helpers)
    from msmigrate.tools.megatron.probes._megatron_component import build_component, build_failure, emit, enter_target


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--specs", required=True)
    ap.add_argument("--model-id", required=True)
    ap.add_argument("--fields", required=True)
    ap.add_argument("--images", type=int, default=2)
    ap.add_argument("--image-size", type=int, required=True)
    a = ap.parse_args()
    enter_target(a.target)
    try:
        import torch

        torch.manual_seed(0)
        cls, cfg, enc = build_component(a.registry, a.specs, a.model_id, a.fields)
        enc = enc.eval()
        with torch.no_grad():
            out = enc(torch.randn(a.images, cfg.in_channels, a.image_size, a.image_size))
    except Exception as exc:  # probe boundary: building target code may raise anything (missing module, bad config)
        emit(build_failure(exc))
        return
    emit({"ok": True, "class": cls.__name__, "output_shape": list(out.shape), "finite": bool(torch.isfinite(out).all()),
          "parameters": sorted(n for n, _ in enc.named_parameters()), "python": sys.version.split()[0]})


if __name__ == "__main__":
    main()
