"""Checks written for the heldout3 faults that passed every gate (faults/heldout3.py), each against what the source
or the target states — never a fault's text: a collator that attends padding (G2, against the source's own attention:
a sample's own tokens, never padding), an optimizer / RNG state asked of a folder of HF weights and fp16 parameters on
a bf16 source with no loss scaler in the target's trainer (G3, settings no gate launch exercises). Adam's betas and the
whole-backbone freeze are the validator's (tests/tools/test_yaml_validator.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch

import msmigrate
from msmigrate.agent.routes.fsdp2.gates.source_settings import (optimizer_state_findings, precision_findings,
                                                                trainer_scales_loss)
from msmigrate.testbeds.faults import all_faults

FAULTS = {f.id: f for f in all_faults()}
PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
sys.path.insert(0, str(PROBES))
spec = importlib.util.spec_from_file_location("batch_parity_probe_h3", PROBES / "_batch_parity.py")
bp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bp)

PAD = 0


class _Tok:
    pad_token_id = PAD


class _Collator:
    tokenizer = _Tok()


def _collated(examples, mask_pad):
    longest = max(len(e["input_ids"]) for e in examples)
    pad = [longest - len(e["input_ids"]) for e in examples]
    return {"input_ids": torch.tensor([e["input_ids"] + [PAD] * n for e, n in zip(examples, pad)]),
            "labels": torch.tensor([e["labels"] + [-100] * n for e, n in zip(examples, pad)]),
            "attention_mask": torch.tensor([e["attention_mask"] + [mask_pad] * n for e, n in zip(examples, pad)])}


EXAMPLES = [{"input_ids": [5, 6, 7, 8, 9], "labels": [-100, -100, 7, 8, 9], "attention_mask": [1] * 5},
            {"input_ids": [5, 6, 7], "labels": [-100, -100, 7], "attention_mask": [1] * 3}]


def test_g2_finds_a_collator_that_attends_padding():
    fault = FAULTS["h3-data-collator-attends-padding"]
    assert bp.collation_parity(EXAMPLES, _collated(EXAMPLES, 0), _Collator())["problems"] == []
    problems = bp.collation_parity(EXAMPLES, _collated(EXAMPLES, 1), _Collator())["problems"]
    assert len(problems) == 1 and "row 1: 2 of the 2 padding positions" in problems[0]
    assert any(w in problems[0] for w in ("attention_mask",)) and "attention_mask" in fault.fix
    # an own position the collator masks out is a divergence too
    masked = _collated(EXAMPLES, 0)
    masked["attention_mask"][0, 3] = 0
    assert "changed the attention mask at 1 of example 0's own positions" in \
        bp.collation_parity(EXAMPLES, masked, _Collator())["problems"][0]


def test_g2_finds_padding_input_ids_no_embedding_has_a_row_for():
    """A collator that pads input_ids with the labels' ignore index (-100): the embedding has no row for it. An id
    the example itself holds (a -200 media placeholder of a LLaVA-style pipeline) is not padding: not judged here."""
    class _Sized(_Tok):
        def __len__(self):
            return 16

    class _SizedCollator:
        tokenizer = _Sized()

    batch = _collated(EXAMPLES, 0)
    batch["input_ids"][1, 3:] = -100
    (p,) = bp.collation_parity(EXAMPLES, batch, _SizedCollator())["problems"]
    assert "row 1: 2 of the 2 positions the collator added (padding) hold input id(s) [-100]" in p
    assert "[0, 16)" in p and "the labels' ignore index" in p
    batch["input_ids"][1, 3:] = 99  # past the vocabulary
    assert "a value that is no token id" in bp.collation_parity(EXAMPLES, batch, _SizedCollator())["problems"][0]
    own = [{**EXAMPLES[0], "input_ids": [5, -200, 7, 8, 9]}, EXAMPLES[1]]
    assert bp.collation_parity(own, _collated(own, 0), _SizedCollator())["problems"] == []


def test_g2_does_not_count_a_fake_image_the_collator_adds_as_padding():
    """A collator may append a fake image's tokens (attended or not): they hold media ids, not the pad id."""
    batch = _collated(EXAMPLES, 0)
    batch["input_ids"][1, 3:] = 2
    batch["attention_mask"][1, 3:] = 1
    assert bp.collation_parity(EXAMPLES, batch, _Collator())["problems"] == []


def _hf_folder(path: Path, dtype: str = "bfloat16") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.safetensors").write_bytes(b"")
    (path / "config.json").write_text(json.dumps({"torch_dtype": dtype}))
    return path


def test_g3_names_an_optimizer_state_asked_of_a_weights_folder(tmp_path):
    fault = FAULTS["h3-config-load-optimizer-from-hf"]
    src = _hf_folder(tmp_path / "src")
    good = {"training": {"load": str(src), "load_format": "auto", "no_load_optim": True, "no_load_rng": True}}
    assert optimizer_state_findings(good, good) == []
    bad = {"training": {**good["training"], "no_load_optim": False}}
    # the gates' binding sets the flags on the copy they launch: the delivered YAML's own flags are read
    found = optimizer_state_findings(bad, good)
    assert [f["path"] for f in found] == ["training.no_load_optim"] and fault.fix[0] in found[0]["path"]
    # a trainer checkpoint (not a folder of HF weights) may hold optimizer state
    dcp = {"training": {"load": str(tmp_path / "ckpt"), "load_format": "auto", "no_load_optim": False}}
    assert optimizer_state_findings(dcp, dcp) == []


def test_g3_names_fp16_parameters_on_a_bf16_source_without_a_loss_scaler(tmp_path):
    fault = FAULTS["h3-config-param-dtype-fp16"]
    src = _hf_folder(tmp_path / "src", "bfloat16")
    target = tmp_path / "t"
    (target / "pkg/fsdp/train").mkdir(parents=True)
    (target / "pkg/fsdp/train/trainer.py").write_text("def step(loss):\n    loss.backward()\n")
    entries = ["pkg/fsdp/train/trainer.py"]
    cfg = {"parallel": {"fsdp_plan": {"param_dtype": "fp16"}}}
    assert trainer_scales_loss(target, entries) is False
    found = precision_findings(cfg, src, target, entries)
    assert [f["code"] for f in found] == ["precision-diverges"] and all(w in found[0]["path"] for w in fault.fix)
    assert precision_findings({"parallel": {"fsdp_plan": {"param_dtype": "bf16"}}}, src, target, entries) == []
    # an fp16 source, or a trainer with a loss scaler: fp16 is a supported choice
    assert precision_findings(cfg, _hf_folder(tmp_path / "src16", "float16"), target, entries) == []
    (target / "pkg/fsdp/train/scaler.py").write_text("from torch.amp import GradScaler\n")
    assert precision_findings(cfg, src, target, entries) == []


def test_the_standin_and_real_trainers_have_no_loss_scaler():
    """The premise of the precision check on this route: the stand-in's FSDP trainer package has no loss scaler (the
    real MindSpeed-MM checkout's fsdp package has none either, checked by grep when this was written)."""
    tree = Path(msmigrate.__file__).parent / "testbeds" / "standin" / "tree"
    assert trainer_scales_loss(tree, ["mindspeed_mm/fsdp/train/trainer.py"]) is False
