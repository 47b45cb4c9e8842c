"""HF weights out (G4): the checkpoint G4's launch saves is exported to a Hugging Face folder, loaded into the SOURCE
class and compared with the trained target model. The integration test runs G4 itself (the real single-process
launch of the stand-in's trainer, its DCP save, training parity, the export probe) on a green rules migration."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from standin_migration import copy_at_head, migrate_qwen2_vl

from msmigrate.agent.routes.fsdp2.gates import training
from msmigrate.tools.runtime import PROBES_DIR


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    return migrate_qwen2_vl(tmp_path_factory.mktemp("hf_export"), {"gate_train_iters": 5, "parity_steps": 4})


@pytest.mark.integration
def test_g4_exports_weights_the_source_class_serves(migrated):
    deps, state = copy_at_head(migrated, "export")
    deps.emit, deps.stop_requested, deps.idle_s = (lambda *a, **k: None), (lambda: False), 0.0
    state["gates"] = {"G2": migrated["state"]["gates"]["G2"]}
    g4 = training.gate_functional(deps, state)
    assert g4["passed"], g4["summary"]
    x = g4["hf_export"]
    assert x["status"] == "pass" and x["exact"] and x["tensors"] > 0 and not x["missing"] and not x["differ"]
    assert x["max_abs_dlogit"] <= 1e-4 and x["dloss"] <= 1e-5
    assert x["converter"].startswith("product:")  # the stand-in ships no DCP → HF converter for this model id
    assert x["checkpoint"].startswith(str(training.g4_checkpoint(deps)))
    out = Path(x["export_dir"])
    assert (out / "config.json").is_file() and list(out.glob("*.safetensors"))
    assert (out / "tokenizer_config.json").is_file()  # the source's non-weight files travel with the weights
    # the export holds the TRAINED weights (5 steps at lr 1e-4), not the source's initial ones
    from safetensors.torch import load_file

    src = {}
    for f in migrated["source"].glob("*.safetensors"):
        src.update(load_file(f))
    exp = {}
    for f in out.glob("*.safetensors"):
        exp.update(load_file(f))
    moved = [k for k in exp if k in src and not (exp[k].float() == src[k].float()).all()]
    assert moved, "the exported weights equal the source's initial weights: not the trained checkpoint"
    assert "HF export pass" in g4["summary"] and any(e["label"].startswith("HF weights out") for e in g4["evidence"])
    from msmigrate.agent.report import render_report

    text = render_report({"gates": {"G4": g4}, "plan": migrated["state"]["plan"]}, "", False)
    assert "HF weights out (G4): pass:" in text and str(out) in text and "bit-exact" in text


def test_export_comparison_names_missing_and_changed_tensors(tmp_path):
    sys.path.insert(0, str(PROBES_DIR))
    try:
        import hf_export
    finally:
        sys.path.remove(str(PROBES_DIR))
    import torch

    state = {"a": torch.ones(2), "b": torch.zeros(3), "c": torch.arange(4.0)}
    exported = {"a": torch.ones(2), "b": torch.zeros(3) + 1e-7}
    assert hf_export.compare_tensors(state, exported) == (["c"], ["b"])  # bit-exact, not close
    for it in (1, 3):
        (tmp_path / f"iter_{it:07d}").mkdir()
        (tmp_path / f"iter_{it:07d}" / ".metadata").write_text(json.dumps(it))
    assert hf_export.newest_dcp(str(tmp_path)).endswith("iter_0000003")
    with pytest.raises(FileNotFoundError):
        hf_export.newest_dcp(str(tmp_path / "iter_0000001" / "none"))


def test_buffers_from_pretrained_left_uninitialised_are_recomputed_and_named():
    """transformers 5 loads on the meta device; a remote-code class whose rotary ``inv_freq`` (non-persistent) is not
    re-initialised by its own init code comes back holding uninitialised memory — the export is not at fault. The
    probe recomputes such buffers from a fresh CPU build and names them; persistent state is never touched."""
    sys.path.insert(0, str(PROBES_DIR))
    try:
        from _meta_init import persistent_keys, restore_computed_buffers
    finally:
        sys.path.remove(str(PROBES_DIR))
    import torch

    class Rotary(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.weight = torch.nn.Parameter(torch.ones(2))
            self.register_buffer("inv_freq", 1.0 / (10.0 ** (torch.arange(0, 4, 2.0) / 4)), persistent=False)
            self.register_buffer("kept", torch.zeros(2))  # persistent: loaded from the checkpoint, never recomputed

    def build(cls, config):
        return cls(config)

    loaded = Rotary(config={"dim": 4})
    with torch.no_grad():
        loaded.inv_freq.copy_(torch.tensor([1.1755e-38, 0.0]))  # what the meta-device load left
        loaded.kept.fill_(7.0)
    assert restore_computed_buffers(loaded, Rotary, build, persistent_keys) == ["inv_freq"]
    assert torch.equal(loaded.inv_freq, Rotary(config={}).inv_freq) and torch.equal(loaded.kept, torch.full((2,), 7.0))
    assert restore_computed_buffers(loaded, Rotary, build, persistent_keys) == []  # already right
