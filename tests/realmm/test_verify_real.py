"""`msmigrate verify` on the real checkout's own qwen3vl plugin (it registers qwen3_vl_moe; its YAML and launch
script are named after the 30B model), with a tiny Qwen3-VL-MoE source written by the real runtime, unaided and
editing nothing.

G1's model parity finds that this plugin does not compute what transformers' Qwen3VLMoeForConditionalGeneration
computes off-NPU: in training mode its MoE block hands the experts the top-k routing weights unscattered and the
expert loop reads them by expert id (knowledge case qwen3vl-moe-expert-index; on NPU a fused kernel replaces that
loop). The gate must say so with its figures and where the two part, not crash and not pass. The test sets the
same weights scattered back into the framework's block in a separate process (never in the checkout) to show the
difference is that loop and nothing else."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from realmm_helpers import msmigrate, source_for_runtime

pytestmark = [pytest.mark.realmm, pytest.mark.integration]


def test_verify_existing_real_qwen3vl_reports_the_moe_difference(tmp_path, real_checkout, real_runtime):
    source = source_for_runtime("qwen3_vl_moe", tmp_path / "src", real_runtime)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"source": str(source), "target": str(real_checkout), "model_name": "qwen3vl",
                                    "runtime_python": real_runtime}))
    before = subprocess.run(["git", "-C", str(real_checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    proc = msmigrate("verify", str(spec), "--runs-dir", str(tmp_path / "runs"), "--model-id", "qwen3_vl_moe",
                     "--plugin-dir", "mindspeed_mm/fsdp/models/qwen3vl",
                     "--config", "examples/qwen3vl/qwen3vl_30B_config_v1.yaml",
                     "--launch-script", "examples/qwen3vl/finetune_qwen3vl_30B_v1.sh")
    summary = json.loads(proc.stdout)
    assert summary["exit_status"] == "gates_failed", proc.stderr[-4000:]
    assert summary["gates"] == {"G0": True, "G1": False}
    assert "qwen3vl-moe-expert-index" in summary["exit_detail"]
    evidence = json.loads((tmp_path / "runs" / summary["run_id"] / "evidence.json").read_text())
    model = evidence["gates"]["G1"]["parity"]["model"]
    assert model["status"] == "fail" and model["batch_source"] == "source processor"
    tol = model["tolerance"]
    for path in ("eager", "meta"):  # a measured difference, not a crash: finite figures above the tolerance
        assert tol["max_abs_dlogit"] < model[path]["max_abs_dlogit"] < 1.0, model
    first = model["first_divergence"]
    assert first["class"] == "Qwen3VLMoeTextSparseMoeBlock" and first["module"].endswith(".mlp"), first
    after = subprocess.run(["git", "-C", str(real_checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert after.stdout == before.stdout
    assert not subprocess.run(["git", "-C", str(real_checkout), "diff", "--stat", "HEAD"], capture_output=True,
                              text=True).stdout


# Runs the model parity probe with the framework's MoE block scattering the routing weights in training too (patched
# in this process only). argv: the probe's own arguments.
SCATTERED = '''
import runpy, sys, torch
sys.path.insert(0, ".")
from mindspeed_mm.fsdp.models.qwen3vl import modeling_qwen3_vl_moe as m

def forward(self, hidden_states):
    batch = hidden_states.shape[0]
    flat = hidden_states.reshape(-1, self.hidden_size)
    weights, logits, indices = self.gate(flat)
    dense = torch.zeros_like(logits).scatter_(1, indices, weights)
    return self.experts(flat, dense, indices).view(batch, -1, self.hidden_size), logits

m.Qwen3VLMoeTextSparseMoeBlock.forward = forward
sys.argv = [sys.argv[1]] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def test_model_parity_passes_once_the_moe_weights_are_scattered(tmp_path, real_checkout, real_runtime):
    import os

    from msmigrate.tools.runtime import PROBES_DIR
    from msmigrate.tools.probes._model_build import RESULT_MARKER

    source = source_for_runtime("qwen3_vl_moe", tmp_path / "src", real_runtime)
    args = ["--target", str(real_checkout), "--plugin", "mindspeed_mm/fsdp/models/qwen3vl", "--model-id",
            "qwen3_vl_moe", "--model-name-or-path", str(source), "--model", str(source), "--attn-implementation",
            "sdpa", "--shrink-layers", "2", "--sample-data", str(source / "data" / "train.json")]
    proc = subprocess.run([real_runtime, "-c", SCATTERED, str(PROBES_DIR / "model_parity.py"), *args],
                          cwd=real_checkout, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(PROBES_DIR), "NON_MEGATRON": "true",
                               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    line = next(x for x in proc.stdout.splitlines() if x.startswith(RESULT_MARKER))
    result = json.loads(line[len(RESULT_MARKER):])
    assert result["passed"] is True, (result, proc.stderr[-3000:])
    assert result["eager"]["max_abs_dlogit"] <= result["tolerance"]["max_abs_dlogit"]
    assert result["meta"]["dloss"] <= result["tolerance"]["dloss"]
