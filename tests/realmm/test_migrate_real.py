"""`msmigrate run --policy rules` migrates transformers-native fixtures into a clean real checkout (a fresh
scripts/real_target.sh target each) through G0–G6 on the unmodified real trainer, unaided: the plugin, data
entries, YAML and launch script land as commits on the run's work branch; the user's branch is untouched."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from realmm_helpers import msmigrate, real_target, source_for_runtime

pytestmark = [pytest.mark.realmm, pytest.mark.integration]

# one per data branch the rules policy takes on the real checkout: A (an existing template fits), B (new entries)
FIXTURES = ["qwen2_vl", pytest.param("llava", marks=pytest.mark.xfail(strict=True, reason=(
    "open (issue 12 on the real target): G2's data parity assumes labels aligned with input_ids; the real "
    "framework's labels come out shifted, so the check reports trained prompt tokens and shifted labels on the real "
    "checkout. strict: once data parity reads the target's label convention this xfail must go.")))]


@pytest.mark.parametrize("name", FIXTURES)
def test_rules_migration_into_clean_real_checkout(tmp_path, realmm_tarballs, real_runtime, name):
    target = real_target(tmp_path / "t", realmm_tarballs, real_runtime)["target"]
    source = source_for_runtime(name, tmp_path / "src", real_runtime)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"source": str(source), "target": target, "model_name": name,
                                    "runtime_python": real_runtime, "policy": "rules"}))
    proc = msmigrate("run", str(spec), "--runs-dir", str(tmp_path / "runs"))
    summary = json.loads(proc.stdout)
    assert summary["exit_status"] == "success", proc.stderr[-4000:]
    assert summary["gates"] == {f"G{i}": True for i in range(7)}
    delivered = yaml.safe_load(subprocess.run(
        ["git", "-C", target, "show", f"msmigrate/{summary['run_id']}:examples/{name}/{name}_config.yaml"],
        capture_output=True, text=True, check=True).stdout)
    # a dense model does not inherit the MoE example's expert parallelism
    assert (delivered.get("parallel") or {}).get("expert_parallel_size", 1) == 1
    assert "ep_plan" not in (delivered.get("parallel") or {})
    assert subprocess.run(["git", "-C", target, "status", "--porcelain"], capture_output=True, text=True).stdout == ""
