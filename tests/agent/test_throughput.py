"""Throughput in the report: tokens/s and MFU from recorded real-format launch logs (the real MindSpeed-MM engine's
per-iteration line) and a recorded ``npu-smi info`` (the chip's name), FLOPs per token from parameter counts."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from msmigrate.agent.report import render_report
from msmigrate.agent.throughput import flops_per_token, launch_throughput, peak_tflops, throughput_rows
from msmigrate.tools.log_parser import parse_log
from msmigrate.tools.runtime import PROBES_DIR

DATA = Path(__file__).resolve().parents[1] / "data"
# an 8B-class decoder: 36 layers of width 4096, a 151936 × 4096 input embedding
MODEL = {"param_count": 8_291_375_616, "embedding_params": 151_936 * 4096, "text_layers": 36, "text_hidden": 4096}


def _npu_names() -> list[dict]:
    sys.path.insert(0, str(PROBES_DIR))
    try:
        import env_probe
    finally:
        sys.path.remove(str(PROBES_DIR))
    return env_probe.parse_npu_smi((DATA / "npu_smi" / "npu_smi_info_910b_4.txt").read_text())["npus"]


def _metrics(log: str) -> dict:
    s = parse_log(DATA / "logs" / log).to_dict()
    return {k: s[k] for k in ("median_step_ms", "global_batch_size", "steps")}


def test_tokens_per_second_and_mfu_from_a_real_format_log_on_910b3():
    m = _metrics("success_2rank.log")
    chip = _npu_names()[0]["name"]
    assert chip == "910B3" and peak_tflops(chip) == 313.0
    t = launch_throughput(m, nproc=2, kind="npu", chip=chip, model=MODEL, seq_len=1024.0, seq_from="test")
    # the log's step times after the first (warm-up), median; tokens = global batch × tokens per sample
    lines = [ln for ln in (DATA / "logs" / "success_2rank.log").read_text().splitlines() if "iteration " in ln
             and "elapsed time per iteration" in ln]
    steps = [float(ln.split("elapsed time per iteration (ms): ")[1].split(" ")[0]) for ln in lines]
    gbs = int(lines[0].split("global batch size:")[1].split("|")[0])
    assert m["median_step_ms"] == pytest.approx(statistics.median(steps[1:]))
    assert t["tokens_per_s"] == pytest.approx(gbs * 1024 * 1000 / statistics.median(steps[1:]))
    per_token = 6 * (MODEL["param_count"] - MODEL["embedding_params"]) + 12 * 36 * 4096 * 1024
    assert t["flops_per_token"] == pytest.approx(per_token)
    assert t["mfu"] == pytest.approx(t["tokens_per_s"] * per_token / (313e12 * 2))
    assert not t["why"]


def test_cpu_and_unknown_chips_say_na_with_why():
    m = _metrics("success_2rank.log")
    cpu = launch_throughput(m, nproc=2, kind="cpu", chip=None, model=MODEL, seq_len=512.0, seq_from="t")
    assert cpu["tokens_per_s"] > 0 and cpu["mfu"] is None and "MFU n/a on CPU" in cpu["why"][0]
    odd = launch_throughput(m, nproc=1, kind="cuda", chip="NVIDIA Some Future GPU", model=MODEL, seq_len=512.0,
                            seq_from="t")
    assert odd["mfu"] is None and "no known peak for device 'NVIDIA Some Future GPU'" in odd["why"][0]
    assert peak_tflops("NVIDIA H200") == 989.4 and peak_tflops("NVIDIA H20") == 148.0  # H200 is no H20
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0 and peak_tflops("NVIDIA H100 80GB HBM3") == 989.4
    nothing = launch_throughput({}, nproc=1, kind="cpu", chip=None, model=None, seq_len=None, seq_from="unknown")
    assert nothing["tokens_per_s"] is None and len(nothing["why"]) == 2


def test_flops_without_a_known_decoder_shape_count_parameters_only():
    assert flops_per_token(1000, 100, None, None, 64) == 6 * 900


def test_report_table_from_the_gates(tmp_path):
    tree = tmp_path / "module_tree.json"
    tree.write_text(json.dumps(MODEL))
    log_metrics = _metrics("success_2rank.log")
    gates = {
        "G0": {"evidence": [{"metrics": {"env": {"npu_smi": {"npus": _npu_names()}}}}]},
        "G1": {"module_tree_file": str(tree)},
        "G2": {"parity": {"data": {"tokens": 3000, "samples_compared": 4}}},
        "G6": {"passed": True, "summary": "", "evidence": [
            {"label": "2-ranks", "device": "npu", "nproc": 2, "metrics": {**log_metrics, "first_loss": 6.1,
                                                                         "last_loss": 5.9}},
            {"label": "training parity (20 steps, 2 ranks)", "metrics": {"fixed_batch": {}}}]},  # no launch
    }
    rows = throughput_rows(gates)
    assert [label for label, _ in rows] == ["G6 2-ranks"]
    t = rows[0][1]
    assert t["seq_len"] == 750.0 and "G2" in t["seq_from"] and t["device"] == "910B3" and t["mfu"] > 0
    text = render_report({"gates": gates, "plan": {}}, "", False)
    assert "## Throughput" in text and "| G6 2-ranks | 910B3 × 2 | 750.0" in text and f"{t['mfu']:.1%}" in text
