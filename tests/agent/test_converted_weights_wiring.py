"""Where the plan holds a converted checkpoint (transformers converts the source's at load), the delivered config,
G1's HF load and verify's input binding load it; where it holds none, every one of them loads the source as before
and the plan is left as it was."""

from __future__ import annotations

import json
from types import SimpleNamespace

from msmigrate.agent.nodes.plan import with_converted_weights
from msmigrate.agent.routes.fsdp2.draft_config import input_overrides
from msmigrate.agent.routes.fsdp2.weights_load import delivered_weights, load_settings, weights_folder
from msmigrate.tools.checkpoint_conversion import RECORD, CheckpointConversion


def _folder(path, record=None):
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"")
    if record is not None:
        (path / RECORD).write_text(json.dumps(record))
    return path


def test_the_plans_converted_checkpoint_is_what_the_config_and_g1_load(tmp_path):
    source = _folder(tmp_path / "source")
    converted = _folder(tmp_path / "run" / "converted_weights", {"source": str(source), "bit_equal": True})
    plan = {"weights": {"folder": str(converted)}}
    assert weights_folder(plan, source) == converted
    assert weights_folder({}, source) == source and weights_folder({"weights": {"folder": None}}, source) == source
    assert delivered_weights(weights_folder(plan, source))["load"] == str(converted)
    assert load_settings(None, {}, weights_folder(plan, source))["load"] == str(converted)


def test_input_binding_keeps_a_checkpoint_converted_from_the_source_and_rebinds_any_other(tmp_path):
    source = _folder(tmp_path / "source")
    data = tmp_path / "train.json"
    data.write_text("[]")
    converted = _folder(tmp_path / "conv", {"source": str(source), "bit_equal": True})
    unchecked = _folder(tmp_path / "unchecked", {"source": str(source), "bit_equal": False})
    elsewhere = _folder(tmp_path / "other", {"source": str(tmp_path / "another"), "bit_equal": True})

    def bound(load):
        return input_overrides(source, data, config={"training": {"load": str(load)}})["training"]["load"]

    assert bound(converted) == str(converted)
    assert bound(unchecked) == str(source) and bound(elsewhere) == str(source)
    assert bound("/home/author/model") == str(source)


def _ctx(tmp_path):
    return SimpleNamespace(source=_folder(tmp_path / "source"), run_dir=tmp_path / "run", runtime_python="python",
                           probe_timeout_s=300.0)


def _derived(result):
    return lambda what, fn, *a, **k: result


def test_the_plan_carries_a_conversion_and_only_then(tmp_path):
    ctx = _ctx(tmp_path)
    plan = {"route": "transformers", "reasons": ["similar case x"]}
    none = CheckpointConversion(ok=True, transformers="4.57.0")
    assert with_converted_weights(ctx, plan, _derived(none)) is plan  # untouched: no key, no reason
    conv = CheckpointConversion(ok=True, needed=True, folder=str(ctx.run_dir / "converted_weights"), tensors=21,
                                transformers="5.25.0", converters=[{"source": [".experts.*.w2.weight"],
                                                                    "target": [".experts.down_proj"],
                                                                    "operations": ["MergeModulelist"], "keys": 6}])
    out = with_converted_weights(ctx, plan, _derived(conv))
    assert out["weights"]["folder"] == conv.folder and out["weights"]["converted_from"] == str(ctx.source)
    assert any(r.startswith("weights: converted by transformers 5.25.0") and ".experts.down_proj" in r
               for r in out["reasons"])
    failed = with_converted_weights(ctx, plan, _derived(CheckpointConversion(ok=False, error="boom")))
    assert "weights" not in failed and failed["could_not_derive"] == ["checkpoint conversion check failed: boom"]
    custom = {"route": "custom", "reasons": []}
    assert with_converted_weights(ctx, custom, _derived(conv)) is custom  # remote code: transformers converts none
