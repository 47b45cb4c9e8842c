"""The model parity probe on a source whose forward requires media: InternVL-chat's remote code takes
``pixel_values`` as a required positional argument, so the text-only synthetic batch cannot call it. The probe
must say "not comparable" with the missing inputs named (it raised a TypeError, which failed G1 on every attempt of
a live LLM run whatever the plugin did)."""

from __future__ import annotations

import importlib.util
import sys

from msmigrate.tools.runtime import PROBES_DIR


def load_probe():
    sys.path.insert(0, str(PROBES_DIR))  # the probe imports its siblings (_model_build) as top-level modules
    try:
        spec = importlib.util.spec_from_file_location("model_parity_probe", PROBES_DIR / "model_parity.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(PROBES_DIR))


def test_required_inputs_the_batch_lacks_are_named(tmp_path):
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    from msmigrate.testbeds.fixtures import build_source

    probe = load_probe()
    folder = build_source("internvl_chat", tmp_path / "internvl_chat")
    cls = get_class_from_dynamic_module("modeling_internvl_chat.InternVLChatModel", str(folder))
    text_batch = {"input_ids": 0, "attention_mask": 0, "labels": 0}
    assert probe.required_params(cls, text_batch) == ["pixel_values"]
    assert probe.required_params(cls, {**text_batch, "pixel_values": 0}) == []

    class KeywordOnly:  # keyword-only without default counts; defaults and catch-alls do not
        def forward(self, input_ids, *args, image=None, grid, **kwargs):
            pass

    assert probe.required_params(KeywordOnly, {"input_ids": 0}) == ["grid"]


def test_a_not_comparable_record_says_why_in_the_gate_summary():
    from msmigrate.agent.routes.fsdp2.gates.parity import parity_summary

    record = {"status": "not_comparable", "why_not": "the source's own forward requires ['pixel_values']",
              "eager": {"max_abs_dlogit": None, "dloss": None}, "meta": {}}
    assert parity_summary(record) == "not comparable: the source's own forward requires ['pixel_values']"
    passed = {"status": "pass", "eager": {"max_abs_dlogit": 0.0, "dloss": 0.0}, "meta": {"max_abs_dlogit": 0.0,
                                                                                        "dloss": 0.0}}
    assert parity_summary(passed).startswith("pass: max|Δlogit| 0.00e+00")
