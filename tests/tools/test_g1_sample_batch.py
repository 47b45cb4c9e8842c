"""G1's batch (probes/forward_smoke.py ``sample_batch``) comes from the source's own processing path whatever carries
the chat template: a processor that takes no template of its own (the template is the tokenizer's) used to fail
``processor.apply_chat_template``, and G1 fell back to a text-only synthetic batch. Tiny Qwen2-VL source (fixture
folder) whose template lives only in tokenizer_config.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


def test_sample_batch_renders_the_tokenizers_template(tmp_path, monkeypatch):
    from msmigrate.testbeds.fixtures import build_source

    folder = build_source("qwen2_vl", tmp_path / "src")
    template = (folder / "chat_template.jinja").read_text()
    (folder / "chat_template.jinja").unlink()
    for name in ("processor_config.json", "tokenizer_config.json"):
        path = folder / name
        if path.exists():
            cfg = json.loads(path.read_text())
            cfg.pop("chat_template", None)
            if name == "tokenizer_config.json":
                cfg["chat_template"] = template
            path.write_text(json.dumps(cfg))
    monkeypatch.syspath_prepend(str(PROBES))
    for name in ("_processor", "_data_parity", "_model_build", "forward_smoke"):
        sys.modules.pop(name, None)
    import forward_smoke
    from _processor import load_processor

    proc = load_processor(str(folder), False)[0]
    assert not getattr(proc, "chat_template", None) and proc.tokenizer.chat_template  # the case this test is about
    import transformers

    config = transformers.AutoConfig.from_pretrained(folder)
    params = ["input_ids", "attention_mask", "labels", "pixel_values", "image_grid_thw"]
    batch = forward_smoke.sample_batch(str(folder), str(folder / "data" / "train.json"), config, params, False)
    assert "pixel_values" in batch and int((batch["input_ids"] == config.image_token_id).sum()) > 0
    assert (batch["labels"][batch["input_ids"] == config.image_token_id] == -100).all()
