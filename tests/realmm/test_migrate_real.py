"""`msmigrate run --policy rules` migrates transformers-native fixtures into a clean real checkout (a fresh
scripts/real_target.sh target each) through G0–G6 on the unmodified real trainer, unaided: the plugin, data
entries, YAML and launch script land as commits on the run's work branch; the user's branch is untouched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from msmigrate.agent.launch_size import script_size
from msmigrate.agent.routes.fsdp2.config_fit import has_experts
from msmigrate.faces.eval.scorers import check_decline
from msmigrate.testbeds.fixtures import FIXTURES as FIXTURE_SPECS

from realmm_helpers import msmigrate, real_target, source_for_runtime

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from delivery_checks import assert_mergeable  # noqa: E402

pytestmark = [pytest.mark.realmm, pytest.mark.integration]

# six transformers-native fixtures: data branch A (an existing real template fits: qwen2_vl, qwen2_5_vl, qwen3_vl)
# and B (new registry entries: llava; glm4v, whose efficient-eos template makes the real dataset put the closing eos
# on label 0 — data parity must read that as the target's own convention, not as a trained prompt token);
# gemma3 (B too) ties its LM head to the embedding without saying so in a 4.x config.json: the tie is read from the
# built model, so the shared weight gets no FSDP unit of its own (else G4: mixed torch.Tensor and DTensor)
FIXTURES = ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "llava", "glm4v", "gemma3",
            # the other transformers-native fixtures of the catalogue, on the same real route (long tier);
            # chameleon (early fusion) and florence2 (encoder-decoder) are beyond the rules policy: the honest
            # outcome there is its decline
            "internvl", "llava_next", "llava_onevision", "paligemma", "aya_vision", "llava_siglip_qwen2", "idefics3",
            "smolvlm", "chameleon", "qwen3_vl_moe", "florence2"]


@pytest.mark.parametrize("name", FIXTURES)
def test_rules_migration_into_clean_real_checkout(tmp_path, realmm_tarballs, real_runtime, name):
    target = real_target(tmp_path / "t", realmm_tarballs, real_runtime)["target"]
    source = source_for_runtime(name, tmp_path / "src", real_runtime)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"source": str(source), "target": target, "model_name": name,
                                    "runtime_python": real_runtime, "policy": "rules"}))
    proc = msmigrate("run", str(spec), "--runs-dir", str(tmp_path / "runs"))
    summary = json.loads(proc.stdout)
    if FIXTURE_SPECS[name].expected_exit != "success":  # an architecture beyond the policy: declined before any launch
        evidence = json.loads((tmp_path / "runs" / summary["run_id"] / "evidence.json").read_text())
        assert check_decline(evidence).passed, check_decline(evidence).detail
        assert summary["exit_status"] == FIXTURE_SPECS[name].expected_exit
        assert subprocess.run(["git", "-C", target, "status", "--porcelain"], capture_output=True,
                              text=True).stdout == ""
        return
    assert summary["exit_status"] == "success", proc.stderr[-4000:]
    assert summary["gates"] == {f"G{i}": True for i in range(7)}
    assert_green_delivery(tmp_path / "runs", summary["run_id"], Path(target), source, name)


def assert_green_delivery(runs: Path, run_id: str, target: Path, source: Path, name: str) -> None:
    """What a green run into the real checkout must hold (its evidence and its work branch); a separate function
    so a kept run folder can be re-checked after a change to these checks."""
    evidence = json.loads((runs / run_id / "evidence.json").read_text())
    data = evidence["gates"]["G2"]["parity"]["data"]
    assert data["status"] == "pass" and data["prompt_match"] and data["label_convention"] == "aligned"
    assert data["loss_label_alignment"] == "aligned"  # the plugin's loss shifts: read from its logits
    assert data["media_tokens"] == data["source_media_tokens"] == data["vision_features"] > 0
    assert data["trained"] + data["masked"] == data["tokens"] and data["trained"] > 0
    delivered = yaml.safe_load(subprocess.run(
        ["git", "-C", target, "show", f"msmigrate/{run_id}:examples/{name}/{name}_config.yaml"],
        capture_output=True, text=True, check=True).stdout)
    parallel = delivered.get("parallel") or {}
    assert parallel.get("expert_parallel_size", 1) == 1  # the gates' launches are 2 ranks, one expert group
    if has_experts({}, source):  # an MoE (qwen3_vl_moe) keeps the expert plan, naming its expert modules
        assert all(p.endswith(".experts") for p in parallel["ep_plan"]["apply_modules"]), parallel["ep_plan"]
    else:  # a dense model does not inherit the MoE example's expert plan
        assert "ep_plan" not in parallel
    # the user's checkpoint, loaded by the real trainer's HF path in every training gate, at the size the spec asked
    assert delivered["training"]["load"] == str(source) and delivered["training"]["init_model_with_meta_device"]
    for gate in ("G4", "G5", "G6"):
        assert evidence["gates"][gate]["evidence"][0]["metrics"]["weights"] == f"HF weights loaded from {source}"
    review = evidence["delivery_review"]
    assert review["problems"] == [] and review["diffs"], review
    script = subprocess.run(["git", "-C", target, "show", f"msmigrate/{run_id}:examples/{name}/"
                             f"finetune_{name}.sh"], capture_output=True, text=True, check=True).stdout
    assert script_size(script) == (2, 1)
    assert subprocess.run(["git", "-C", target, "status", "--porcelain"], capture_output=True, text=True).stdout == ""
    # the maintainer's review read straight off the branch (tests/agent/delivery_checks.py)
    assert_mergeable(evidence, target, run_id, source, run_dir=runs / run_id)
