"""The false pass: a processor output the target's pipeline drops was never compared, because every parity check fed
source and plugin the same batch. ``dropped_outputs`` (probes/model_parity.py) runs the SOURCE's own forward on its
own processor's batch with and without each dropped key: a key whose absence changes the loss or logits (or that the
forward cannot do without) fails; one whose absence changes nothing passes. Tiny Gemma 3 source (fixture folder, its
own processor): its ``token_type_ids`` mark the image tokens, which its training forward attends bidirectionally."""

from __future__ import annotations

import sys
from pathlib import Path

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


def test_a_dropped_output_the_source_uses_fails_one_it_ignores_passes(tmp_path, monkeypatch):
    import torch
    import transformers

    from msmigrate.testbeds.fixtures import build_source

    folder = build_source("gemma3", tmp_path / "src")
    monkeypatch.syspath_prepend(str(PROBES))
    for name in ("_processor", "_data_parity", "_model_build", "forward_smoke", "model_parity"):
        sys.modules.pop(name, None)
    import forward_smoke
    import model_parity
    from _model_build import forward_params, shrink_config

    config = shrink_config(transformers.AutoConfig.from_pretrained(folder), 2)
    cls = transformers.Gemma3ForConditionalGeneration
    params, _ = forward_params(cls)
    batch = forward_smoke.sample_batch(str(folder), str(folder / "data" / "train.json"), config, params, False)
    assert "token_type_ids" in batch and "pixel_values" in batch
    torch.manual_seed(0)
    source = cls(config).float()
    ref_logits, ref_loss = model_parity.run_forward(source, batch)
    records, problems = model_parity.dropped_outputs(source, batch, ["token_type_ids", "no_such_key"], ref_logits,
                                                     ref_loss, 1e-4, 1e-5)
    assert problems and "token_type_ids" in problems[0], (records, problems)
    assert records[1] == {"key": "no_such_key", "examined": False, "why_not": "not in the source processor's batch"}
    # an all-ones attention mask carries nothing the forward needs: dropping it changes nothing
    records, problems = model_parity.dropped_outputs(source, batch, ["attention_mask"], ref_logits, ref_loss,
                                                     1e-4, 1e-5)
    assert problems == [] and records[0]["examined"] and records[0]["max_abs_dlogit"] <= 1e-4, records
