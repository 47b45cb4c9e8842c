"""Faults in the data path (owner ``data``): the records and media, the chat template, the mm_plugin, the collator.
Each is fixed in the records file, a media file, or the data-path module named."""

from __future__ import annotations

from msmigrate.testbeds.faults.injection import Fault, Replace

QWEN2VL_EXPANSION = "self.vision_bos_token + self.image_token * n + self.vision_eos_token"
COLLATE_TENSORS = "batch = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}"

FAULTS = [
    Fault("data-media-token-off-by-one", "data", "mm_plugin",
          "the mm_plugin's placeholder expansion edited to add one image token more than the processor's grid",
          (Replace("{mm_plugin}", QWEN2VL_EXPANSION,
                   "self.vision_bos_token + self.image_token * (n + 1) + self.vision_eos_token"),),
          fix=("mm_plugin.py", "Qwen2VLPlugin", "process_messages")),
    Fault("data-template-image-token-typo", "data", "template",
          "the template registration gives the mm_plugin an image token the tokenizer does not know",
          (Replace("{template}", 'get_mm_plugin(name="qwen2_vl", image_token="<|image_pad|>"',
                   'get_mm_plugin(name="qwen2_vl", image_token="<|image_pad>"'),),
          fix=("template.py", "image_token")),
    Fault("data-template-user-slot-typo", "data", "template",
          "the qwen2vl template's user slot edited by hand to `{{contents}}`: the user's text and its image "
          "placeholder never reach the prompt",
          (Replace("{template}", 'name="qwen2vl",\n    params=RegisterParams(\n        format_user=StringFormatter('
                                 'slots=["<|im_start|>user\\n{{content}}',
                   'name="qwen2vl",\n    params=RegisterParams(\n        format_user=StringFormatter('
                   'slots=["<|im_start|>user\\n{{contents}}'),),
          fix=("template.py", "format_user")),
    Fault("data-collator-bool-tensors", "data", "collator",
          "the collator builds every batch tensor as bool (an attention-mask shortcut applied to all keys)",
          (Replace("{collator}", COLLATE_TENSORS,
                   "batch = {k: torch.tensor(v, dtype=torch.bool) for k, v in batch.items()}"),),
          fix=("func_utils/collator.py", "data_collator.py")),
    Fault("data-collator-labels-all-masked", "data", "collator",
          "the collator masks every label (prompt masking applied to the answer too): nothing to learn",
          (Replace("{collator}", COLLATE_TENSORS, COLLATE_TENSORS + "\n        batch[\"labels\"].fill_(IGNORE_INDEX)"),),
          fix=("func_utils/collator.py", "data_collator.py")),
    Fault("data-collator-key-renamed", "data", "collator",
          "the collator emits `attn_mask` instead of `attention_mask` (renamed for another model's forward)",
          (Replace("{collator}", 'batch = {"input_ids": [], "attention_mask": [], "labels": []}',
                   'batch = {"input_ids": [], "attn_mask": [], "labels": []}'),
           Replace("{collator}", '(("input_ids", pad_id), ("attention_mask", 0),',
                   '(("input_ids", pad_id), ("attn_mask", 0),'),
           Replace("{collator}", 'seq = list(f[key])', 'seq = list(f["attention_mask" if key == "attn_mask" else key])')),
          fix=("func_utils/collator.py", "data_collator.py", "attn_mask")),
    Fault("data-image-path-missing", "data", "dataset",
          "a record names an image file that is not in the dataset folder (converted to jpg, records not updated)",
          (Replace("{data}", '"images/sample_00.png"', '"images/sample_00.jpg"'),),
          fix=("train.json", "sample_00")),
    Fault("data-records-truncated", "data", "dataset",
          "the records file lost its closing bracket (an interrupted copy)",
          (Replace("{data}", "\n }\n]", "\n }\n"),),
          fix=("train.json",)),
    Fault("data-image-corrupt", "data", "dataset",
          "an image file replaced by an HTML error page saved under its name (a failed download)",
          (Replace("{data_dir}/images/sample_00.png", None, "<html><body>403 Forbidden</body></html>\n"),),
          fix=("sample_00.png", "train.json")),
    Fault("data-records-empty", "data", "dataset", "an empty records file (the export filtered every sample)",
          (Replace("{data}", None, "[]\n"),),
          fix=("train.json",)),
    Fault("data-placeholder-missing", "data", "dataset",
          "a record carries an image but its text has no <image> placeholder",
          (Replace("{data}", '"<image>Describe the image."', '"Describe the image."', count=0),),
          fix=("train.json", "<image>")),
]
