"""G2 checks what its REAL collated batch drops, not only what the plan's contract says it drops: every output the
source's processor makes with an image that the batch lacks, and that G1's dropped-output check did not examine,
must leave the source's loss and logits unchanged on its own batch, or G2 fails (a collator that loses a routed key,
or an output no rule names, would otherwise train another model with every parity check comparing like with like)."""

from __future__ import annotations

from types import SimpleNamespace

from msmigrate.agent.routes.fsdp2.gates import data_gate
from msmigrate.agent.routes.fsdp2.gates.data_gate import unexamined_drops

PLAN = {"media_expansion": {"keys_with_image": ["attention_mask", "input_ids", "pixel_values", "token_type_ids",
                                                "expert_ids"], "media_token_id": 5},
        "data_contract": {"mm_input_keys": ["pixel_values"]},
        "route": "transformers", "plugin_dir": "p", "model_id": "m", "collator": "c"}
G1 = {"dropped_outputs": [{"key": "token_type_ids", "examined": True, "max_abs_dlogit": 0.0, "dloss": 0.0}]}


def keys(*names):
    return {n: {"shape": [1, 4], "dtype": "int64"} for n in names}


def test_only_outputs_the_batch_lacks_and_g1_did_not_examine():
    batch = keys("input_ids", "attention_mask", "labels", "pixel_values")
    assert unexamined_drops(PLAN, batch, G1) == ["expert_ids"]
    assert unexamined_drops(PLAN, batch, None) == ["expert_ids", "token_type_ids"]
    assert unexamined_drops(PLAN, keys("input_ids", "attention_mask", "pixel_values", "token_type_ids",
                                       "expert_ids"), None) == []
    assert unexamined_drops(PLAN, None, G1) == []  # no batch read: nothing measured, nothing claimed


def test_g2_fails_when_an_unexamined_dropped_output_changes_the_source(monkeypatch, tmp_path):
    ok = SimpleNamespace(ok=True, error="", data={"argv": [], "returncode": 0, "result": {
        "num_samples": 2, "batch_keys": keys("input_ids", "attention_mask", "labels", "pixel_values"),
        "batch_file": str(tmp_path / "b.pt"), "parity": {"problems": [], "samples_compared": 2}}})
    fwd = SimpleNamespace(ok=True, error="", data={"argv": [], "returncode": 0, "result": {
        "loss": 6.0, "finite": True, "forward_params": ["input_ids", "attention_mask", "labels", "pixel_values"]}})
    asked = []

    def parity(deps, state, batch_file=None, media_token_id=None, dropped_keys=None):
        asked.append(dropped_keys)
        return ({"label": "x", "log_excerpt": "", "metrics": {}},
                ["processor output 'expert_ids' changes what the source computes"], {"status": "fail"})

    monkeypatch.setattr(data_gate, "config_for_data", lambda deps, state: tmp_path / "c.yaml")
    monkeypatch.setattr(data_gate, "data_check", lambda *a, **k: ok)
    monkeypatch.setattr(data_gate, "forward_check", lambda *a, **k: fwd)
    monkeypatch.setattr(data_gate, "model_parity_check", parity)
    deps = SimpleNamespace(ctx=SimpleNamespace(data_path=tmp_path / "d.json", target=tmp_path, source=tmp_path))
    state = {"plan": PLAN, "gates": {"G1": {"parity": {"model": G1}}}}
    result = data_gate.gate_data(deps, state)
    assert asked == [["expert_ids"]]
    assert not result["passed"] and "expert_ids" in result["summary"] and result["parity"]["dropped"]
