"""The rules policy migrates transformers-native fixtures into the stand-in through every gate (real probes, real
torchrun launches on CPU). Each run is ~1–2 min on 2 cores, so these are integration tests."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest
import yaml

from msmigrate.agent.config import RunSpec, Settings
from msmigrate.agent.policies.rules import RulesPolicy
from msmigrate.agent.runner import Run, new_run_id

from delivery_checks import assert_mergeable

pytestmark = pytest.mark.integration
ALL_GATES = ["G0", "G1", "G2", "G3", "G4", "G5", "G6"]


def _spec(source: Path, target: Path, model: str) -> RunSpec:
    return RunSpec(source=source, target=target, model_name=model, policy="rules",
                   launch={"gate_train_iters": 5, "timeout_s": 600})


def _assert_green(state: dict, run_dir: Path) -> dict:
    assert state["exit_status"] == "success", state.get("exit_detail")
    evidence = json.loads((run_dir / "evidence.json").read_text())
    for gate in ALL_GATES:
        record = evidence["gates"][gate]
        assert record["passed"], (gate, record["summary"])
        assert record["evidence"], gate
        for item in record["evidence"]:
            assert {"command", "exit_code", "started", "ended", "log_excerpt", "metrics"} <= item.keys()
    assert (run_dir / "verification_report.md").read_text().count("| PASS |") == len(ALL_GATES)
    return evidence


def _source_of(run_dir: Path) -> str:
    return str(yaml.safe_load((run_dir / "spec.yaml").read_text())["source"])


def _changed_files(target: Path, run_id: str) -> list[str]:
    repo = git.Repo(target)
    return repo.git.diff("--name-only", f"msmigrate/{run_id}/base", f"msmigrate/{run_id}").splitlines()


def test_rules_migrates_branch_a_model(hostile_rules_run):
    """Branch A end to end, read off the session's one real rules run of qwen2_vl (tests/conftest.py): the console
    script on the qwen2_vl fixture whose README, config, template, code and first sample carry prompt injections
    (tests/security/test_secret_canary.py asserts on the same run that nothing secret leaks). The injections are
    data, so this is the branch-A migration a clean fixture gets, with nothing the injections asked for."""
    run = hostile_rules_run
    evidence = _assert_green({"exit_status": run.summary["exit_status"],
                              "exit_detail": (run.summary, run.proc.stderr[-3000:])}, run.run_dir)
    plan = evidence["plan"]
    assert (plan["data_branch"], plan["template"], plan["collator"]) == ("A", "qwen2vl", "qwen3vl")
    # G6 ran 2 ranks: global batch = 2 × micro batch 1
    assert evidence["gates"]["G6"]["evidence"][0]["metrics"]["global_batch_size"] == 2
    # parity with the source: model and data in G1/G2, K training steps in G4, the 2-rank first step vs one process
    # in G6
    parity = {k: v for g in ("G1", "G2", "G4", "G6") for k, v in evidence["gates"][g]["parity"].items()
              if (g, k) != ("G6", "training")}
    assert {k: v["status"] for k, v in parity.items()} == {"model": "pass", "data": "pass", "training": "pass",
                                                           "training_real_weights": "pass", "sharded": "pass"}
    # the K steps again with the migrated model sharded over G6's 2 ranks, against the one-process source
    ranks = evidence["gates"]["G6"]["parity"]["training"]
    assert ranks["status"] == "pass" and ranks["nproc"] == 2 and ranks["max_dloss"] <= 1e-4
    # HF weights out: G4's checkpoint exported, bit-exact, the source class on it gives the trained model's logits
    export = evidence["gates"]["G4"]["hf_export"]
    assert export["status"] == "pass" and export["exact"] and export["max_abs_dlogit"] <= 1e-4
    # throughput for every training launch, read from its log; on CPU no MFU, and the report says why
    rows = evidence["throughput"]
    assert len(rows) >= 4 and all(r["tokens_per_s"] > 0 and r["mfu"] is None for r in rows)
    assert "## Throughput" in (run.run_dir / "verification_report.md").read_text()
    assert parity["sharded"]["dloss"] <= 1e-4 * max(1.0, abs(parity["sharded"]["reference_loss"]))
    training = parity["training"]
    assert training["steps"] == 20 and training["max_dloss"] <= 1e-4
    assert training["fixed_batch"]["fall"] >= training["tolerance"]["learn_fraction"]
    assert (run.run_dir / "training_parity.png").is_file()
    assert "![training parity](training_parity.png)" in (run.run_dir / "verification_report.md").read_text()
    changed = _changed_files(run.target, run.summary["run_id"])
    assert changed and all(f.startswith(("mindspeed_mm/fsdp/models/qwen2_vl/", "examples/qwen2_vl/")) for f in changed)
    # read as a maintainer reads the pull request: trains the user's weights at the size asked, nothing of this run
    assert_mergeable(evidence, run.target, run.summary["run_id"], Path(_source_of(run.run_dir)), run_dir=run.run_dir)


def _misplace_loss_cfg(cfg: dict) -> dict:
    """The classic silent mistake: loss_cfg under model: — the real loader just auto-registers it and trains raw."""
    cfg["model"]["loss_cfg"] = cfg["features"].pop("loss_cfg")
    return cfg


def test_broken_config_is_classified_routed_and_fixed(migration_inputs, tmp_path):
    source, target = migration_inputs("llava")
    run = Run(_spec(source, target, "llava"), new_run_id("llava"), Settings(runs_dir=tmp_path / "runs"),
              policy=RulesPolicy(config_mutator=_misplace_loss_cfg))
    state = run.drive()
    run.close()
    evidence = _assert_green(state, run.run_dir)
    assert_mergeable(evidence, target, run.run_id, source, run_dir=run.run_dir)
    first_g3 = next(r for r in evidence["gate_history"] if r["gate"] == "G3")
    assert not first_g3["passed"] and "misplaced-key" in first_g3["finding_codes"]
    routes = [r for r in run.trajectory.records("classify")]
    assert routes and routes[0]["gate"] == "G3" and routes[0]["route"] == "config"
    final = yaml.safe_load(git.Repo(target).git.show(f"msmigrate/{run.run_id}:examples/llava/llava_config.yaml"))
    assert "loss_cfg" not in final["model"] and final["features"]["loss_cfg"]["loss_type"] == "default"
    # branch B: the three registry files were extended additively, nothing else outside the model's own dirs
    changed = set(_changed_files(target, run.run_id))
    assert {"mindspeed_mm/fsdp/data/data_utils/func_utils/template.py",
            "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"} <= changed
    assert evidence["plan"]["data_branch"] == "B"


def test_a_reused_mm_plugin_refuted_by_g2_is_replaced_by_one_derived_from_the_source(migration_inputs, tmp_path):
    """Branch A reuses the target's mm_plugin as it is; the target's copy here expands an image to one token more
    than the source's processor (faults/data.py: data-media-token-off-by-one, committed in the checkout before the
    run). G2's data parity refutes the reuse, the data phase derives the run's own template + mm_plugin from the
    source's facts under a fresh id, the YAML selects them, and the run ends green; the target's own code is kept."""
    from msmigrate.testbeds.faults import Layout, all_faults, apply

    source, target = migration_inputs("qwen2_vl")
    fault = next(f for f in all_faults() if f.id == "data-media-token-off-by-one")
    layout = Layout(root=target, plugin="p", modeling="p/m.py", config="c.yaml", launch="l.sh",
                    data=source / "data" / "train.json")
    apply(fault, layout)
    repo = git.Repo(target)
    repo.git.add("-A")
    repo.git.commit("-qm", "a hand edit of the mm_plugin", author="user <user@localhost>")
    run = Run(_spec(source, target, "qwen2_vl"), new_run_id("qwen2_vl"), Settings(runs_dir=tmp_path / "runs"))
    state = run.drive()
    run.close()
    evidence = _assert_green(state, run.run_dir)
    first_g2 = next(r for r in evidence["gate_history"] if r["gate"] == "G2")
    assert not first_g2["passed"]
    plan = evidence["plan"]
    assert plan["data_branch"] == "B" and plan["template"] == plan["mm_plugin"] != "qwen2vl"
    assert any("refuted" in r.get("why", "") for r in plan["revisions"])
    final = yaml.safe_load(repo.git.show(f"msmigrate/{run.run_id}:examples/qwen2_vl/qwen2_vl_config.yaml"))
    assert final["data"]["dataset_param"]["basic_parameters"]["template"] == plan["template"]
    # the target's own (faulted) plugin class is still there, untouched: the derived one is added beside it
    plugin = repo.git.show(f"msmigrate/{run.run_id}:{layout.mm_plugin}")
    assert "self.image_token * (n + 1)" in plugin and f'"{plan["mm_plugin"]}": ' in plugin
