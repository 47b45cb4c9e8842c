"""Probe (gate G4, HF weights out): the gate run's saved checkpoint exported to a Hugging Face folder, loaded into the
SOURCE class, and compared with the trained model as the target holds it. Runs in the target runtime; imports nothing
from msmigrate.

    python hf_export.py --model <source folder> --target <root> --plugin <entry> ... --model-id <id>
                        --model-name-or-path <source folder> --checkpoint <save dir> --out <hf dir> --config <yaml>

1. The checkpoint: the newest DCP folder under ``--checkpoint`` (one holding ``.metadata``), its ``model`` entries
   only (the optimizer state stays on disk).
2. The export. Where the target ships a DCP → HF converter for this model id (the framework's own
   ``mindspeed_mm.fsdp.tasks.checkpoint.converter.dcp_to_hf`` with a weight transform registered in
   ``mindspeed_mm.fsdp.checkpoint.convert.WEIGHT_TRANSFORM_PIPELINES``), that converter runs. Otherwise the
   product's: the model entries written as safetensors (``huggingface_hub.save_torch_state_dict``: size-capped shards
   and an index, shared tensors once), next to every non-weight file of the source folder (config, tokenizer,
   processor, chat template, remote code) — what a user needs to serve the weights with the source's own class.
3. Exactness: every exported tensor equals the checkpoint's, bit for bit (``torch.equal``), and none is missing.
4. Logits: the source class ``from_pretrained(<export>)`` against the plugin class holding the checkpoint's weights
   (the trained target model), on the target pipeline's first micro batch, fp32 CPU, eval mode: max |Δlogit| ≤ 1e-4
   and |Δloss| ≤ 1e-5 — G1's model-parity tolerances (the two classes may sum in another order; identical weights
   leave ~1e-6).
"""
import os
import shutil
import sys
import time

from _model_build import add_source_args, emit, forward_params

LOGIT_ATOL = 1e-4
LOSS_ATOL = 1e-5
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".msgpack", ".h5")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def parse(argv):
    import argparse

    ap = argparse.ArgumentParser()
    add_source_args(ap)
    ap.add_argument("--checkpoint", required=True, help="the gate launch's training.save folder")
    ap.add_argument("--out", required=True, help="where the HF folder is written")
    ap.add_argument("--config", required=True, help="the delivered training YAML (the batch to compare on)")
    ap.add_argument("--media-token-id", type=int)
    return ap.parse_args(argv)


def newest_dcp(root):
    """The newest folder under ``root`` (itself included) holding a DCP ``.metadata``."""
    found = [d for d, _, files in os.walk(root) if ".metadata" in files]
    if not found:
        raise FileNotFoundError(f"no DCP checkpoint (.metadata) under {root}")
    return max(found, key=lambda d: (os.path.getmtime(os.path.join(d, ".metadata")), d))


def model_entries(dcp_dir):
    """{name: tensor} of the checkpoint's ``model`` state, read without a process group."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    meta = FileSystemReader(dcp_dir).read_metadata()
    state = {k[len("model."):]: torch.empty(m.size, dtype=m.properties.dtype)
             for k, m in meta.state_dict_metadata.items()
             if k.startswith("model.") and isinstance(m, TensorStorageMetadata)}
    if not state:
        raise KeyError(f"the checkpoint {dcp_dir} holds no model entries")
    dcp.load({"model": state}, checkpoint_id=dcp_dir, no_dist=True)
    return state


def framework_converter(model_id):
    """The target's own DCP → HF converter for this model id, or None."""
    try:
        from mindspeed_mm.fsdp.checkpoint import convert
        from mindspeed_mm.fsdp.tasks.checkpoint import converter
    except ImportError:
        return None
    if model_id in (getattr(convert, "WEIGHT_TRANSFORM_PIPELINES", None) or {}) and hasattr(converter, "dcp_to_hf"):
        return converter.dcp_to_hf
    return None


def product_export(state, source_dir, out):
    """The model entries as safetensors shards + the source folder's non-weight files."""
    from huggingface_hub import save_torch_state_dict

    os.makedirs(out, exist_ok=True)
    for name in os.listdir(source_dir):
        path = os.path.join(source_dir, name)
        if os.path.isfile(path) and not name.endswith(WEIGHT_SUFFIXES) and name not in WEIGHT_INDEXES:
            shutil.copy2(path, os.path.join(out, name))
    save_torch_state_dict({k: v.contiguous() for k, v in state.items()}, out)


def exported_tensors(out):
    from safetensors import safe_open

    tensors = {}
    for name in sorted(os.listdir(out)):
        if name.endswith(".safetensors"):
            with safe_open(os.path.join(out, name), framework="pt") as fh:
                for key in fh.keys():
                    tensors[key] = fh.get_tensor(key)
    return tensors


def compare_tensors(state, exported):
    import torch

    missing = [k for k in state if k not in exported]
    differ = [k for k in state if k in exported and not (exported[k].shape == state[k].shape
                                                         and torch.equal(exported[k], state[k]))]
    return missing, differ


def logits_and_loss(model, batch):
    """The model's logits and loss on the batch, fed only what its forward names (a custom forward may take no
    labels and no ``use_cache``) and read from whatever it returns (an output object or dict, a tuple, a tensor)."""
    import torch

    params, takes_kwargs = forward_params(type(model))
    feed = {k: v for k, v in batch.items() if takes_kwargs or k in params}
    if takes_kwargs or "use_cache" in params:
        feed["use_cache"] = False
    with torch.no_grad():
        out = model(**feed)
    if isinstance(out, dict):  # a ModelOutput is one too
        logits, loss = out.get("logits"), out.get("loss")
    elif isinstance(out, (tuple, list)):
        logits, loss = out[0], None
    else:
        logits, loss = out, None
    return logits.float(), float(loss) if loss is not None else None


def main(argv):
    args = parse(argv)
    # both classes eager, like with like: a remote-code source may have no SDPA path, and the comparison is of the
    # weights, not of the attention kernels
    args.attn_implementation = "eager"
    start = time.monotonic()
    target = os.path.abspath(args.target)
    os.environ.setdefault("NON_MEGATRON", "true")
    os.chdir(target)
    sys.path.insert(0, target)
    try:
        import torch
        from data_check import load_pipeline
        from model_parity import caller_set_media_ids, plugin_class, source_class
        from _meta_init import build, persistent_keys, restore_computed_buffers
        from training_parity import micro_batches

        src_cls, _ = source_class(args)
        plg_cls, plg_cfg = plugin_class(args)
        dcp_dir = newest_dcp(os.path.abspath(args.checkpoint))
        state = {k: v for k, v in model_entries(dcp_dir).items()}
        own = framework_converter(args.model_id)
        out = os.path.abspath(args.out)
        if own is not None:
            own(model_id=args.model_id, dcp_dir=dcp_dir, hf_dir=out, origin_hf_dir=os.path.abspath(args.model))
            converter = f"framework: {own.__module__}.dcp_to_hf (model id {args.model_id})"
        else:
            product_export(state, os.path.abspath(args.model), out)
            converter = ("product: the checkpoint's model entries as safetensors + the source's non-weight files "
                         "(the target has no DCP → HF converter for this model id)")
        exported = exported_tensors(out)
        missing, differ = compare_tensors(state, exported)
        # the trained target model: the plugin class holding the checkpoint's weights
        torch.manual_seed(0)
        plugin = build(plg_cls, plg_cfg)
        _, unexpected = plugin.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
        if unexpected:
            raise KeyError(f"the checkpoint holds tensors the plugin class has not: {list(unexpected)[:5]}")
        source = src_cls.from_pretrained(out, torch_dtype=torch.float32, trust_remote_code=args.trust_remote_code,
                                         attn_implementation=args.attn_implementation)
        restored = restore_computed_buffers(source, src_cls, build, persistent_keys)
        cfg, dataset, collate_fn = load_pipeline(args.config)
        batch = micro_batches(cfg, dataset, collate_fn, plugin, 1)[0]
        logits = {}
        for name, model in (("source", source), ("target", plugin)):
            model.float().eval()
            caller_set_media_ids(model, args.media_token_id)
            logits[name] = logits_and_loss(model, batch)
    except Exception as exc:  # probe boundary: the failure is the result
        import traceback

        traceback.print_exc()
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    (s_logits, s_loss), (t_logits, t_loss) = logits["source"], logits["target"]
    problems = []
    if missing or differ:
        problems.append(f"the export is not the checkpoint: {len(missing)} tensors missing (e.g. {missing[:3]}), "
                        f"{len(differ)} differ (e.g. {differ[:3]})")
    dlogit = float((s_logits - t_logits).abs().max()) if s_logits.shape == t_logits.shape else None
    if dlogit is None or not dlogit <= LOGIT_ATOL:
        problems.append(f"the source class on the exported folder gives other logits than the trained target model "
                        f"(max |Δlogit| {dlogit}, tol {LOGIT_ATOL:g}; shapes {list(s_logits.shape)} vs "
                        f"{list(t_logits.shape)})"
                        + ("; every tensor is in the export bit-exact, so names and weights match: the two classes "
                           "compute differently on the same weights (a forward the plugin overrides, a buffer it "
                           "computes otherwise, media ids it places otherwise)" if not missing and not differ else ""))
    dloss = abs(s_loss - t_loss) if s_loss is not None and t_loss is not None else None
    if dloss is not None and not dloss <= LOSS_ATOL:
        problems.append(f"loss {s_loss:.7g} (source class, exported weights) vs {t_loss:.7g} (trained target)")
    notes = []
    if restored:
        notes.append(f"the source class's from_pretrained left {len(restored)} computed buffer(s) other than its own "
                     f"__init__ computes them (e.g. {restored[:3]}): this transformers builds on the meta device and "
                     f"the source's code does not re-initialise them, so serving the export (or the source) with "
                     f"this transformers version gives other outputs; compared here with the buffers recomputed")
    emit({"checkpoint": dcp_dir, "export_dir": out, "converter": converter,
          "files": sorted(os.listdir(out)), "tensors": len(state), "exported_tensors": len(exported),
          "missing": missing[:10], "differ": differ[:10], "exact": not missing and not differ,
          "max_abs_dlogit": dlogit, "source_loss": s_loss, "target_loss": t_loss, "dloss": dloss,
          "tolerance": {"logit_atol": LOGIT_ATOL, "loss_atol": LOSS_ATOL, "tensors": "bit-exact"},
          "source_class": f"{src_cls.__module__}.{src_cls.__qualname__}",
          "plugin_class": f"{plg_cls.__module__}.{plg_cls.__qualname__}",
          "passed": not problems, "problems": problems, "notes": notes,
          "restored_buffers": restored[:20], "seconds": round(time.monotonic() - start, 2)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
