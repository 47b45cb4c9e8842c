"""Probe: the delivered Megatron model on the real framework, on the CPU: the real ``model_provider`` of the
target's ``pretrain_vlm.py`` builds it from the launch's flags and model JSON, the converted checkpoint loads into it,
one batch from the real dataset provider goes through ``get_batch`` and the model (loss and logits), the loss
backpropagates; with ``--source`` the source's own transformers model runs the same batch and the logits are
compared, and the batch's ids and labels are compared with the source's own chat template + processor on the
record the batch came from (``_batch_data_parity``: media expansion, ids, label mask). Runs in the target runtime, in
the target root, single process (world 1, gloo, TP=PP=1).

Without torch_npu, ``--cpu-shim DIR`` loads msmigrate's launch shim (DIR/sitecustomize.py: a CPU torch_npu whose
kernels are CPU references); the kernels the step went through are printed by the shim and collected by the
caller. Imports nothing from msmigrate. Prints one ``MSMIGRATE_PROBE_RESULT {json}`` line.
"""
import argparse
import importlib.util
import json
import os
import runpy
import sys
import time
import traceback
from pathlib import Path

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def load_shim(folder):
    spec = importlib.util.spec_from_file_location("_msmigrate_megatron_cpu_shim", Path(folder) / "sitecustomize.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def load_checkpoint(model, load_dir):
    """Megatron's torch checkpoint layout: <dir>/latest_checkpointed_iteration.txt names 'release' or an iteration;
    <dir>/<release|iter_%07d>/mp_rank_00/model_optim_rng.pt holds {'model': state_dict}."""
    import torch

    load_dir = Path(load_dir)
    tag = (load_dir / "latest_checkpointed_iteration.txt").read_text().strip()
    sub = "release" if tag == "release" else f"iter_{int(tag):07d}"
    path = load_dir / sub / "mp_rank_00" / "model_optim_rng.pt"
    state = torch.load(path, map_location="cpu", weights_only=False)["model"]
    own = model.state_dict()
    missing = sorted(k for k in own if k not in state and not k.endswith("._extra_state"))
    unexpected = sorted(k for k in state if k not in own and not k.endswith("._extra_state"))
    wrong_shape = sorted(k for k in state if k in own and tuple(state[k].shape) != tuple(own[k].shape))
    if not (missing or unexpected or wrong_shape):
        model.load_state_dict(state, strict=False)
    return {"checkpoint": str(path), "tensors": len(state), "missing": missing[:20], "unexpected": unexpected[:20],
            "wrong_shape": wrong_shape[:20], "loaded": not (missing or unexpected or wrong_shape)}


def source_logits(source, batch):
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    cfg = AutoConfig.from_pretrained(source)
    model = AutoModelForImageTextToText.from_pretrained(source, config=cfg, torch_dtype=torch.float32).eval()
    keep = {k: batch[k] for k in ("input_ids", "attention_mask", "pixel_values", "image_grid_thw") if k in batch}
    keep["pixel_values"] = keep["pixel_values"].float() if "pixel_values" in keep else None
    with torch.no_grad():
        return model(**{k: v for k, v in keep.items() if v is not None}).logits.float()


def data_parity(batch, source, root, argv):
    """get_batch's row against the source's own processing of its record (``_batch_data_parity``); a comparison
    that cannot run is recorded with its reason (the caller fails on it), not skipped."""
    if "--mm-data" not in argv[:-1]:
        return {"passed": False, "error": "the launch has no --mm-data: the record the batch came from is unknown"}
    try:
        from _batch_data_parity import batch_data_parity

        return batch_data_parity(batch, source, root, argv[argv.index("--mm-data") + 1])
    except Exception as exc:  # probe boundary: the comparison's failure is data for the gate, the step goes on
        return {"passed": False, "error": f"{type(exc).__name__}: {str(exc)[:400]}",
                "traceback": traceback.format_exc()[-1500:]}


def run(a):
    import torch

    facts = {"stage": "init"}
    t0 = time.time()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(a.port))
    for k, v in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("CUDA_DEVICE_MAX_CONNECTIONS", "1")):
        os.environ.setdefault(k, v)
    # Megatron compiles its dataset helper with `python3 -m pybind11` from PATH: this runtime's
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    root = str(Path(a.target).resolve())
    os.chdir(root)
    sys.path.insert(0, root)
    sys.argv = ["pretrain_vlm.py"] + json.loads(a.flags)
    import mindspeed.megatron_adaptor  # noqa: F401  (first, as pretrain_vlm.py does: its patches precede megatron)

    entry = runpy.run_path(str(Path(root) / "pretrain_vlm.py"), run_name="pretrain_vlm")
    from megatron.training import get_args
    from megatron.training.initialize import initialize_megatron
    from mindspeed_mm.arguments import extra_args_provider_decorator
    from mindspeed_mm.configs.config import merge_mm_args

    initialize_megatron(extra_args_provider=extra_args_provider_decorator(entry["mm_extra_args_provider"]),
                        args_defaults={"dataloader_type": "external"})
    args = get_args()
    merge_mm_args(args)
    facts.update(stage="build", init_seconds=round(time.time() - t0, 1))
    # as the launch builds it: Megatron's get_model calls model_provider and wraps the result (Float16Module for
    # bf16/fp16, then DDP whose grad buffers receive the gradients as main_grad)
    from megatron.core.enums import ModelType
    from megatron.training.training import get_model
    from megatron.training.utils import unwrap_model

    wrapped = get_model(entry["model_provider"], ModelType.encoder_or_decoder)[0]
    model = unwrap_model(wrapped)
    facts.update(model_class=type(model).__name__, parameters=sum(p.numel() for p in model.parameters()),
                 trainable=sum(p.numel() for p in model.parameters() if p.requires_grad),
                 dtypes=sorted({str(p.dtype) for p in model.parameters()}))
    if a.load:
        facts["stage"] = "load"
        facts["load"] = load_checkpoint(model, a.load)
        if not facts["load"]["loaded"]:
            return {"ok": False, **facts}
    facts["stage"] = "data"
    train_iter, _, _ = entry["train_valid_test_datasets_provider"]([1, 0, 0])
    batch = entry["get_batch"](train_iter)
    facts["batch_keys"] = sorted(k for k, v in batch.items() if v is not None)
    facts["input_ids_shape"] = list(batch["input_ids"].shape)
    if a.source:
        facts["stage"] = "data_parity"
        facts["data_parity"] = data_parity(batch, a.source, root, json.loads(a.flags))
    facts["stage"] = "forward"
    out = wrapped(**batch)
    loss = out["loss_dict"]["loss"]
    logits = out["logits"]
    facts.update(loss=float(loss), logits_shape=list(logits.shape), finite=bool(torch.isfinite(logits).all()))
    facts["stage"] = "backward"
    loss.backward()
    grads = [getattr(p, "main_grad", None) if getattr(p, "main_grad", None) is not None else p.grad
             for p in model.parameters() if p.requires_grad]
    facts.update(params_with_grad=sum(g is not None for g in grads),
                 grads_finite=all(bool(torch.isfinite(g).all()) for g in grads if g is not None),
                 grads_nonzero=sum(bool(g is not None and g.abs().sum() > 0) for g in grads))
    if a.source:
        facts["stage"] = "parity"
        ref = source_logits(a.source, batch)
        mine = logits.detach().float()
        if mine.shape != ref.shape and mine.dim() == 3 and mine.transpose(0, 1).shape == ref.shape:
            mine = mine.transpose(0, 1)
        if mine.shape[-1] > ref.shape[-1]:  # a vocabulary padded for TP divisibility
            mine = mine[..., : ref.shape[-1]]
        if mine.shape != ref.shape:
            facts["parity"] = {"error": f"logits {list(mine.shape)} vs the source's {list(ref.shape)}"}
        else:
            keep = batch["attention_mask"].bool() if "attention_mask" in batch else torch.ones(ref.shape[:2], dtype=bool)
            diff = (mine - ref).abs()[keep]
            facts["parity"] = {"max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean()),
                               "ref_abs_max": float(ref.abs().max()), "positions": int(keep.sum()),
                               "argmax_agree": float((mine.argmax(-1) == ref.argmax(-1))[keep].float().mean())}
    facts["stage"] = "done"
    facts["seconds"] = round(time.time() - t0, 1)
    return {"ok": True, **facts}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--flags", required=True, help="JSON list: pretrain_vlm.py's argv after the script name")
    ap.add_argument("--load", help="a Megatron checkpoint folder (latest_checkpointed_iteration.txt)")
    ap.add_argument("--source", help="the source HF folder: its logits on the same batch")
    ap.add_argument("--cpu-shim", help="folder of msmigrate's sitecustomize.py (no torch_npu here)")
    ap.add_argument("--port", type=int, default=29531)
    a = ap.parse_args()
    if a.cpu_shim:
        load_shim(a.cpu_shim)
    try:
        payload = run(a)
    except Exception as exc:  # the probe's boundary: the failure, where, and what was missing, as data
        tb = traceback.format_exc()
        payload = {"ok": False, "exception": type(exc).__name__, "message": str(exc)[:600], "traceback": tb[-3000:],
                   "missing": getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None}
    emit(payload)


if __name__ == "__main__":
    main()
