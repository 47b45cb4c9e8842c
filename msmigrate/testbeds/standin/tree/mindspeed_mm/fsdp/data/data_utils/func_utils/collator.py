"""Multimodal seq2seq collator: pad text, run the template's mm_plugin/processor for media tensors."""
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence

import torch
from PIL import Image

from mindspeed_mm.fsdp.data.data_utils.func_utils.convert import IGNORE_INDEX


@dataclass
class MultiModalDataCollatorForSeq2Seq:
    template: Any
    tokenizer: Any
    processor: Optional[Any] = None
    model: Optional[Any] = None
    pad_to_multiple_of: int = 8
    label_pad_token_id: int = IGNORE_INDEX

    def _fake_image(self, feature):
        """Text-only batch + a plugin with an image token: append one masked fake image so vision params get grads."""
        fake = Image.new("RGB", (64, 64), (255, 255, 255))
        msgs = self.template.mm_plugin.process_messages([{"role": "user", "content": "<image>"}], [fake], [], [],
                                                        self.processor)
        ids = self.tokenizer.encode(msgs[0]["content"], add_special_tokens=False)
        feature["input_ids"] = list(feature["input_ids"]) + ids
        feature["attention_mask"] = list(feature["attention_mask"]) + [1] * len(ids)
        feature["labels"] = list(feature["labels"]) + [IGNORE_INDEX] * len(ids)
        return fake

    def __call__(self, features: Sequence[Dict[str, Any]]) -> Dict[str, torch.Tensor]:
        features = [dict(f) for f in features]
        per_sample = [list(f.pop("images", None) or []) for f in features]
        images = [img for imgs in per_sample for img in imgs]
        for f in features:
            f.pop("videos", None)
            f.pop("audios", None)
        if not images and self.template.mm_plugin.image_token is not None and self.processor is not None:
            images = [self._fake_image(features[0])]
            per_sample[0] = images
        longest = max(len(f["input_ids"]) for f in features)
        m = self.pad_to_multiple_of or 1
        length = (longest + m - 1) // m * m
        pad_id = self.tokenizer.pad_token_id
        right = getattr(self.tokenizer, "padding_side", "right") == "right"
        batch = {"input_ids": [], "attention_mask": [], "labels": []}
        for f in features:
            n = length - len(f["input_ids"])
            for key, pad in (("input_ids", pad_id), ("attention_mask", 0), ("labels", self.label_pad_token_id)):
                seq = list(f[key])
                batch[key].append(seq + [pad] * n if right else [pad] * n + seq)
        batch = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
        imglens = [len(imgs) for imgs in per_sample]
        zeros = [0] * len(features)
        batch.update(self.template.mm_plugin.get_mm_inputs(images, [], [], imglens, zeros, zeros,
                                                           batch["input_ids"].tolist(), self.processor))
        if images:
            image_token_id = self.tokenizer.convert_tokens_to_ids(self.template.mm_plugin.image_token)
            batch["mm_token_type_ids"] = (batch["input_ids"] == image_token_id).long()
        return batch
