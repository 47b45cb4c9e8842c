"""G2's tail step: when G1's model parity could not feed the source's forward (it requires media a bare-tokenizer
source's synthetic batch lacks, e.g. internvl_chat's positional ``pixel_values``), G2 runs the same model parity on
its own collated batch, after its data checks, so a plugin init/forward bug fails G2 as a model-parity failure (owner
model) before any training launch. The probes are faked here (their real runs: the recorded internvl_chat replay in
test_llm_recorded_http.py); what is tested is when the re-run happens, on which batch, and where its record goes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from msmigrate.agent.routes.fsdp2.gates import data_gate
from msmigrate.core.tool_result import ToolResult
from msmigrate.knowledge.classifier import classify

NOT_FED = {"status": "not_comparable", "unfed": ["pixel_values"],
           "why_not": "the source's own forward requires ['pixel_values'], which the synthetic batch does not carry"}
NO_LABELS = {"status": "not_comparable", "unfed": None,
             "why_not": "the source's own forward takes no labels (its contract differs from transformers')"}
META_FAIL = ["meta init + load: max |Δlogit| inf (tol 0.0001), |Δloss| inf (tol 1e-05) against the source class"]


@pytest.fixture()
def gate(monkeypatch, tmp_path):
    calls: list[dict] = []
    parity = {"status": "pass", "problems": [], "samples_compared": 1, "trained": 3, "masked": 9, "tokens": 12}
    monkeypatch.setattr(data_gate, "config_for_data", lambda deps, state: tmp_path / "cfg.yaml")
    monkeypatch.setattr(data_gate, "data_check", lambda *a, **k: ToolResult(ok=True, data={"result": {
        "num_samples": 2, "batch_keys": {"input_ids": [1, 12], "pixel_values": [1, 3, 28, 28]},
        "batch_file": str(tmp_path / "batch.pt"), "parity": parity}}))
    monkeypatch.setattr(data_gate, "forward_check", lambda *a, **k: ToolResult(ok=True, data={"result": {
        "loss": 6.2, "finite": True}}))

    def fake_parity(deps, state, batch_file=None, media_token_id=None):
        calls.append({"batch_file": batch_file})
        problems = list(state.get("_probe_problems", []))
        record = {"status": "fail" if problems else "pass", "problems": problems, "eager": {}, "meta": {},
                  "batch_source": "target pipeline (G2's collated batch)"}
        return {"label": "model parity on the collated batch", "log_excerpt": "", "metrics": record}, \
            [f"model parity: {p}" for p in problems], record

    monkeypatch.setattr(data_gate, "model_parity_check", fake_parity)
    deps = SimpleNamespace(ctx=SimpleNamespace(data_path=tmp_path / "train.json", target=tmp_path, source=tmp_path),
                           spec=None)
    plan = {"route": "custom", "plugin_dir": "mindspeed_mm/fsdp/models/x", "model_id": "x", "dataset_type": "x",
            "template": "x", "collator": "x"}

    def run(g1_model, probe_problems=()):
        state = {"plan": plan, "gates": {"G1": {"passed": True, "parity": {"model": g1_model}}},
                 "_probe_problems": list(probe_problems)}
        return data_gate.gate_data(deps, state)

    return run, calls, tmp_path


def test_g1_not_comparable_for_want_of_media_reruns_on_the_collated_batch(gate):
    run, calls, tmp = gate
    record = run(NOT_FED)
    assert record["passed"] and calls == [{"batch_file": str(tmp / "batch.pt")}]
    assert set(record["parity"]) == {"data", "model"} and record["parity"]["model"]["status"] == "pass"
    # the re-run comes after G2's own checks, last in its evidence, and the summary says why it ran
    assert record["evidence"][-1]["label"] == "model parity on the collated batch"
    assert "model parity on this batch (G1's was not comparable)" in record["summary"]


def test_a_plugin_bug_the_rerun_finds_fails_g2_routed_to_the_model_phase(gate):
    run, _, _ = gate
    record = run(NOT_FED, META_FAIL)
    assert not record["passed"] and record["parity"]["model"]["status"] == "fail"
    verdict = [p for p in record["summary"].split("; ") if "parity" in p]
    found = classify(record["failure_text"], gate_verdict=verdict)
    assert (found.case_id, found.owner) == ("parity-meta-init-differs", "model"), found


@pytest.mark.parametrize("g1_model", [{"status": "pass", "problems": []}, NO_LABELS, None],
                         ids=["G1 compared", "no labels in the source forward", "no G1 record"])
def test_no_rerun_when_g1_compared_or_the_batch_cannot_help(gate, g1_model):
    run, calls, _ = gate
    record = run(g1_model)
    assert record["passed"] and calls == [] and "model" not in record["parity"]


def test_a_batch_the_plugin_rejects_is_given_to_the_source_and_its_verdict_routes_to_the_plugin(gate, monkeypatch):
    """The source is the oracle for a rejected batch: its own model takes it, so what rejects it is the plugin (an
    image/feature mismatch that the message alone would lay at the data path's door)."""
    from msmigrate.knowledge.failure_context import Artifacts, gate_remedy_owner

    run, calls, tmp = gate
    mismatch = "ValueError: Image features and image tokens do not match, tokens: 8, features: 4"
    monkeypatch.setattr(data_gate, "forward_check", lambda *a, **k: ToolResult.failure(mismatch, result={}))
    rejects = ("the source's own model takes the target pipeline's collated batch (loss 2.5) and the plugin's forward "
               f"(defined in mindspeed_mm/fsdp/models/x/modeling_x.py) rejects it: {mismatch}")
    record = run({"status": "pass", "problems": []}, [rejects])
    assert not record["passed"] and calls == [{"batch_file": str(tmp / "batch.pt")}]
    assert f"model parity: {rejects}" in record["summary"]
    art = Artifacts(model=("mindspeed_mm/fsdp/models/x",), data=("mindspeed_mm/fsdp/data",))
    assert gate_remedy_owner(record["summary"], art).owner == "model"
    # the source rejects it too (a parity run that says nothing of the plugin): nothing added, the data path's
    calls.clear()
    record = run({"status": "pass", "problems": []}, ["the source's own forward fails on the target pipeline's batch"])
    assert calls and "rejects it" not in record["summary"]


def test_a_g1_forward_the_plugin_fails_asks_the_source_on_the_same_batch(monkeypatch, tmp_path):
    """G1's forward smoke fails: the source's own model runs on the same source batch, and a rejection only the plugin
    makes is named with the plugin's forward file (routed to the model phase by that file)."""
    from msmigrate.agent.routes.fsdp2.gates import model_gate

    monkeypatch.setattr(model_gate, "module_tree", lambda *a, **k: ToolResult(ok=True, data={"result": {"modules": 3}}))
    monkeypatch.setattr(model_gate, "forward_check", lambda *a, **k: ToolResult.failure("RuntimeError: split sizes"))
    monkeypatch.setattr(model_gate, "fresh_untrained", lambda ctx, plan: False)
    said = ("the source's own model takes the same batch (source processor; loss 2.5) and the plugin's forward "
            "(defined in mindspeed_mm/fsdp/models/x/modeling_x.py) rejects it: RuntimeError: split sizes")
    asked = []

    def parity(deps, state, **kw):
        asked.append(kw)
        return {"label": "model parity", "log_excerpt": "", "metrics": {}}, [f"model parity: {said}"], {}

    monkeypatch.setattr(model_gate, "model_parity_check", parity)
    deps = SimpleNamespace(ctx=SimpleNamespace(data_path=tmp_path / "train.json", target=tmp_path, source=tmp_path),
                           spec=None)
    plan = {"route": "native", "plugin_dir": "mindspeed_mm/fsdp/models/x", "model_id": "x"}
    record = model_gate.gate_model(deps, {"plan": plan, "gates": {}})
    assert not record["passed"] and asked == [{}]
    assert record["summary"].startswith("forward smoke failed: RuntimeError: split sizes; model parity: the source's")
