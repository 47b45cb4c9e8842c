"""Probe (gate G2): real samples → dataset → template + mm_plugin → collator → one batch, the way the trainer does it.

    python data_check.py --target <root> --config <yaml> [--batch-out <file.pt>] [--samples 2]

Runs in the target runtime with NON_MEGATRON=true and the target root as cwd/sys.path; uses only the framework's
public entry points (ConfigManager, import_plugin, build_mm_dataset, resolve_data_collator), so it works on the
real MindSpeed-MM as on the stand-in. Result: ``num_samples``, ``example_keys``, ``batch_keys`` with shapes and
dtypes, ``media`` (referenced / missing files), ``sample`` (first row decoded, trained span between ⟦ ⟧, token and
trained-token counts, media placeholder runs with their lengths), ``forward_receives``, ``batch_file`` (the collated batch, for a forward on real data); with
``--parity-source``/``--parity-data`` also ``parity``: the mapped samples against the source's own chat template and
processor (``_data_parity``); ``redraw``: the drawn samples read again after their collation, which must not have
changed them (``_redraw``: the trainer draws every sample again in the next epoch).
Starts a 1-rank gloo group and the target's parallel state first (``_single_rank``). Imports nothing from msmigrate."""
import argparse
import json
import logging
import os
import sys

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def describe(value):
    import torch

    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
    if isinstance(value, list):
        return {"list": len(value)}
    return {"type": type(value).__name__}


IGNORE = -100
SAMPLE_CHARS = 1500


def _runs(values):
    """Consecutive runs of equal values: [(value, start, end)]."""
    out, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            out.append((values[start], start, i))
            start = i
    return out


def sample_view(decode, input_ids, labels, attention_mask=None):
    """One collated row made readable: the decoded text with the trained span (labels != -100 after position 0)
    between ⟦ and ⟧, long runs of one token (media placeholders after expansion) shown once with their count, and
    the counts."""
    ids = [int(x) for x in input_ids]
    lab = [int(x) for x in labels] if labels is not None else [IGNORE] * len(ids)
    mask = [int(x) for x in attention_mask] if attention_mask is not None else [1] * len(ids)
    real = [i for i, m in enumerate(mask) if m]
    ids, lab = [ids[i] for i in real], [lab[i] for i in real]
    if lab:  # the loss shifts labels: label 0 trains nothing (an efficient-eos template puts the closing eos there)
        lab[0] = IGNORE
    trained = [lab_i != IGNORE for lab_i in lab]
    parts, repeated = [], {}
    for flag, start, end in _runs(trained):
        chunk = []
        for tok, a, b in _runs(ids[start:end]):
            if b - a > 4:  # an expanded media placeholder: once, with its count
                text = decode([tok])
                repeated[text] = repeated.get(text, 0) + (b - a)
                chunk.append(f"{text}×{b - a}")
            else:
                chunk.append(decode(ids[start + a:start + b]))
        text = "".join(chunk)
        parts.append(f"⟦{text}⟧" if flag else text)
    decoded = "".join(parts)
    if len(decoded) > SAMPLE_CHARS:
        decoded = decoded[:SAMPLE_CHARS] + f" …[{len(decoded) - SAMPLE_CHARS} chars cut]"
    return {"decoded": decoded, "tokens": len(ids), "trained_tokens": sum(trained),
            "trained_spans": sum(1 for flag, _, _ in _runs(trained) if flag), "repeated_tokens": repeated,
            "labels_match_inputs": all(l == i for l, i in zip(lab, ids) if l != IGNORE)}


def _preprocess_args(dataset_param):
    pre = getattr(dataset_param, "preprocess_parameters", None)
    if hasattr(pre, "to_dict"):
        return pre.to_dict()
    return dict(pre) if isinstance(pre, dict) else dict(vars(pre)) if pre is not None else {}


def decode_any(tok, ids):
    """Decode ids with the tokenizer, writing an id it has no token for as ``⟨id N⟩``: some families mark media
    positions with negative ids (a sample's first image is -1) that the model reads and the tokenizer cannot."""
    size = len(tok)
    parts, run = [], []
    for i in ids:
        if 0 <= i < size:
            run.append(i)
            continue
        if run:
            parts.append(tok.decode(run, skip_special_tokens=False))
            run = []
        parts.append(f"⟨id {i}⟩")
    if run:
        parts.append(tok.decode(run, skip_special_tokens=False))
    return "".join(parts)


def decoded_sample(dataset_param, batch):
    """The first row of the batch, decoded with the processor folder's tokenizer; an error line when it cannot be
    loaded (the batch itself was built, so that is not the probe's failure)."""
    if "input_ids" not in batch:
        return {"error": "the batch has no input_ids"}
    pre = _preprocess_args(dataset_param)
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(pre["model_name_or_path"],
                                            trust_remote_code=bool(pre.get("trust_remote_code")))
    except (KeyError, OSError, ValueError) as exc:
        return {"error": f"tokenizer not loadable for decoding: {type(exc).__name__}: {exc}"[:300]}
    mask = batch.get("attention_mask")
    return sample_view(lambda ids: decode_any(tok, ids), batch["input_ids"][0].tolist(),
                       batch["labels"][0].tolist() if "labels" in batch else None,
                       mask[0].tolist() if mask is not None and getattr(mask, "dim", lambda: 0)() == 2 else None)


def load_pipeline(config):
    """(parsed config, mapped dataset, collate_fn) through the framework's own entry points, as the trainer builds
    them. Expects cwd = target, the target on sys.path and the single-rank setup done (shared with
    ``sharded_reference``)."""
    from mindspeed_mm.config.config_manager import ConfigManager
    from mindspeed_mm.fsdp.params.argument import Arguments
    from mindspeed_mm.fsdp.utils.register import import_plugin

    sys.argv = ["trainer.py", os.path.abspath(config)]
    cfg = ConfigManager(config_class=Arguments).load_and_parse()
    basic = getattr(cfg.data.dataset_param, "basic_parameters", None)
    if getattr(basic, "preprocessing_num_workers", None):
        # the probe checks the mapping, not its throughput: forked map workers take minutes on a small CPU host
        basic.preprocessing_num_workers = None
    import_plugin(cfg.training.plugin)
    from mindspeed_mm.fsdp.data import build_mm_dataset
    from mindspeed_mm.fsdp.data.dataloader.data_collator import resolve_data_collator

    dataset_param = cfg.data.dataset_param
    dataset = build_mm_dataset(dataset_param)
    if isinstance(dataset, (tuple, list)) and len(dataset) == 2 and hasattr(dataset[0], "__getitem__"):
        dataset = dataset[0]
    collate_fn = getattr(dataset, "collate_fn", None)
    if not callable(collate_fn):
        collate_param = cfg.data.dataloader_param.collate_param
        collate_param = collate_param.to_dict() if hasattr(collate_param, "to_dict") else dict(collate_param or {})
        cls, kwargs = resolve_data_collator(collate_param, dataset_param)
        collate_fn = cls(dataset_param=dataset_param, model=None, **kwargs)
    return cfg, dataset, collate_fn


class TargetWarnings(logging.Handler):
    """The warnings the target logs while the probe runs its pipeline. The real ``load_tokenizer`` turns an
    AutoProcessor failure into a warning ("Processor was not found: <cause>") and later raises a generic error, so
    the cause is only here; it goes into the probe's error."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        try:
            self.messages.append(f"{record.name.rsplit('/', 1)[-1]}: {record.getMessage()}"[:400])
        except (TypeError, ValueError):  # a record whose arguments do not format is not worth failing over
            pass

    def cause_of(self, error):
        return error + (" — the target logged before it: " + " | ".join(self.messages[-3:]) if self.messages else "")


def loadable(value):
    """A batch value the saved batch can carry for a ``weights_only`` load: tensors, numbers, strings and lists /
    tuples / dicts of them (per-image tensor lists, bounds, sizes); not arbitrary objects (a PIL image)."""
    import torch

    if isinstance(value, (torch.Tensor, int, float, bool, str)) or value is None:
        return True
    if isinstance(value, (list, tuple)):
        return all(loadable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and loadable(v) for k, v in value.items())
    return False


def pixel_bounds(dataset_param):
    """The data path's image pixel bounds from the config's preprocess_parameters (the framework's loader sets them
    on the processor, where its mm_plugin reads them)."""
    pre = getattr(dataset_param, "preprocess_parameters", None)
    return {k: getattr(pre, k) for k in ("image_max_pixels", "image_min_pixels")
            if isinstance(getattr(pre, k, None), int)}


def with_batch_parity(parity, examples, batch, collate_fn, args, own, bounds=None):
    """``parity`` with the collated batch's checks added (``_batch_parity``): the rows against the mapped examples
    (always), the media tensors against the source processor's (the chat-template oracle: ``own`` is the source's
    own pipeline, whose batch is compared by the model parity instead)."""
    from _batch_parity import collation_parity, media_input_parity

    media_id = args.media_token_id if args.media_token_id is not None else parity.get("media_token_id")
    extra = {"collation": collation_parity(examples, batch, collate_fn, media_id)}
    if not own:
        try:
            extra["media_inputs"] = media_input_parity(args.parity_source, args.parity_data, examples, collate_fn,
                                                       args.trust_remote_code, bounds)
        except Exception as exc:  # probe boundary: a source processor that cannot take the images is reported
            extra["media_inputs"] = {"error": f"{type(exc).__name__}: {exc}", "problems": []}
    found = [p for part in extra.values() for p in ((part or {}).get("problems") or [])]
    problems = list(parity.get("problems") or []) + found
    return {**parity, "batch": extra, "problems": problems, "passed": bool(parity.get("passed")) and not found}


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch-out")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--parity-source", help="source HF folder: compare the mapped samples with its own processor")
    ap.add_argument("--parity-data", help="the raw ShareGPT samples the dataset maps (same order)")
    ap.add_argument("--media-token-id", type=int, help="the media token id the source processor expands into")
    ap.add_argument("--trust-remote-code", action="store_true")
    ap.add_argument("--source-training", help="JSON facts of the source's own training code (training_facts): its "
                                              "dataset + collator are the data oracle instead of its chat template")
    args = ap.parse_args(argv)
    target = os.path.abspath(args.target)
    os.environ.setdefault("NON_MEGATRON", "true")
    os.chdir(target)
    sys.path.insert(0, target)
    warned = TargetWarnings()
    logging.getLogger().addHandler(warned)
    try:
        import torch
        from _single_rank import start_single_rank

        setup = start_single_rank()  # the real huggingface dataset needs a process group (main_process_first)
        cfg, dataset, collate_fn = load_pipeline(args.config)
        dataset_param = cfg.data.dataset_param
        n = len(dataset)
        if n == 0:
            emit({"error": "the dataset is empty after mapping (all samples dropped?)", "num_samples": 0})
            return 1
        from _batch_parity import defined_at
        from _redraw import redraw_check

        # collated as the trainer does (the dataset's own objects); the checks below read the samples as they were
        # before the collation: the real collator pops their media
        batch, examples, redraw = redraw_check(dataset, list(range(min(args.samples, n))), collate_fn, defined_at)
        media, missing = [], []
        for ex in examples:
            for kind in ("images", "videos", "audios"):
                for path in ex.get(kind) or []:
                    if isinstance(path, str):
                        media.append(path)
                        if not os.path.exists(path):
                            missing.append(path)
        batch_file = None
        if args.batch_out:
            # list-valued keys too (per-image tensors, bounds, sizes): the forward the gate runs on this batch must
            # get what the plugin gets in training, or a plugin's image path never runs in any gate
            torch.save({k: v for k, v in batch.items() if loadable(v)}, args.batch_out)
            batch_file = os.path.abspath(args.batch_out)
        parity = None
        facts = None
        if args.source_training:
            with open(args.source_training, encoding="utf-8") as fh:
                facts = json.load(fh)
        if args.parity_source and args.parity_data:
            from _data_parity import data_parity
            from _own_pipeline import own_pipeline_parity

            try:
                if facts and facts.get("kind") == "own" and facts.get("dataset"):
                    # the source's own dataset + collator on the raw records in its own format: the oracle
                    parity = own_pipeline_parity(args.parity_source, args.parity_data, examples, facts,
                                                 args.media_token_id, args.trust_remote_code)
                else:
                    parity = data_parity(args.parity_source, args.parity_data, examples, args.media_token_id,
                                         args.trust_remote_code)
            except Exception as exc:  # probe boundary: a source that cannot be rendered is a finding, not a crash
                import traceback

                traceback.print_exc()
                parity = {"passed": False, "error": f"{type(exc).__name__}: {exc}",
                          "problems": [f"the source's own processing could not be run: {type(exc).__name__}: {exc}"]}
            parity = with_batch_parity(parity, examples, batch, collate_fn, args, own=bool(
                facts and facts.get("kind") == "own" and facts.get("dataset")), bounds=pixel_bounds(dataset_param))
        cutoff = None
        if args.parity_source and args.parity_data:
            from _cutoff import cutoff_findings

            cutoff_len = getattr(getattr(dataset_param, "basic_parameters", None), "cutoff_len", None)
            media_id = args.media_token_id if args.media_token_id is not None else (parity or {}).get("media_token_id")
            try:
                cutoff = cutoff_findings(dataset, cutoff_len, args.parity_source, args.parity_data, media_id,
                                         args.trust_remote_code)
            except Exception as exc:  # probe boundary: a sample the source cannot process is reported, not a crash
                cutoff = {"cutoff_len": cutoff_len, "error": f"{type(exc).__name__}: {exc}", "cut": []}
    except Exception as exc:  # probe boundary: the failure is the result
        import traceback

        traceback.print_exc()
        emit({"error": warned.cause_of(f"{type(exc).__name__}: {exc}")})
        return 1
    media_items = {kind: sum(len(ex.get(kind) or []) for ex in examples) for kind in ("images", "videos", "audios")}
    emit({
        "num_samples": n, "example_keys": sorted(examples[0].keys()),
        # what a reader checks first: the trained span, the counts, the media expansion, the forward's inputs
        "sample": decoded_sample(dataset_param, batch), "media_items": {k: v for k, v in media_items.items() if v},
        "forward_receives": sorted(batch) + ["use_cache"],
        "batch_keys": {k: describe(v) for k, v in batch.items()},
        "media": {"referenced": len(media), "missing": missing[:20]}, "batch_file": batch_file, "setup": setup,
        "parity": parity, "cutoff": cutoff, "redraw": redraw,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
