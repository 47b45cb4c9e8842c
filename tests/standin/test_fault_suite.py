"""The fault-injection suite (msmigrate/testbeds/faults, run by benchmarks/bench_fault_routing.py): its faults are
well formed and cover the four owners and every surface; the edit and runtime machinery works; and the fast subset:
the YAML faults G3 must catch are caught by the validator, named at the key the fix changes, and classified config
(the same code G3 and the classify node run, without a migration or a launch)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from msmigrate.knowledge.classifier import classify
from msmigrate.testbeds.faults import (OWNERS, Fault, FaultError, Layout, Replace, Runtime, SetLine, all_faults, apply,
                                       wrap_runtime)
from msmigrate.tools.runtime import run_probe
from msmigrate.tools.yaml_validator import validate_config

FAULTS = {f.id: f for f in all_faults()}


def test_the_suite_has_forty_faults_over_four_owners_and_every_surface():
    assert len(FAULTS) >= 40
    per_owner = Counter(f.owner for f in FAULTS.values())
    assert set(per_owner) == set(OWNERS) and min(per_owner.values()) >= 8, per_owner
    surfaces = {f.surface for f in FAULTS.values()}
    assert {"plugin", "mm_plugin", "template", "collator", "dataset", "yaml", "launch", "runtime", "host"} <= surfaces
    assert all(f.fix and f.story for f in FAULTS.values())
    assert all(f.runtime is not None for f in FAULTS.values() if f.owner == "environment")
    assert any(f.repair for f in FAULTS.values())


def _layout(tmp_path: Path) -> Layout:
    (tmp_path / "t/p").mkdir(parents=True)
    (tmp_path / "t/p/m.py").write_text("a = 1\nb = 1\n")
    (tmp_path / "t/c.yaml").write_text("training:\n  micro_batch_size: 1\n  seed: 42\n")
    (tmp_path / "s/data").mkdir(parents=True)
    (tmp_path / "s/data/train.json").write_text('[{"role": "user"}, {"role": "user"}]')
    return Layout(root=tmp_path / "t", plugin="p", modeling="p/m.py", config="c.yaml", launch="l.sh",
                  data=tmp_path / "s/data/train.json")


def test_edits_apply_where_their_anchor_is_and_refuse_where_it_is_not(tmp_path):
    layout = _layout(tmp_path)
    fault = Fault("x", "config", "yaml", "story", (SetLine("{config}", "micro_batch_size", "0"),
                                                   Replace("{data}", '"user"', '"human"', count=0),
                                                   Replace("{modeling}", "a = 1", "a = 2")), fix=("k",))
    apply(fault, layout)
    assert "micro_batch_size: 0\n  seed: 42" in (layout.root / "c.yaml").read_text()
    assert (tmp_path / "s/data/train.json").read_text().count('"human"') == 2
    twice = Fault("y", "model", "plugin", "story", (Replace("{modeling}", "= ", "== "),), fix=("k",))
    with pytest.raises(FaultError):  # the anchor occurs twice: the fault would not be the single edit it says
        apply(twice, layout)
    with pytest.raises(FaultError):
        apply(Fault("z", "config", "yaml", "s", (SetLine("{config}", "no_such_key", "1"),), fix=("k",)), layout)


def test_a_wrapped_runtime_sets_the_environment_and_preloads_the_simulation(tmp_path):
    python = wrap_runtime(Runtime(env={"FAULT_VAR": "on"}, sitecustomize="import os\nos.environ['SEEN'] = "
                                                                          "'{model_type}'\n"),
                          sys.executable, tmp_path / "rt", model_type="tiny_vl")
    out = subprocess.run([python, "-c", "import os; print(os.environ['FAULT_VAR'], os.environ['SEEN'])"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["on", "tiny_vl"], out.stderr
    missing = wrap_runtime(Runtime(missing=True), sys.executable, tmp_path / "gone")
    assert not Path(missing).exists()


# The YAML faults G3 catches before any launch (value ranges, names the target does not offer, weakened configs,
# unknown keys); each must be reported at the key its fix changes and classified config.
G3_FAULTS = ("config-micro-batch-zero", "config-grad-accum-zero", "config-warmup-ratio-over-one", "config-key-typo",
             "config-bad-param-dtype", "config-loss-type-unknown", "config-train-iters-weakened")


@pytest.fixture(scope="module")
def standin_schema(tmp_path_factory):
    from msmigrate.testbeds.standin import write_standin

    dest = write_standin(tmp_path_factory.mktemp("faults") / "standin")
    result = run_probe(sys.executable, "config_schema", ["--target-root", str(dest)], timeout=120)
    assert result.ok, result.error
    return result.data["result"]["schema"], dest


@pytest.mark.parametrize("fault_id", G3_FAULTS)
def test_g3_catches_the_yaml_fault_names_its_key_and_routes_it_to_config(standin_schema, tmp_path, fault_id):
    schema, standin = standin_schema
    fault = FAULTS[fault_id]
    config = tmp_path / "cfg.yaml"
    config.write_text((standin / "examples/qwen3vl/qwen3vl_config.yaml").read_text())
    apply(fault, Layout(root=tmp_path, plugin="p", modeling="p/m.py", config="cfg.yaml", launch="l.sh",
                        data=tmp_path / "train.json"))
    result = validate_config(config, schema=schema, target_root=standin, device="cpu")
    errors = [f for f in result.data["findings"] if f["severity"] == "error"]
    assert errors, f"{fault_id} passed G3's validator"
    lines = [f"[{f['code']}] {f['path']}: {f['message']}" for f in errors]
    assert any(key in line for key in fault.fix for line in lines), lines
    verdict = classify("\n".join(lines), sorted({f["code"] for f in errors}), gate_verdict=["; ".join(lines)])
    assert verdict.owner == "config", (verdict.case_id, lines)
