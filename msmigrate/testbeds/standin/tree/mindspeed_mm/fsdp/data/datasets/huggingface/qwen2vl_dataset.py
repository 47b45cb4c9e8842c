"""`dataset_type: huggingface`: local ShareGPT/alpaca JSON -> supervised examples (stand-in: an in-memory list
instead of `datasets.load_dataset("json", ...)`; same attr mapping, template, mm_plugin and label masking)."""
import json
import logging
import os

import torch

from mindspeed.fsdp.utils.log import print_rank
from mindspeed_mm.fsdp.data.data_utils.func_utils.convert import (IGNORE_INDEX, DataArguments, DatasetAttr,
                                                                 get_dataset_converter, load_tokenizer,
                                                                 update_tokenizer_with_chat_template)
from mindspeed_mm.fsdp.data.data_utils.func_utils.model_args import ProcessorArguments
from mindspeed_mm.fsdp.data.data_utils.func_utils.template import get_template_and_fix_tokenizer
from mindspeed_mm.fsdp.utils.register import data_register

logger = logging.getLogger(__name__)


class ListDataset(torch.utils.data.Dataset):
    def __init__(self, examples):
        self.examples = examples

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, idx):
        return self.examples[idx]


def _json_files(dataset):
    files = dataset.split(",") if isinstance(dataset, str) else list(dataset or [])
    for path in files:
        if not os.path.isfile(path.strip()):
            raise FileNotFoundError(f"Unable to find '{path.strip()}'")
    return [p.strip() for p in files]


def _supervised_example(converted, template, tokenizer, processor, data_args):
    messages = template.mm_plugin.process_messages(converted["_prompt"] + converted["_response"],
                                                   converted["_images"], converted["_videos"],
                                                   converted["_audios"], processor)
    input_ids, labels = [], []
    pairs = template.encode_multiturn(tokenizer, messages, converted["_system"])
    for turn, (source, target) in enumerate(pairs):
        # the real framework's labelling: aligned with input_ids (its loss shifts them); an efficient-eos template
        # closes the previous turn by a label only, the eos on the first position of the next prompt (position 0
        # of the first, which the shift never reads); mask_history trains the last answer only
        if data_args.train_on_prompt:
            source_labels = source
        elif template.efficient_eos:
            source_labels = [tokenizer.eos_token_id] + [IGNORE_INDEX] * (len(source) - 1)
        else:
            source_labels = [IGNORE_INDEX] * len(source)
        history = data_args.mask_history and turn < len(pairs) - 1
        input_ids += source + target
        labels += source_labels + ([IGNORE_INDEX] * len(target) if history else target)
    if template.efficient_eos:
        input_ids, labels = input_ids + [tokenizer.eos_token_id], labels + [tokenizer.eos_token_id]
    input_ids, labels = input_ids[:data_args.cutoff_len], labels[:data_args.cutoff_len]
    return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels,
            "images": converted["_images"] or None, "videos": None, "audios": None}


@data_register.register("huggingface")
def get_qwen2vl_dataset(basic_param, preprocess_param, dataset_param=None, **kwargs):
    data_args = DataArguments(**basic_param)
    process_args = ProcessorArguments(**preprocess_param)
    attr = DatasetAttr(**(dataset_param or {}).get("attr", {}) or {})
    if data_args.stage not in (None, "sft"):
        raise NotImplementedError(f"not support stage: {data_args.stage}")
    tokenizer_module = load_tokenizer(process_args)
    tokenizer, processor = tokenizer_module["tokenizer"], tokenizer_module["processor"]
    if data_args.chat_template is not None:
        tokenizer = update_tokenizer_with_chat_template(tokenizer, data_args.chat_template)
        template = get_template_and_fix_tokenizer(tokenizer, None)
    else:
        template = get_template_and_fix_tokenizer(tokenizer, data_args.template)
    template.enable_thinking = data_args.enable_thinking

    raw = []
    for path in _json_files(data_args.dataset):
        with open(path, encoding="utf-8") as f:
            raw += json.load(f)
    if data_args.max_samples:
        raw = raw[:data_args.max_samples]
    converter = get_dataset_converter(attr.formatting)
    examples = []
    for sample in raw:
        converted = converter(sample, attr, data_args)
        if len(converted["_prompt"]) % 2 != 1 or len(converted["_response"]) != 1:
            logger.warning(f"Dropped invalid example: prompt_turns={len(converted['_prompt'])} "
                           f"response_turns={len(converted['_response'])} (expected odd prompt + 1 response).")
            continue
        examples.append(_supervised_example(converted, template, tokenizer, processor, data_args))
    first = examples[0] if examples else next(iter(()))  # like the real print_data_example: StopIteration if empty
    print_rank(print, "training example:\ninput_ids:\n{}\ninputs:\n{}\nlabel_ids:\n{}".format(
        first["input_ids"], tokenizer.decode(first["input_ids"], skip_special_tokens=False), first["labels"]))
    return ListDataset(examples)
