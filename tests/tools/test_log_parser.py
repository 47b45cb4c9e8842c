"""log_parser over recorded real-format logs (tests/data/logs, built from contract §9/§13 formats)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from msmigrate.tools import log_parser as lp
from msmigrate.tools.log_parser import CURVE_POINTS, LogWatcher, iter_chunks, normalize, parse_log

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"

# The per-iteration line exactly as the contract (§9.2) records it from a real run.
REAL_LINE = (
    "[Rank 0 | Local Rank 0] 2026-11-30 04:01:23,292 INFO [mindspeed_mm.fsdp.train.train_engine:48] =>  "
    "[2026-11-30 04:01:23] iteration        1/       4 | consumed samples:            4 | elapsed time per "
    "iteration (ms): 564.3 | learning rate: 1.000000E-04 | global batch size:     4 | loss: 6.178590E+00 | "
    "grad norm: 14.099 |"
)


def _iter_line(i, n, loss, grad="1.000", gbs=2, ms=100.0, extra=""):
    return (
        f"[Rank 0 | Local Rank 0] 2026-11-30 04:01:23,292 INFO [mindspeed_mm.fsdp.train.train_engine:48] =>  "
        f"[2026-11-30 04:01:23] iteration {i:8d}/{n:8d} | consumed samples: {i * gbs:12d} | elapsed time per "
        f"iteration (ms): {ms:.1f} | learning rate: 1.000000E-04 | global batch size: {gbs:5d} | loss: {loss} |"
        f"{extra} grad norm: {grad} |"
    )


def test_real_iteration_line_fields():
    records = []
    w = LogWatcher(on_iteration=records.append)
    w.feed(REAL_LINE)
    (rec,) = records
    assert (rec.iteration, rec.total, rec.consumed_samples, rec.global_batch_size) == (1, 4, 4, 4)
    assert rec.elapsed_ms == 564.3 and rec.learning_rate == 1e-4
    assert rec.loss == pytest.approx(6.17859) and rec.grad_norm == pytest.approx(14.099)
    assert rec.timestamp == "2026-11-30 04:01:23"
    s = w.summary(exit_code=1)
    assert s.steps == 1 and not s.completed and not s.success
    assert s.failure_signature.kind == "exit_code"


def test_success_log():
    s = parse_log(LOGS / "success_2rank.log", exit_code=0)
    assert s.success and s.completed and s.steps == 4 and s.last_iteration == s.total_iterations == 4
    assert s.first_loss == pytest.approx(6.17859) and s.last_loss == pytest.approx(6.130047)
    assert s.loss_trend == "decreasing" and s.loss_finite and s.loss_constant is False
    assert s.median_step_ms == pytest.approx(250.4)  # first (warm-up) step excluded
    assert s.samples_per_s == pytest.approx(4 * 1000 / 250.4, rel=1e-3)
    assert s.memory == {"after_iterations": 2.0, "allocated": 0.0, "max_allocated": 0.0, "reserved": 0.0,
                        "max_reserved": 0.0}
    assert s.checkpoints_saved == ["/tmp/run/ckpt/iter_0000002", "/tmp/run/ckpt/iter_0000004"]
    assert s.config_file == "examples/qwen3vl/qwen3vl_config.yaml"
    assert s.auto_registered_fields == ["features.recompute", "model.loss_cfg"]
    assert s.dynamic_fields == ["features.recompute", "model.loss_cfg"]
    assert s.plugins_imported == ["mindspeed_mm.fsdp.models.qwen3vl", "mindspeed_mm.fsdp.data.datasets.huggingface"]
    assert s.failure_signature is None
    assert [p[0] for p in s.loss_curve] == [1, 2, 3, 4]


def test_success_needs_exit_zero_and_last_iteration():
    assert not parse_log(LOGS / "success_2rank.log", exit_code=1).success
    assert not parse_log(LOGS / "success_2rank.log").success  # unknown exit code
    s = parse_log(LOGS / "killed_incomplete.log", exit_code=0)
    assert not s.success and not s.completed and s.failure_signature.kind == "child_failed"


def test_resume_and_extra_losses():
    s = parse_log(LOGS / "resume_mtp_aux.log", exit_code=0)
    assert s.checkpoint_loaded == "/tmp/run/ckpt/iter_0000004"
    assert s.extra_loss_names == ["mtp_1 loss", "aux loss"]
    assert s.success and s.steps == 4 and s.last_iteration == 8


def test_nan_and_inf_forms():
    s = parse_log(LOGS / "nan_loss.log", exit_code=0)
    assert not s.loss_finite and not s.success
    assert math.isinf(s.last_loss) and math.isinf(s.last_grad_norm)
    assert s.failure_signature.kind == "nonfinite_loss" and "iteration 2" in s.failure_signature.line
    w = LogWatcher()
    w.feed(_iter_line(1, 3, "5.000000E+00"))
    assert w.fatal is None
    w.feed(_iter_line(2, 3, "NAN", grad="nan"))
    assert w.fatal is not None and w.fatal.kind == "nonfinite_loss"
    assert LogWatcher(stop_on_nonfinite=False).fatal is None


def test_constant_zero_loss():
    s = parse_log(LOGS / "constant_zero_loss.log", exit_code=0)
    assert s.loss_constant is True and s.loss_trend == "flat"


@pytest.mark.parametrize(
    "name,kind,line_part,rank",
    [
        ("not_registered_childfailed.log", "exception", "KeyError: \"ID 'qwen3vl' is not registered.\"", 0),
        ("torch_npu_backend_load.log", "backend_load", "ImportError: libhccl.so: cannot open shared object", None),
        ("npu_oom.log", "oom", "NPU out of memory", 3),
        ("cuda_oom.log", "oom", "CUDA out of memory", 0),
        ("cpu_oom.log", "oom", "DefaultCPUAllocator: can't allocate", None),
        ("hccl_ez9999.log", "hccl", "ERR02200 DIST call hccl api failed", 1),
        ("config_error.log", "exception", "ConfigValidationError: Configuration loading failed", None),
        ("killed_incomplete.log", "child_failed", "exitcode -9", 0),
    ],
)
def test_failure_signatures(name, kind, line_part, rank):
    s = parse_log(LOGS / name, exit_code=1)
    sig = s.failure_signature
    assert not s.success
    assert sig.kind == kind and line_part in sig.line and sig.rank == rank
    assert line_part.split(":")[0] in sig.key


def test_childfailed_details_and_related_key_text():
    s = parse_log(LOGS / "not_registered_childfailed.log", exit_code=1)
    assert s.child_failure["rank"] == 0 and s.child_failure["exitcode"] == 1  # the Root Cause entry, not [1]
    assert s.first_failing_rank == 0
    assert s.root_exception == {"type": "KeyError", "message": "\"ID 'qwen3vl' is not registered.\"", "rank": 0}
    assert [e["rank"] for e in s.exceptions[:2]] == [0, 1]
    # the swallowed ModuleNotFoundError of import_plugin is part of the key text a classifier sees
    assert "No module named 'mindspeed_mm.fsdp.models.qwen3vl_typo'" in s.failure_signature.key
    assert s.plugin_import_failures and "qwen3vl_typo" in s.plugin_import_failures[0]


def test_recorded_standin_two_rank_failure():
    """Real torchrun output of the stand-in (2 ranks, interleaved): rank 1 fails first, rank 0 prints meanwhile."""
    s = parse_log(LOGS / "standin_not_registered_2rank.log", exit_code=1)
    assert [(e["type"].rsplit(".", 1)[-1], e["rank"]) for e in s.exceptions] == [
        ("KeyError", 1), ("KeyError", 0), ("ChildFailedError", None)]
    assert s.exceptions[0]["message"] == "\"ID 'zzz' is not registered.\""  # interleaved lines not absorbed
    assert s.first_failing_rank == 1 and s.child_failure == {**s.child_failure, "rank": 1, "exitcode": 1}
    assert s.failure_signature.kind == "exception" and s.failure_signature.rank == 1
    assert s.plugins_imported == ["mindspeed_mm.fsdp.models.qwen3vl", "mindspeed_mm.fsdp.data.datasets.huggingface"]
    assert "features.recompute" in s.dynamic_fields and s.steps == 0


def test_config_warnings_and_autoconfig_fallback():
    s = parse_log(LOGS / "autoconfig_fallback.log", exit_code=1)
    assert s.config_warnings == ["Field path 'trainnig' does not exist"]
    assert s.auto_registered_fields == ["trainnig.train_iters"]
    assert s.warning_lines[0].startswith("AutoConfig.from_pretrained failed for '/data/tinyvl_wrong'")
    sig = s.failure_signature
    assert sig.kind == "exception" and sig.line.startswith("huggingface_hub.errors.HFValidationError: Repo id must")
    assert "falling back to custom model builder" in sig.key


def test_cann_codes_and_config_message():
    s = parse_log(LOGS / "hccl_ez9999.log", exit_code=1)
    assert s.cann_error_codes == ["EI0006", "EZ9999"]
    assert "EI0006" in s.failure_signature.key and "HCCL function error" in s.failure_signature.key
    c = parse_log(LOGS / "config_error.log", exit_code=1)
    assert "data.dataloader_param.sampler_type Field required" in c.failure_signature.key
    k = parse_log(LOGS / "killed_incomplete.log", exit_code=-9)
    assert k.child_failure["signal"].startswith("Signal 9 (SIGKILL)")


def test_backend_load_keeps_cause_chain():
    s = parse_log(LOGS / "torch_npu_backend_load.log", exit_code=1)
    assert [e["type"] for e in s.exceptions] == ["ImportError", "RuntimeError"]
    assert "Failed to load the backend extension: torch_npu" in s.failure_signature.key


def test_streaming_forms_agree():
    for path in sorted(LOGS.glob("*.log")):
        whole = parse_log(path, exit_code=1).to_dict()
        assert parse_log(path.read_text().splitlines(), exit_code=1).to_dict() == whole, path.name
        for chunk in (64, 300):
            w = LogWatcher(stop_on_nonfinite=False)
            for text in iter_chunks(path, chunk):
                w.feed_text(text)
            assert w.summary(1).to_dict() == whole, (path.name, chunk)


def test_bounded_memory_on_long_runs():
    n = 3 * CURVE_POINTS + 7
    lines = (_iter_line(i, n, f"{5.0 - i * 1e-4:.6E}") for i in range(1, n + 1))
    s = parse_log(lines, exit_code=0)
    assert s.steps == n and s.success and s.loss_trend == "decreasing"
    assert len(s.loss_curve) < CURVE_POINTS and s.loss_curve[0][0] <= 4
    w = LogWatcher()
    w.feed_text("".join(_iter_line(i, n, "1.000000E+00") + "\n" for i in range(1, lp.STEP_WINDOW + 50)))
    assert len(w._steps_ms) == lp.STEP_WINDOW


def test_increasing_trend_and_normalize():
    s = parse_log([_iter_line(i, 4, f"{1.0 + i:.6E}") for i in range(1, 5)], exit_code=0)
    assert s.loss_trend == "increasing"
    text = "[rank1]: RuntimeError: bad at 0x7f3a2b (pid: 1234) 2026-11-30 04:01:23,292"
    assert normalize(text) == "RuntimeError: bad at <addr> (pid <pid>) <ts>"


def test_watcher_fatal_on_exception_line_streamed():
    w = LogWatcher()
    for line in (LOGS / "npu_oom.log").read_text().splitlines()[:2]:
        w.feed(line)
    assert w.fatal is None  # the traceback has started, but no error line yet
    for line in (LOGS / "npu_oom.log").read_text().splitlines()[2:]:
        w.feed(line)
    assert w.fatal.kind == "oom"


def test_tool_wrapper(tmp_path):
    tool = lp.make_parse_log_tool()
    out = json.loads(tool.invoke({"log_path": str(LOGS / "success_2rank.log"), "exit_code": 0}))
    assert out["ok"] and out["data"]["success"] and out["data"]["loss_curve_tail"][-1][0] == 4
    missing = json.loads(tool.invoke({"log_path": str(tmp_path / "none.log")}))
    assert not missing["ok"] and "not found" in missing["error"]
