"""Probe (Megatron route, static gate): the source's HF projector tensors -> the state_dict of a vision projector
registered by model_id -> HF, with the converted state_dict loaded strictly into the class.

    python megatron_projector_converter.py --target ROOT --registry MODULE:NAME --model-id ID --fields JSON
        --layout JSON --root HF_PREFIX --source HF_DIR --out DIR

Runs in the target runtime, target root first on sys.path; imports nothing from msmigrate. The layout
({class tensor: {"hf": name, "op": "copy" | "transpose"}}) comes from the projector design (the source's parts in
forward order against the written class's modules); here it is checked against the built class: every class
tensor filled, every shape equal, a strict load into a fresh instance, every mapped HF tensor back bit-identical.
HF tensors under the projector's root that the layout leaves out are listed as unmapped. The mapping is written
to ``DIR/projector_mapping.json``.
"""
import argparse
import json
from pathlib import Path

try:  # run as a script in the target runtime: the sibling module is on sys.path
    from _megatron_component import build_failure, build_projector, emit, enter_target, load_strict, not_identical
except ModuleNotFoundError:  # imported from msmigrate
    from msmigrate.tools.megatron.probes._megatron_component import (build_failure, build_projector, emit, enter_target,
                                                            load_strict, not_identical)


def to_megatron(hf, layout):
    return {k: (hf[m["hf"]].t() if m["op"] == "transpose" else hf[m["hf"]]).contiguous().clone()
            for k, m in layout.items()}


def to_hf(mm, layout):
    return {m["hf"]: (mm[k].t() if m["op"] == "transpose" else mm[k]).contiguous().clone() for k, m in layout.items()}


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--target", "--registry", "--model-id", "--fields", "--layout", "--root", "--source", "--out"):
        ap.add_argument(flag, required=True)
    a = ap.parse_args()
    enter_target(a.target)
    try:
        from safetensors.torch import load_file

        cls, _, proj = build_projector(a.registry, a.model_id, a.fields)
    except Exception as exc:  # probe boundary: building target code may raise anything (missing module, bad config)
        emit(build_failure(exc))
        return
    hf = {}
    for f in sorted(Path(a.source).glob("*.safetensors")):
        hf.update(load_file(str(f)))
    layout = json.loads(a.layout)
    sd = proj.state_dict()
    problems = [f"{k}: the class has no such tensor" for k in layout if k not in sd]
    problems += [f"{m['hf']}: not in the source" for m in layout.values() if m["hf"] not in hf]
    unfilled = [k for k in sd if k not in layout]
    if problems:
        emit({"ok": False, "problems": problems, "unfilled_megatron": unfilled})
        return
    mm = to_megatron(hf, layout)
    problems += [f"{k}: converted {list(mm[k].shape)}, class {list(sd[k].shape)}" for k in mm
                 if list(mm[k].shape) != list(sd[k].shape)]
    strict = "not tried: the shapes differ"
    if not problems:
        loaded, strict = load_strict(build_projector(a.registry, a.model_id, a.fields)[2], mm, cls.__name__)
        problems += loaded
    back = to_hf(mm, layout)
    differ = not_identical(back, hf)
    problems += [f"{h}: HF -> Megatron -> HF not identical" for h in differ]
    under = sorted(n for n in hf if n.startswith(a.root + "."))
    unmapped = [n for n in under if n not in back]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "projector_mapping.json").write_text(json.dumps({"layout": layout, "unmapped_hf": unmapped,
                                                            "unfilled_megatron": unfilled}, indent=1))
    emit({"ok": not problems and not unfilled, "class": cls.__name__, "problems": problems,
          "hf_projector_tensors": len(under), "mapped_hf": len(back), "megatron_tensors": len(sd),
          "unmapped_hf": unmapped, "unfilled_megatron": unfilled, "round_trip_identical": len(back) - len(differ),
          "strict_load": strict is None, "ops": sorted({m["op"] for m in layout.values()}),
          "mapping_file": str(out / "projector_mapping.json")})


if __name__ == "__main__":
    main()
