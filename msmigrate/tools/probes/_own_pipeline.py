"""The source's OWN training pipeline as the oracle (gates G1 and G2; runs in the target runtime; imports nothing
from msmigrate).

Where the source ships training code (a dataset class, a collator, maybe a ``Trainer.compute_loss``: the facts
``tools/repo_reader/training_facts.py`` read by AST), that code — not a pipeline rebuilt from the chat template — says
what a training sequence is. Here it is run as the source runs it:

- ``own_batches``: the dataset class built on the raw records (the data file the YAML names, in the family's own
  format), each record collated alone by the source's collator;
- ``compare_with_target``: each such batch against the target's mapped example of the same record: the ids with
  every media run collapsed to one marker (equal text ids, id for id), the media runs (count and lengths: equal
  media spans), and the trained positions with their targets — each side read in its own label convention (the
  source's from its training code, the target's from its labels), so a pre-shifted source compares with an aligned
  target position for position;
- ``own_loss``: the source's loss on its own batch: its ``compute_loss`` where it overrides one, else the model's
  ``.loss`` (the HF Trainer's default), called the way its training code calls the model.

Constructing the source's classes needs their arguments: required parameters are filled by name from what a training
script has at hand (the data path, the loaded records, the tokenizer, the processor); one no name answers is named in
the error — a finding, not a guess.
"""
import importlib.util
import inspect
import json
import os
import re
import sys

from _data_parity import IGNORE, label_convention, trained_targets

PATH_NAMES = ("data_path", "data_file", "path", "json_path", "file", "data_args")
RECORD_NAMES = ("raw_data", "records", "data", "list_data_dict", "samples", "dataset")
MAX_LEN_NAME = re.compile(r"(model_)?max_(len|length|seq_len|seq_length)")


def load_module(source, rel):
    """The source's training file as a module (its folder and the source root on sys.path: its own imports)."""
    path = os.path.join(source, rel)
    for folder in (os.path.dirname(path), source):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("source_training_" + os.path.splitext(os.path.basename(rel))[0],
                                                  path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Provided:
    """What a training script has at hand, loaded only when a parameter asks for it."""

    def __init__(self, source, data_path, trust_remote_code, tokenizer_setup=()):
        self.source, self.data_path, self.trust = source, data_path, trust_remote_code
        self.tokenizer_setup = list(tokenizer_setup)
        self._cache = {}

    def get(self, name):
        low = name.lower()
        if low in PATH_NAMES:
            return self.data_path
        if low in RECORD_NAMES:
            return self._once("records", lambda: json.load(open(self.data_path, encoding="utf-8")))
        if "processor" in low and "image" not in low:
            from transformers import AutoProcessor

            return self._once("processor", lambda: AutoProcessor.from_pretrained(
                self.source, trust_remote_code=self.trust))
        if "tokenizer" in low:
            return self._once("tokenizer", self._tokenizer)
        if MAX_LEN_NAME.fullmatch(low):
            # the sequence length the source's tokenizer was saved with (its training length)
            length = self.get("tokenizer").model_max_length
            if not isinstance(length, int) or length > 1_000_000:
                raise TypeError(f"no value for the required parameter {name!r} (the source's tokenizer records no "
                                "model_max_length)")
            return length
        raise TypeError(f"no value for the required parameter {name!r}")

    def _tokenizer(self):
        """The source's tokenizer with the settings its training code makes after loading it (``pad_token_id =
        eod_id`` …: facts ``tokenizer_setup``), replayed as attribute assignments."""
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(self.source, trust_remote_code=self.trust)
        for step in self.tokenizer_setup:
            setattr(tok, step["attr"], getattr(tok, step["from_attr"]) if "from_attr" in step else step["value"])
        return tok

    def _once(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


def construct(obj, provided, what):
    """``obj(**required)``: each required parameter filled by name from ``provided``."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    kwargs = {}
    for i, (name, param) in enumerate(inspect.signature(target).parameters.items()):
        if (inspect.isclass(obj) and i == 0) or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or \
                param.default is not param.empty:
            continue
        try:
            kwargs[name] = provided.get(name)
        except TypeError as exc:
            raise TypeError(f"cannot build the source's {what} {obj.__name__}: {exc}") from None
    return obj(**kwargs)


def _to_list(value):
    value = value.tolist() if hasattr(value, "tolist") else list(value)
    return value[0] if value and isinstance(value[0], list) else value


def own_batches(source, data_path, facts, n, trust_remote_code=True):
    """[(record index, collated batch)] for the first ``n`` records, built by the source's own dataset + collator."""
    provided = Provided(source, data_path, trust_remote_code, facts.get("tokenizer_setup") or ())
    module = load_module(source, facts["dataset"]["file"])
    dataset = construct(getattr(module, facts["dataset"]["class"]), provided, "dataset")
    collate = None
    if facts.get("collator"):
        c = facts["collator"]
        obj = getattr(module if c["file"] == facts["dataset"]["file"] else load_module(source, c["file"]), c["name"])
        collate = construct(obj, provided, "collator") if inspect.isclass(obj) else obj
    if collate is None:
        # no collator of its own: the HF Trainer's default one stacks the dataset's items (what the source trains on)
        from transformers import default_data_collator as collate
    out = []
    here = os.getcwd()
    os.chdir(os.path.dirname(os.path.abspath(data_path)))  # record paths are relative to the data file, if at all
    try:
        for i in range(min(n, len(dataset))):
            item = dataset[i]
            out.append((i, dict(collate([item]))))
    finally:
        os.chdir(here)
    return out


def _media_runs(ids, flags):
    """(ids with each media run as one marker None, [(start in the collapsed ids, run length)]); ``flags[k]`` says
    whether position k is media."""
    out, runs, k = [], [], 0
    while k < len(ids):
        if flags[k]:
            j = k
            while j < len(ids) and flags[j]:
                j += 1
            runs.append((len(out), j - k))
            out.append(None)
            k = j
        else:
            out.append(ids[k])
            k += 1
    return out, runs


def _collapsed_index(runs_full, j):
    """Map a full-sequence index to the collapsed one (a media position maps to its marker)."""
    shift = 0
    for start_full, length in runs_full:
        if j < start_full:
            break
        if j < start_full + length:
            return j - shift - (j - start_full)
        shift += length - 1
    return j - shift


def _full_runs(ids, flags):
    runs, k = [], 0
    while k < len(ids):
        if flags[k]:
            j = k
            while j < len(ids) and flags[j]:
                j += 1
            runs.append((k, j - k))
            k = j
        else:
            k += 1
    return runs


def sequence_mask(batch, length):
    """The source batch's own marking of media positions: a boolean tensor of input_ids' shape that is neither the
    attention mask nor the labels (DeepSeek-VL2's ``images_seq_mask``), as a list for its first row; else None."""
    ids = batch.get("input_ids")
    for key, value in batch.items():
        if key in ("input_ids", "attention_mask", "labels") or not hasattr(value, "dtype"):
            continue
        if str(value.dtype) == "torch.bool" and ids is not None and tuple(value.shape) == tuple(ids.shape):
            return [bool(x) for x in _to_list(value)][:length]
    return None


def source_media_flags(own, ids, source_media_id=None):
    """Which positions of the source's own sequence are media: its batch's sequence mask where it carries one, else
    negative placeholder ids (or the given media id)."""
    mask = sequence_mask(own, len(ids))
    if mask is not None and len(mask) == len(ids):
        return mask
    return [t < 0 or (source_media_id is not None and t == source_media_id) for t in ids]


def compare_with_target(tok, own, example, convention, target_media_id, source_media_id=None):
    """One record: the source's own collated batch against the target's mapped example."""
    ids = _to_list(own["input_ids"])
    labels = _to_list(own["labels"])
    if "attention_mask" in own:
        keep = sum(_to_list(own["attention_mask"]))
        ids, labels = ids[:keep], labels[:keep]
    t_ids, t_labels = list(example["input_ids"]), list(example["labels"])

    s_flags = source_media_flags(own, ids, source_media_id)
    t_flags = [t < 0 or (target_media_id is not None and t == target_media_id) for t in t_ids]
    s_flat, s_runs = _media_runs(ids, s_flags)
    t_flat, t_runs = _media_runs(t_ids, t_flags)
    problems = []
    first = next((k for k, (a, b) in enumerate(zip(s_flat, t_flat)) if a != b),
                 None if len(s_flat) == len(t_flat) else min(len(s_flat), len(t_flat)))
    if first is not None:
        def show(seq):
            return tok.decode([t for t in seq[max(0, first - 6): first + 6] if t is not None])
        problems.append(f"input ids differ at text position {first} (media runs collapsed): source's own pipeline "
                        f"{show(s_flat)!r}, target {show(t_flat)!r}")
    if [n for _, n in s_runs] != [n for _, n in t_runs]:
        problems.append(f"media spans differ: the source's own pipeline writes runs of {[n for _, n in s_runs]}, the "
                        f"target {[n for _, n in t_runs]}")
    s_conv = "shifted" if convention == "pre-shifted" else "aligned"
    # the target's loss shifts (MindSpeed-MM's convention): its labels are read as aligned whatever they look like,
    # so labels a port pre-shifted (and the loss shifts again) show as trained positions moved by one
    t_conv, seen = "aligned", label_convention(t_ids, t_labels)[0]
    s_targets, _ = trained_targets(labels, s_conv)
    t_targets, _ = trained_targets(t_labels, t_conv)
    s_full, t_full = _full_runs(ids, s_flags), _full_runs(t_ids, t_flags)
    s_set = {(_collapsed_index(s_full, j), lab) for j, lab in s_targets.items()}
    t_set = {(_collapsed_index(t_full, j), lab) for j, lab in t_targets.items()}
    only_source, only_target = sorted(s_set - t_set), sorted(t_set - s_set)

    def words(pairs):
        return ", ".join(f"{j}:{tok.decode([lab])!r}" for j, lab in pairs[:8])
    if only_source:
        problems.append(f"{len(only_source)} position(s) the source's own pipeline trains and the target does not "
                        f"(text position:target token): {words(only_source)}")
    if only_target:
        problems.append(f"{len(only_target)} position(s) the target trains and the source's own pipeline does not: "
                        f"{words(only_target)}")
    return {"tokens": len(t_ids), "source_tokens": len(ids), "trained": len(t_set), "source_trained": len(s_set),
            "media_spans": [n for _, n in t_runs], "source_media_spans": [n for _, n in s_runs],
            "target_label_convention": t_conv, "target_labels_look": seen, "source_label_convention": convention,
            "problems": problems}


def media_id_at_source_run(own, example):
    """The target's media token read from its example: the id it writes where the source's own pipeline starts its
    first media run (negative ids, or its batch's sequence mask: the text before it is the same in a faithful port).
    None without a run."""
    ids, t_ids = _to_list(own["input_ids"]), list(example["input_ids"])
    start = next((k for k, flag in enumerate(source_media_flags(own, ids)) if flag), None)
    if start is None or start >= len(t_ids) or ids[:start] != t_ids[:start]:
        return None
    return t_ids[start]


def own_pipeline_parity(source, data_path, examples, facts, target_media_id, trust_remote_code=True):
    """G2's oracle where the source ships training code: its own dataset + collator on the raw records."""
    from transformers import AutoTokenizer

    where = {"oracle": "the source's own training pipeline", "data_file": os.path.abspath(data_path),
             "dataset": facts.get("dataset"), "collator": facts.get("collator"),
             "keys_read": facts.get("data_keys") or []}
    tok = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    batches = own_batches(source, data_path, facts, len(examples), trust_remote_code)
    samples, problems = [], []
    if target_media_id is None and batches and examples:
        target_media_id = media_id_at_source_run(batches[0][1], examples[0])
    for (i, own), example in zip(batches, examples):
        result = compare_with_target(tok, own, example, facts.get("label_convention") or "aligned",
                                     target_media_id)
        samples.append(result)
        problems += [f"sample {i}: {p}" for p in result["problems"]]
    totals = {k: sum(s[k] for s in samples) for k in ("tokens", "trained", "source_trained")}
    if problems:
        problems.append(f"(the oracle read {where['data_file']} through {facts['dataset']['file']} "
                        f"{facts['dataset']['class']}, record keys {where['keys_read']})")
    return {**where, "samples_compared": len(samples), **totals, "media_token_id": target_media_id,
            "masked": totals["tokens"] - totals["trained"],
            "prompt_match": not any("input ids differ" in p for p in problems),
            "media_tokens": sum(sum(s["media_spans"]) for s in samples),
            "source_media_tokens": sum(sum(s["source_media_spans"]) for s in samples),
            "media_spans": [s["media_spans"] for s in samples],
            "source_media_spans": [s["source_media_spans"] for s in samples],
            "label_convention": samples[0]["target_label_convention"] if samples else None,
            "source_label_convention": facts.get("label_convention"),
            "per_sample": samples, "passed": bool(samples) and not problems, "problems": problems}


def own_forward(model, batch, facts, source):
    """(logits, loss) of the source on its own collated batch, by its own loss path: its ``compute_loss`` override
    (the Trainer instance stands in as ``self`` with the model it reads; no ``Trainer.__init__``: no accelerator or
    output folders), else the model's ``.loss`` called as the HF Trainer calls it (``model(**inputs)``)."""
    batch = dict(batch)
    trainer = facts.get("trainer")
    if trainer and trainer.get("computes_loss"):
        module = load_module(source, trainer["file"])
        cls = getattr(module, trainer["class"])
        self = cls.__new__(cls)
        self.__dict__["model"] = model
        loss, outputs = cls.compute_loss(self, model, batch, return_outputs=True)
    else:
        outputs = model(**batch)
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs.loss
    logits = outputs["logits"] if isinstance(outputs, dict) else outputs.logits
    return logits, loss


def aligned_batch(batch, facts):
    """The source's own batch as the target's trainer feeds the plugin: labels aligned with input_ids (a source that
    pre-shifts them has label i = token i+1: moved one place right, label 0 ignored)."""
    import torch

    out = dict(batch)
    if facts.get("label_convention") == "pre-shifted" and isinstance(out.get("labels"), torch.Tensor):
        labels = out["labels"]
        out["labels"] = torch.cat([torch.full_like(labels[..., :1], IGNORE), labels[..., :-1]], dim=-1)
    return out
