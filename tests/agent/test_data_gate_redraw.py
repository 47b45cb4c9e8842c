"""G2 fails where the data check's second draw (tools/probes/_redraw.py) finds a sample its collation changed in the
dataset, and the message places the cause in the dataset's file (data phase). The probe is faked here (its own test:
tests/tools/test_redraw_probe.py); what is tested is that its finding fails the gate and where it routes."""

from __future__ import annotations

from types import SimpleNamespace

from msmigrate.agent.routes.fsdp2.gates import data_gate
from msmigrate.core.tool_result import ToolResult
from msmigrate.knowledge.failure_context import Artifacts, gate_remedy_owner

DATASET_FILE = "mindspeed_mm/fsdp/data/datasets/internvl_chat/internvl_chat_dataset.py"
FOUND = ("sample 0 read from the dataset again after its batch was collated is not the sample read before (keys "
         "gone: images; 2 of 2 samples drawn): the collator DataCollatorForInternVLChat (defined in "
         "mindspeed_mm/fsdp/data/dataloader/data_collator.py) (or the one it calls) changes the samples it is handed, "
         f"and the dataset ListDataset (defined in {DATASET_FILE}) hands out the objects it keeps rather than new "
         "ones, so the change stays in the dataset. The trainer's data iterator is cyclic: ...")


def gate_with(monkeypatch, tmp_path, redraw):
    parity = {"status": "pass", "problems": [], "samples_compared": 1, "trained": 3, "masked": 9, "tokens": 12}
    monkeypatch.setattr(data_gate, "config_for_data", lambda deps, state: tmp_path / "cfg.yaml")
    monkeypatch.setattr(data_gate, "data_check", lambda *a, **k: ToolResult(ok=True, data={"result": {
        "num_samples": 16, "batch_keys": {"input_ids": [1, 12]}, "batch_file": str(tmp_path / "batch.pt"),
        "parity": parity, "redraw": redraw}}))
    monkeypatch.setattr(data_gate, "forward_check", lambda *a, **k: ToolResult(ok=True, data={"result": {
        "loss": 6.2, "finite": True}}))
    deps = SimpleNamespace(ctx=SimpleNamespace(data_path=tmp_path / "train.json", target=tmp_path, source=tmp_path),
                           spec=None)
    plan = {"route": "custom", "plugin_dir": "mindspeed_mm/fsdp/models/x", "model_id": "x", "dataset_type": "x",
            "template": "x", "collator": "x"}
    return data_gate.gate_data(deps, {"plan": plan, "gates": {"G1": {"passed": True, "parity": {}}}})


def test_a_sample_the_collation_changed_fails_g2_and_routes_to_the_dataset(monkeypatch, tmp_path):
    record = gate_with(monkeypatch, tmp_path, {"samples": 2, "changed": [{"sample": 0, "change": "keys gone: images"}],
                                               "unstable_keys": [], "problems": [FOUND]})
    assert not record["passed"] and FOUND in record["summary"] and FOUND in record["failure_text"]
    assert record["evidence"][0]["metrics"]["redraw"]["changed"][0]["sample"] == 0
    arts = Artifacts(data=(DATASET_FILE, "mindspeed_mm/fsdp/data/dataloader/data_collator.py"))
    assert gate_remedy_owner(FOUND, arts).owner == "data"


def test_samples_that_read_the_same_after_collation_pass(monkeypatch, tmp_path):
    clean = {"samples": 2, "changed": [], "unstable_keys": [], "problems": []}
    assert gate_with(monkeypatch, tmp_path, clean)["passed"]
    assert gate_with(monkeypatch, tmp_path, None)["passed"]  # a target whose probe predates the check
