"""The forward probe's meta-init failures (fresh init without training.load vs resumed load) classify to the case of
what was left unset, and the diagnosis says which path left which tensor non-finite (blind live run 10: the model
phase only ever saw the load path, and G4's fresh path failed with NaN)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from msmigrate.agent.nodes.classify import meta_path_said
from msmigrate.knowledge.classifier import classify

PROBES = Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "probes"


@pytest.fixture(scope="module")
def probe():
    sys.path.insert(0, str(PROBES))
    try:
        yield importlib.import_module("forward_smoke")
    finally:
        sys.path.remove(str(PROBES))


def _failed(kind, name):
    return {"materialize": "Module.to_empty", "loss": float("nan"), "finite": False, "nonfinite": [f"{kind} `{name}`"],
            "first_nonfinite": name, "first_nonfinite_kind": kind}


def test_fresh_path_parameter_is_the_uninitialised_parameter_case_and_the_diagnosis_names_the_path(probe):
    error = probe.meta_path_error("fresh", _failed("parameter", "vision_model.embeddings.class_embedding"))
    summary = f"forward smoke failed: {error}"
    found = classify(summary, gate_verdict=[summary])
    assert (found.case_id, found.owner) == ("meta-init-uninitialised-parameter", "model"), found
    said = meta_path_said(summary)
    assert "parameter `vision_model.embeddings.class_embedding` is not finite after to_empty + init_weights" in said
    assert "fresh path without training.load" in said and "init_weights did not write it" in said
    assert "resumed-load" not in said


def test_resumed_load_buffer_is_the_nonpersistent_case_and_both_paths_are_named_when_both_fail(probe):
    load = probe.meta_path_error("load", _failed("non-persistent buffer", "model.rotary_emb.inv_freq"))
    found = classify(f"forward smoke failed: {load}", gate_verdict=[load])
    assert (found.case_id, found.owner) == ("meta-init-nonpersistent-buffers", "model"), found
    both = "; ".join([probe.meta_path_error("fresh", _failed("parameter", "extra.ls1")), load])
    said = meta_path_said(both)
    assert said.index("`extra.ls1`") < said.index("fresh path") < said.index("`model.rotary_emb.inv_freq`")
    assert "the checkpoint does not restore it" in said


def test_no_meta_path_named_adds_nothing():
    assert meta_path_said("forward smoke failed: loss is not finite: nan") == ""
