"""The five held-out faults that passed every gate, each reproduced and caught by the check of the gate that owns
what it breaks (faults/heldout.py): the collator padding labels with a token id and an mm_plugin that converts images
to grayscale (G2, against the source's own processing), ``attn_implementation`` the runtime cannot run and a launch
script asking for 0 processes (G3, against what G0's probe found), a tiny open-file limit (G0, as a rank sees it).
The checks are the gates' own functions on the fault's real edit or runtime; nothing here names a fault's message."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

import msmigrate
from msmigrate.agent.host_limits import limit_problems
from msmigrate.agent.launch_size import launch_size_findings
from msmigrate.agent.routes.fsdp2.attention_choice import launch_host_attention, attention_findings, choose_attention
from msmigrate.testbeds.faults import Layout, all_faults, apply, wrap_runtime
from msmigrate.tools.runtime import run_probe

FAULTS = {f.id: f for f in all_faults()}
PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"
sys.path.insert(0, str(PROBES))  # the probes import their siblings, as they do in the target runtime
spec = importlib.util.spec_from_file_location("batch_parity_probe", PROBES / "_batch_parity.py")
bp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bp)


def _layout(root: Path) -> Layout:
    return Layout(root=root, plugin="p", modeling="p/m.py", config="cfg.yaml", launch="l.sh",
                  data=root / "train.json")


@pytest.fixture(scope="module")
def runtime():
    """This interpreter's env probe result: the device G0 finds here (cpu) and what it can run."""
    res = run_probe(sys.executable, "env_probe", [], timeout=120)
    assert res.ok, res.error
    return res.data["result"]


def test_g3_rejects_an_attention_implementation_the_launch_host_cannot_run(tmp_path, runtime):
    """On a host with an accelerator (the user's training host) G3 rejects an implementation its runtime cannot run.
    On this CPU-only host it does not: the gates run here, the delivered script trains on the user's NPU, where the
    example's flash attention is the right choice (the gates' CPU launches replace it)."""
    fault = FAULTS["ho-config-attn-impl-unavailable"]
    (tmp_path / "cfg.yaml").write_text("model:\n  model_id: x\n  attn_implementation: sdpa\n")
    assert runtime["attention"]["sdpa"] and not runtime["attention"]["flash_attention_2"]  # (no flash-attn on CPU)
    accelerator = {**runtime, "device": "cuda"}  # a CUDA host without the flash-attn package
    assert attention_findings(json.loads(json.dumps({"model": {"attn_implementation": "sdpa"}})), {}, {},
                              accelerator) == []
    apply(fault, _layout(tmp_path))
    import yaml

    cfg = yaml.safe_load((tmp_path / "cfg.yaml").read_text())
    findings = attention_findings(cfg, {}, {}, accelerator)
    assert [f["code"] for f in findings] == ["attn-unavailable"]
    assert any(w in findings[0]["path"] + findings[0]["message"] for w in fault.fix)
    assert runtime["device"] == "cpu" and attention_findings(cfg, {}, {}, runtime) == []
    # the draft never asks for it on such a host, keeps it where the runtime has it, and on a CPU-only host
    assert choose_attention({}, {}, "flash_attention_2", launch_host_attention(accelerator))[0] == "sdpa"
    assert choose_attention({}, {}, "flash_attention_2", {**runtime["attention"], "flash_attention_2": True}) == \
        ("flash_attention_2", None)
    assert choose_attention({}, {}, "flash_attention_2", launch_host_attention(runtime)) == ("flash_attention_2", None)


def test_g3_rejects_a_launch_script_that_starts_no_rank(tmp_path):
    fault = FAULTS["ho-config-launch-no-devices"]
    script = ("#!/bin/bash\nNPUS_PER_NODE=${NPUS_PER_NODE:-2}\nNNODES=${NNODES:-1}\n"
              "torchrun --nproc_per_node $NPUS_PER_NODE --nnodes $NNODES trainer.py cfg.yaml\n")
    (tmp_path / "l.sh").write_text(script)
    cpu = {"npu_count": 0, "cuda": {"count": 0}}
    assert launch_size_findings(script, cpu, "l.sh") == []
    apply(fault, _layout(tmp_path))
    found = launch_size_findings((tmp_path / "l.sh").read_text(), cpu, "l.sh")
    assert [f["code"] for f in found] == ["launch-size"] and "NPUS_PER_NODE" in found[0]["message"]
    # more processes than the accelerators G0 found is the same finding
    assert launch_size_findings(script.replace(":-2", ":-16"), {"npu_count": 8}, "l.sh")[0]["value"] == 16


def test_g0_reads_the_open_file_limit_a_trainer_rank_gets(tmp_path, runtime):
    assert limit_problems(runtime) == []  # this host's limit
    fault = FAULTS["ho-env-open-files-limit"]
    python = wrap_runtime(fault.runtime, sys.executable, tmp_path / "rt")
    res = run_probe(python, "env_probe", ["--runtime-python", python], timeout=120)
    assert res.ok, res.error
    problems = limit_problems(res.data["result"])
    assert len(problems) == 1 and any(w in problems[0] for w in fault.fix), problems
    # a plain process of the same runtime does not see it: only a rank's view does
    out = subprocess.run([python, "-c", "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"],
                         capture_output=True, text=True, timeout=60)
    assert int(out.stdout) >= 1024


def _rows(examples, label_pad):
    """A right-padding collation of ``examples`` with ``label_pad`` in the labels (the collator's own shape)."""
    longest = max(len(e["input_ids"]) for e in examples)
    ids = [e["input_ids"] + [0] * (longest - len(e["input_ids"])) for e in examples]
    labels = [e["labels"] + [label_pad] * (longest - len(e["labels"])) for e in examples]
    return {"input_ids": torch.tensor(ids), "labels": torch.tensor(labels)}


def test_g2_finds_padding_that_trains_in_the_collated_batch():
    examples = [{"input_ids": [5, 6, 7, 8, 9], "labels": [-100, -100, 7, 8, 9]},
                {"input_ids": [5, 6, 7], "labels": [-100, -100, 7]}]
    assert bp.collation_parity(examples, _rows(examples, -100))["problems"] == []
    problems = bp.collation_parity(examples, _rows(examples, 0))["problems"]
    assert len(problems) == 1 and "row 1: 2 of the 2 positions" in problems[0] and "label_pad_token_id" in problems[0]
    moved = _rows(examples, -100)
    moved["labels"][0, 2] = -100  # the collator masks a trained answer token
    assert "changed 1 of example 0's labels" in bp.collation_parity(examples, moved)["problems"][0]
    # given the collator that made the batch, each problem names it by its defining file (the classify node's
    # gate-remedy rule places the cause there): a changed label, and rows whose input ids were rewritten
    named = bp.collation_parity(examples, moved, collate_fn=_Collator(None, "RGB"))["problems"][0]
    assert "the collator _Collator (defined in " in named and "test_heldout_faults_caught.py)" in named
    rewritten = {**moved, "input_ids": moved["input_ids"] * 0 + 3}
    assert "(the collator _Collator (defined in " in bp.collation_parity(examples, rewritten, _Collator(None, "RGB"))[
        "problems"][0]


def test_g2_lets_a_collator_re_mark_media_positions_but_not_text():
    """Phi-3-V's processor numbers each image's positions -1, -2, ...; a collator that writes that marking over the
    mapped media token holds the example (the forward replaces those positions by vision features). A text position
    rewritten is still the collator's fault, and without the media id nothing is let through."""
    examples = [{"input_ids": [5, 2, 2, 2, 9], "labels": [-100, -100, -100, -100, 9]},
                {"input_ids": [5, 2, 2, 7], "labels": [-100, -100, -100, 7]}]
    remarked = _rows(examples, -100)
    remarked["input_ids"][0, 1:4] = -1
    remarked["input_ids"][1, 1:3] = -1
    result = bp.collation_parity(examples, remarked, media_id=2)
    assert result["problems"] == [] and result["compared"] == 2 and result["media_positions_remarked"] == 5
    assert "row 0 of the collated batch does not hold" in bp.collation_parity(examples, remarked)["problems"][0]
    remarked["input_ids"][1, 0] = -1  # a text position
    assert [p[:6] for p in bp.collation_parity(examples, remarked, media_id=2)["problems"]] == ["row 1 "]


@pytest.fixture(scope="module")
def qwen2_vl(tmp_path_factory):
    from msmigrate.testbeds.fixtures import build_source

    return build_source("qwen2_vl", tmp_path_factory.mktemp("bp") / "qwen2_vl")


class _Collator:
    """The collate step of an mm_plugin: open each example's image in ``mode``, the processor's image processor."""

    def __init__(self, processor, mode):
        self.processor, self.mode = processor, mode

    def __call__(self, examples):
        images = [Image.open(p).convert(self.mode) for e in examples for p in e["images"]]
        return dict(self.processor.image_processor(images, return_tensors="pt"))


def test_g2_compares_pixel_values_with_the_source_processor_on_a_colour_probe(qwen2_vl):
    from _processor import load_processor

    proc = load_processor(str(qwen2_vl), False)[0]
    data = qwen2_vl / "data" / "train.json"
    sample = json.loads(data.read_text())[0]
    examples = [{"images": [str(qwen2_vl / "data" / p) for p in sample["images"]]}]
    right = bp.media_input_parity(str(qwen2_vl), str(data), examples, _Collator(proc, "RGB"))
    assert right["problems"] == [] and right["figures"]["colour_probe"]["pixel_values"]["comparable"]
    gray = bp.media_input_parity(str(qwen2_vl), str(data), examples, _Collator(proc, "L"))
    assert any("colour probe" in p and "pixel_values" in p for p in gray["problems"]), gray


class _FixedSize(_Collator):
    """An mm_plugin that resizes every image to one size before the processor (a CLIP-style habit)."""

    def __call__(self, examples):
        images = [Image.open(p).convert("RGB").resize((224, 224)) for e in examples for p in e["images"]]
        return dict(self.processor.image_processor(images, return_tensors="pt"))


def test_g2_finds_an_mm_plugin_that_resizes_to_one_size_on_an_image_of_another_aspect(qwen2_vl):
    """The sample's own size and a smooth image hide a fixed resize (the processor's pixel limit brings both to
    the same grid); the source processor keeps an image's aspect ratio, so at twice the aspect its grid differs."""
    from _processor import load_processor

    proc = load_processor(str(qwen2_vl), False)[0]
    data = qwen2_vl / "data" / "train.json"
    sample = json.loads(data.read_text())[0]
    examples = [{"images": [str(qwen2_vl / "data" / p) for p in sample["images"]]}]
    right = bp.media_input_parity(str(qwen2_vl), str(data), examples, _Collator(proc, "RGB"))
    assert right["figures"]["aspect_probe"]["image_grid_thw"]["equal"] and right["problems"] == []
    fixed = bp.media_input_parity(str(qwen2_vl), str(data), examples, _FixedSize(proc, "RGB"))
    assert not any("colour probe" in p for p in fixed["problems"])  # the smooth probe at the sample's size hides it
    assert any("twice its aspect ratio" in p and "image_grid_thw" in p for p in fixed["problems"]), fixed
    assert bp.aspect_size((64, 48)) == (91, 34) and bp.aspect_size((30, 30)) is None


def test_the_rules_config_repair_sizes_a_rejected_launch_script_again(tmp_path):
    from types import SimpleNamespace

    from msmigrate.agent.routes.fsdp2.rules.config import _resized_script

    fault = FAULTS["ho-config-launch-no-devices"]
    (tmp_path / "l.sh").write_text("NPUS_PER_NODE=${NPUS_PER_NODE:-2}\nNNODES=${NNODES:-1}\n"
                                   "torchrun --nproc_per_node $NPUS_PER_NODE trainer.py cfg.yaml\n")
    apply(fault, _layout(tmp_path))
    plan = {"script_path": "l.sh", "launch_size": {"nproc_per_node": 2, "nnodes": 1, "why": "the gate's ranks"}}
    view = SimpleNamespace(ctx=SimpleNamespace(target=tmp_path),
                           state={"plan": plan, "gate_history": [{"gate": "G3", "finding_codes": ["launch-size"]}]})
    fixed = _resized_script(view)
    assert "NPUS_PER_NODE=${NPUS_PER_NODE:-2}" in fixed and launch_size_findings(fixed, {}, "l.sh") == []
    view.state["gate_history"] = [{"gate": "G3", "finding_codes": ["value-out-of-range"]}]
    assert _resized_script(view) is None  # only a size G3 rejected is re-sized


def test_the_rules_config_repair_sets_back_registry_ids_and_drops_a_misspelt_copy_of_a_set_key():
    from msmigrate.agent.routes.fsdp2.rules.autofix import apply_failure

    cfg = {"training": {"micro_batch_size": 1, "micro_batch_szie": 2}, "model": {"model_id": "qwen2_vll"}}
    draft = {"training": {"micro_batch_size": 1}, "model": {"model_id": "qwen2_vl"}}
    findings = [{"severity": "error", "code": "unknown-key", "path": "training.micro_batch_szie",
                 "suggestion": "did you mean `training.micro_batch_size`?"},
                {"severity": "error", "code": "model-id-unregistered", "path": "model.model_id",
                 "suggestion": "did you mean `qwen2_vl` or `qwen3_vl`?"}]
    done = apply_failure(cfg, {"case_id": "yaml-unknown-key"}, findings, {}, reference=draft)
    assert cfg == draft and len(done) == 2
    # a registry id the draft does not set is never deleted (the key is required)
    cfg = {"model": {"model_id": "qwen2_vll"}}
    assert apply_failure(cfg, {"case_id": "x"}, findings[1:], {}, reference={}) == [] and cfg["model"]["model_id"]


def test_the_rules_config_repair_sets_back_a_value_of_the_wrong_type_or_dtype():
    from msmigrate.agent.routes.fsdp2.rules.autofix import apply_failure

    cfg = {"training": {"lr": "1e-5 (tuned)"}, "parallel": {"fsdp_plan": {"param_dtype": "bfloat"}}}
    draft = {"training": {"lr": 1e-5}, "parallel": {"fsdp_plan": {"param_dtype": "bf16"}}}
    findings = [{"severity": "error", "code": "type-mismatch", "path": "training.lr"},
                {"severity": "error", "code": "bad-dtype", "path": "parallel.fsdp_plan.param_dtype"}]
    assert len(apply_failure(cfg, {"case_id": "config-bad-type"}, findings, {}, reference=draft)) == 2
    assert cfg == draft


def test_g0_records_the_communication_variables_a_rank_gets(tmp_path):
    fault = FAULTS["env-gloo-interface"]
    python = wrap_runtime(fault.runtime, sys.executable, tmp_path / "rt")
    res = run_probe(python, "env_probe", ["--runtime-python", python], timeout=120)
    assert res.ok, res.error
    assert res.data["result"]["comm_env"] == fault.runtime.env  # what the classify node names the value by
