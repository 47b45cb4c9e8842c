"""Parity gates against the source's own code, and the mutations they must catch.

One real migration (rules policy, real probes, G0–G3; the code approved, the launch rejected) gives a
migrated stand-in target whose G1/G2 parity records must pass with figures. Then each test copies that target,
breaks one thing the way a migration could, and runs the gate itself (``gate_model`` / ``gate_data``) on the copy:
the gate must fail, and the failure classifier must name the parity case with its owner phase. Every parity check is
a probe in the target runtime (forked from the warm runtime), ~1–2 min on 2 cores for the module. The training
parity mutations (G4): tests/agent/test_training_parity.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from standin_migration import copy_at_head, edit, migrate_qwen2_vl

from msmigrate.agent.routes.fsdp2.gates import gate_data, gate_model
from msmigrate.knowledge.classifier import classify

pytestmark = pytest.mark.integration

PLUGIN = "mindspeed_mm/fsdp/models/qwen2_vl/modeling_qwen2_vl.py"
TEMPLATE = "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py"
MM_PLUGIN = "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    return migrate_qwen2_vl(tmp_path_factory.mktemp("parity"), {"gate_train_iters": 5})


_copy, _edit = copy_at_head, edit


def test_clean_migration_has_parity_figures(migrated):
    g1 = migrated["state"]["gates"]["G1"]["parity"]["model"]
    assert g1["status"] == "pass", g1["problems"]
    for path in ("eager", "meta"):
        assert g1[path]["max_abs_dlogit"] <= 1e-4 and g1[path]["dloss"] <= 1e-5
    assert g1["batch_source"] == "source processor" and g1["nonpersistent_buffers"]
    g2 = migrated["state"]["gates"]["G2"]["parity"]["data"]
    assert g2["status"] == "pass", g2["problems"]
    assert g2["prompt_match"] and g2["samples_compared"] == 2 and g2["media_trained"] == 0
    assert g2["trained"] > 0 and g2["masked"] > g2["media_tokens"] > 0
    assert g2["media_tokens"] == g2["source_media_tokens"] == g2["vision_features"] == g2["batch_media_tokens"]
    assert g2["trained"] + g2["masked"] == g2["tokens"]
    # the decoded sample marks exactly the answer (and its turn end) as trained
    assert re.search(r"assistant\n⟦[^⟦⟧]+<\|im_end\|>\n?⟧", g2["decoded_sample"]), g2["decoded_sample"]
    assert "⟦" not in g2["decoded_sample"].split("assistant\n")[0]


def _no_system(target: Path) -> None:
    _edit(target / TEMPLATE, 'default_system="You are a helpful assistant.",', "default_system=None,")


def _train_prompt(target: Path) -> None:
    cfg_path = next((target / "examples" / "qwen2_vl").glob("*.yaml"))
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["data"]["dataset_param"]["basic_parameters"]["train_on_prompt"] = True
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))


def _one_token_short(target: Path) -> None:
    _edit(target / MM_PLUGIN, "int(grids[used].prod()) // merge", "int(grids[used].prod()) // merge - 1")


def _rms_norm_eps(target: Path) -> None:
    path = target / PLUGIN
    path.write_text(path.read_text() + "\n    def __init__(self, config):\n"
                    "        config.text_config.rms_norm_eps = 1e-2  # a 'vendored' default that differs\n"
                    "        super().__init__(config)\n")


@pytest.mark.parametrize("name, mutate, gate, case, owner", [
    ("no_system_turn", _no_system, gate_data, "parity-prompt-ids-differ", "data"),
    ("labels_not_masked", _train_prompt, gate_data, "parity-labels-train-prompt", "data"),
    ("one_image_token_short", _one_token_short, gate_data, "parity-media-token-count", "data"),
    ("rms_norm_eps", _rms_norm_eps, gate_model, "parity-logits-differ", "model"),
])
def test_parity_gate_catches_mutation(migrated, name, mutate, gate, case, owner):
    deps, state = _copy(migrated, name)
    mutate(deps.ctx.target)
    record = gate(deps, state)
    assert not record["passed"], record["summary"]
    kind = "model" if gate is gate_model else "data"
    assert record["parity"][kind]["status"] == "fail"
    verdict = [p for p in record["summary"].split("; ") if "parity" in p]
    assert verdict, record["summary"]
    found = classify(record["failure_text"], gate_verdict=verdict)
    assert (found.case_id, found.owner) == (case, owner), (found, verdict)


def test_plugin_without_a_to_empty_override_passes_g1_as_on_the_real_trainer(migrated):
    """The generated plugin has no ``to_empty`` override: the trainer never calls one. Like the real MindSpeed-MM
    (``fsdp/utils/utils.py`` ``to_empty_if_needed``: ``model._apply``, fresh storage for parameters only; ModelHub
    builds under accelerate's ``init_empty_weights``, so buffers are computed for real), the stand-in keeps every
    buffer's ``__init__`` value, and G1's fresh and resumed-load paths both pass: the rotary ``inv_freq`` needs no
    rebuild there. (Until the stand-in copied that, such a plugin failed G1 with a NaN ``inv_freq`` that the real
    trainer would never have produced. A buffer that is non-finite after the meta paths is still named and routed to
    the model phase: tests/agent/test_meta_path_diagnosis.py.)"""
    deps, state = _copy(migrated, "no_buffer_reinit")
    assert "def to_empty" not in (deps.ctx.target / PLUGIN).read_text()
    record = gate_model(deps, state)
    assert record["passed"], record["summary"]
    assert "not finite" not in record["summary"] and "forward smoke failed" not in record["summary"]
    assert record["parity"]["model"]["status"] == "pass", record["parity"]
