"""The source's own training pipeline read from its files: one test per contract kind the training code can state
(the forward call — one dict, kwargs, positional —, where the loss is computed, aligned or pre-shifted labels,
which positions train, the data format the dataset reads), and the HF oracle when there is no training code."""

from __future__ import annotations

from pathlib import Path

from msmigrate.tools.repo_reader.training_facts import call_kind_from_signature, contract_text, source_training_facts

ONE_DICT_TRAINER = '''
import torch
from transformers import Trainer


class FamilyTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(data=inputs, use_cache=False)
        logits = outputs.logits.view(-1, self.model.config.vocab_size)
        loss = torch.nn.CrossEntropyLoss()(logits, labels.view(-1))
        return (loss, outputs) if return_outputs else loss
'''

PRE_SHIFT_DATASET = '''
from torch.utils.data import Dataset


class SupervisedDataset(Dataset):
    def __init__(self, raw_data, tokenizer):
        self.raw_data, self.tokenizer = raw_data, tokenizer

    def __getitem__(self, i):
        sample = self.raw_data[i]
        image = sample["image"]
        ids, context = [], []
        for message in sample["conversations"]:
            part = self.tokenizer(message["content"])["input_ids"]
            ids += part
            context += [int(message["role"] != "assistant")] * len(part)
        target = [-100] * len(ids)
        for k in range(1, len(ids)):
            if context[k] == 0:
                target[k - 1] = ids[k]
        return {"input_ids": ids, "labels": target, "image": image}


def data_collator(examples, padding_value=0):
    return examples
'''

KWARGS_TRAINER = '''
import torch.nn.functional as F
from transformers import Trainer


class ShiftTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        labels = inputs.pop("labels")
        logits = model(**inputs).logits
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        return F.cross_entropy(shift_logits.flatten(0, 1), shift_labels.flatten())
'''

POSITIONAL_TRAINER = '''
from transformers import Trainer


class PosTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        out = model(inputs["input_ids"], inputs["pixel_values"], labels=inputs["labels"])
        return out.loss
'''

HF_TRAINER_SCRIPT = '''
from torch.utils.data import Dataset
from transformers import Trainer

IGNORE_INDEX = -100


class LazySupervisedDataset(Dataset):
    def __getitem__(self, i):
        source = self.list_data_dict[i]
        labels = [IGNORE_INDEX] * 3 + source["ids"]
        return dict(input_ids=source["ids"], labels=labels)


class DataCollatorForSupervisedDataset:
    def __call__(self, instances):
        return instances


def train():
    Trainer(model=None, train_dataset=LazySupervisedDataset()).train()
'''


def write(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def test_one_dict_forward_loss_in_trainer_pre_shifted_labels(tmp_path):
    folder = write(tmp_path, {"modeling_family.py": "class X: pass\n", "finetune/trainer.py": ONE_DICT_TRAINER,
                              "finetune/dataset.py": PRE_SHIFT_DATASET, "finetune/finetune.py": "import trainer\n"})
    facts = source_training_facts(folder, {"signature": "forward(self, data, **kwargs)"})
    assert facts["kind"] == "own"
    assert set(facts["entry"]) == {"finetune/trainer.py", "finetune/dataset.py", "finetune/finetune.py"}
    assert facts["forward_call"] == "one dict" and facts["trainer"]["model_call"] == "model(data=inputs, use_cache=False)"
    assert facts["loss_at"].startswith("finetune/trainer.py:7 FamilyTrainer.compute_loss")
    assert facts["label_convention"] == "pre-shifted" and "target[k - 1] = ids[k]" in facts["label_evidence"]
    assert facts["dataset"]["class"] == "SupervisedDataset" and facts["collator"]["name"] == "data_collator"
    assert {"image", "conversations", "content", "role"} <= set(facts["data_keys"])
    assert any("-100" in line for line in facts["masking"])
    text = "\n".join(contract_text(facts))
    assert "forward call: one dict" in text and "label convention: pre-shifted" in text


def test_kwargs_forward_loss_in_trainer_shifting_aligned_labels(tmp_path):
    folder = write(tmp_path, {"train_family.py": KWARGS_TRAINER})
    facts = source_training_facts(folder)
    assert facts["forward_call"] == "kwargs" and facts["trainer"]["computes_loss"]
    assert facts["label_convention"] == "aligned" and "shifts logits" in facts["label_evidence"]


def test_positional_call_and_the_models_own_loss(tmp_path):
    folder = write(tmp_path, {"train/trainer.py": POSITIONAL_TRAINER})
    facts = source_training_facts(folder)
    assert facts["forward_call"] == "positional"
    assert facts["trainer"]["computes_loss"] is False and facts["loss_at"].startswith("the model's .loss")


def test_hf_trainer_with_own_dataset_and_collator(tmp_path):
    folder = write(tmp_path, {"train.py": HF_TRAINER_SCRIPT})
    facts = source_training_facts(folder, {"signature": "forward(self, input_ids, labels=None, **kwargs)"})
    assert facts["kind"] == "own" and facts["trainer"] is None
    assert facts["loss_at"].startswith("the model's forward") and facts["forward_call"] == "kwargs"
    assert facts["dataset"]["class"] == "LazySupervisedDataset"
    assert facts["collator"]["name"] == "DataCollatorForSupervisedDataset"
    assert facts["masking"] and "IGNORE_INDEX" in facts["masking"][0]


def test_no_training_code_means_the_hf_oracle(tmp_path):
    folder = write(tmp_path, {"modeling_x.py": "class X: pass\n"})
    facts = source_training_facts(folder)
    assert facts["kind"] == "hf" and facts["label_convention"] == "aligned"
    assert "HF's Trainer" in contract_text(facts)[0]
    assert source_training_facts(tmp_path / "absent")["kind"] == "hf"


def test_training_named_files_without_a_pipeline_are_no_oracle(tmp_path):
    folder = write(tmp_path, {"scripts/convert_weights.py": "import torch\n\ndef main():\n    pass\n"})
    facts = source_training_facts(folder)
    assert facts["kind"] == "hf" and facts["files_read"] == ["scripts/convert_weights.py"]


def test_unparsable_training_code_is_skipped_not_raised(tmp_path):
    folder = write(tmp_path, {"finetune/broken.py": "def (:\n", "finetune/trainer.py": ONE_DICT_TRAINER})
    assert source_training_facts(folder)["forward_call"] == "one dict"


def test_call_kind_from_the_forward_signature():
    assert call_kind_from_signature("forward(self, data, **kwargs)") == "one dict"
    assert call_kind_from_signature("forward(self, input_ids, attention_mask=None)") == "kwargs"
    assert call_kind_from_signature(None) is None


def test_the_phi3_v_fixture_states_its_own_contract(tmp_path):
    """The Phi-3.5-vision-layout fixture: its HF-Trainer script's dataset reads the VQA records, its collator
    masks the prompt, the model's forward shifts the loss (aligned labels)."""
    from msmigrate.testbeds.fixtures import build_source

    folder = build_source("phi3_v", tmp_path / "phi3_v")
    facts = source_training_facts(folder)
    assert facts["kind"] == "own" and facts["entry"] == ["finetune/finetune_hf_trainer.py"]
    assert facts["dataset"]["class"] == "VqaDataset" and facts["collator"]["name"] == "Phi3VDataCollator"
    assert facts["data_keys"] == ["image", "id", "question", "answer"]
    assert facts["forward_call"] == "kwargs" and facts["loss_at"].startswith("the model's forward")
    assert facts["label_convention"] == "aligned" and "shift_logits" in facts["label_evidence"]


def test_the_own_pipeline_measured_on_the_records_says_which_positions_train(tmp_path):
    """The plan's measured contract for the phi3_v fixture: its own collator trains the answer, `<|end|>`, the
    newline and `<|endoftext|>` (the eos a pipeline built from the chat template alone would not train), and writes
    one media run of 13 negative ids per record."""
    import sys

    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.tools.repo_reader.training_facts import measure_own_pipeline

    folder = build_source("phi3_v", tmp_path / "phi3_v")
    facts = source_training_facts(folder)
    measured = measure_own_pipeline(sys.executable, folder, folder / "data" / "train.json", facts, tmp_path / "run")
    assert "error" not in measured, measured
    first = measured["records"][0]
    assert first["media_runs"] == [13] and first["trained"] == 14
    assert first["trained_text"] == ["The image shows a grey square on a white background.<|end|>\n<|endoftext|>"]
    lines = contract_text({**facts, "measured": measured})
    assert any(line.startswith("measured on record 0 by the source's own pipeline: ") for line in lines)


NO_COLLATOR_SCRIPT = '''
import torch
from torch.utils.data import Dataset
from transformers import Trainer

IGNORE_TOKEN_ID = -100


class LazySupervisedDataset(Dataset):
    def __init__(self, raw_data, tokenizer, max_len):
        self.raw_data, self.tokenizer, self.max_len = raw_data, tokenizer, max_len

    def __len__(self):
        return len(self.raw_data)

    def __getitem__(self, i):
        ids = self.raw_data[i]["ids"] + [self.tokenizer.pad_token_id] * (self.max_len - len(self.raw_data[i]["ids"]))
        ids = torch.tensor(ids)
        return dict(input_ids=ids, labels=ids.clone(), attention_mask=ids.ne(self.tokenizer.pad_token_id))


def train(tokenizer):
    tokenizer.pad_token_id = tokenizer.eod_id
    tokenizer.padding_side = "right"
    tokenizer.model_max_length = some_args.length  # not replayable: reads other state
    Trainer(model=None, train_dataset=LazySupervisedDataset([], tokenizer, 8)).train()
'''


def test_tokenizer_settings_the_training_code_makes_are_read(tmp_path):
    """Qwen-VL-style: the script sets the pad itself after loading the tokenizer; the settings a replay can make
    (another attribute of the same tokenizer, a constant) are facts, the rest is left out."""
    facts = source_training_facts(write(tmp_path, {"finetune.py": NO_COLLATOR_SCRIPT}))
    assert facts["collator"] is None and facts["dataset"]["class"] == "LazySupervisedDataset"
    assert facts["tokenizer_setup"] == [
        {"attr": "pad_token_id", "from_attr": "eod_id", "text": "tokenizer.pad_token_id = tokenizer.eod_id"},
        {"attr": "padding_side", "value": "right", "text": "tokenizer.padding_side = 'right'"}]
    assert "the training code sets on its tokenizer: tokenizer.pad_token_id = tokenizer.eod_id" in \
        "\n".join(contract_text(facts))


def test_without_a_collator_the_hf_default_collator_stacks_and_max_len_comes_from_the_tokenizer(tmp_path):
    """The source's own pipeline as the HF Trainer runs it: no collator of its own means transformers'
    default_data_collator (a batch dimension), a ``max_len`` parameter takes the tokenizer's saved
    model_max_length, and the tokenizer gets the script's own settings before the dataset sees it."""
    import json
    import sys

    from transformers import PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models

    from msmigrate.tools.repo_reader.training_facts import source_training_facts as read

    probes = str(Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "probes")
    sys.path.insert(0, probes)
    import _own_pipeline as mod

    folder = write(tmp_path, {"finetune.py": NO_COLLATOR_SCRIPT})
    vocab = {f"t{i}": i for i in range(16)}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="t0")),
                                  model_max_length=6)
    tok.save_pretrained(folder)
    data = folder / "train.json"
    data.write_text(json.dumps([{"ids": [5, 6, 7]}]))
    facts = read(folder)
    facts["tokenizer_setup"][0] = {"attr": "pad_token_id", "value": 9, "text": "tokenizer.pad_token_id = 9"}
    [(_, batch)] = mod.own_batches(str(folder), str(data), facts, 1, trust_remote_code=False)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 9, 9, 9]]  # stacked, padded to 6 with the script's pad
    assert batch["attention_mask"].tolist() == [[True, True, True, False, False, False]]
    sys.path.remove(probes)


def test_masking_in_the_processor_when_the_dataset_only_calls_it(tmp_path):
    """DeepSeek-VL2-style: the dataset calls ``processor.process_one(…, inference_mode=False)``; which positions train
    is decided in the remote processor, so its ignore-id lines are the masking facts."""
    dataset = ('from torch.utils.data import Dataset\n\n\nclass ConvDataset(Dataset):\n'
               '    def __getitem__(self, i):\n        return self.processor.process_one(conversations=self.records[i]'
               '["conversation"], inference_mode=False)\n')
    processor = "class P:\n    def mask(self, t):\n        t[:3] = self.ignore_id\n        return t\n"
    facts = source_training_facts(write(tmp_path, {"finetune/dataset.py": dataset,
                                                   "processing_family.py": processor}))
    assert facts["data_keys"] == ["conversation"]
    assert facts["masking"] == ["processing_family.py:3: t[:3] = self.ignore_id"]
