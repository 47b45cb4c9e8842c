"""Probe (Megatron route, static gate): a vision encoder and a vision projector, each built by its model_id from the
target's registries, run once in a chain on random images: images -> encoder -> projector.

    python megatron_projector_forward.py --target ROOT --registry MODULE:NAME --model-id ID --fields JSON
        --encoder-registry MODULE:NAME --encoder-specs MODULE:NAME --encoder-model-id ID --encoder-fields JSON
        --images N --image-size PX

Runs in the target runtime, target root first on sys.path; imports nothing from msmigrate. Reports the encoder's
and the projector's output shapes, or the exception (a missing module is named: torch_npu / megatron mean the
accelerator environment).
"""
import argparse

try:  # run as a script in the target runtime: the sibling module is on sys.path
    from _megatron_component import build_component, build_failure, build_projector, emit, enter_target
except ModuleNotFoundError:  # imported from msmigrate
    from msmigrate.tools.megatron.probes._megatron_component import (build_component, build_failure, build_projector, emit,
                                                            enter_target)


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--target", "--registry", "--model-id", "--fields", "--encoder-registry", "--encoder-specs",
                 "--encoder-model-id", "--encoder-fields"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--images", type=int, default=2)
    ap.add_argument("--image-size", type=int, required=True)
    a = ap.parse_args()
    enter_target(a.target)
    try:
        import torch

        torch.manual_seed(0)
        _, ecfg, enc = build_component(a.encoder_registry, a.encoder_specs, a.encoder_model_id, a.encoder_fields)
        cls, _, proj = build_projector(a.registry, a.model_id, a.fields)
        with torch.no_grad():
            feats = enc.eval()(torch.randn(a.images, ecfg.in_channels, a.image_size, a.image_size))
            out = proj.eval()(feats)
    except Exception as exc:  # probe boundary: building target code may raise anything (missing module, bad config)
        emit(build_failure(exc))
        return
    emit({"ok": True, "class": cls.__name__, "encoder_output_shape": list(feats.shape),
          "output_shape": list(out.shape), "finite": bool(torch.isfinite(out).all())})


if __name__ == "__main__":
    main()
