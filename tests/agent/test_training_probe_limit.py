"""The training-parity probes' time limit follows the measured work (``target_checks.training_probe_limit``): a tiny
source keeps the floor, a real-scale one gets what its measured step needs for the 2K steps, the spec's own limit
is never lowered, and the ranks of an N-rank probe end a minute before the probe does."""

from __future__ import annotations

from types import SimpleNamespace

from msmigrate.core.tool_result import ToolResult
from msmigrate.tools import target_checks
from msmigrate.tools.target_checks import TRAINING_PROBE_FLOOR_S, training_probe_limit


def _ctx(tmp_path, probe_timeout_s=300.0):
    return SimpleNamespace(probe_timeout_s=probe_timeout_s, approval=False, code_approved=True, target=tmp_path,
                           source=tmp_path / "src", runtime_python="python", run_dir=tmp_path / "run")


def test_a_tiny_source_keeps_the_floor(tmp_path):
    limit, why = training_probe_limit(_ctx(tmp_path), 20, step_s=0.4, setup_s=30.0)
    assert limit == TRAINING_PROBE_FLOOR_S and "measured need" in why


def test_a_real_scale_step_raises_the_limit_to_the_measured_work(tmp_path):
    # internvl real scale on 2 loaded cores: G4's launch read a 25 s median step and took 196 s
    limit, why = training_probe_limit(_ctx(tmp_path), 20, step_s=25.0, setup_s=196.0)
    assert limit == target_checks.STEP_TIME_MARGIN * (2 * 20 * 25.0 + 196.0) and limit > 2 * 20 * 25.0
    assert "25.0 s measured median step" in why


def test_the_spec_limit_is_never_lowered(tmp_path):
    assert training_probe_limit(_ctx(tmp_path, 7200.0), 20, step_s=25.0, setup_s=196.0)[0] == 7200.0
    assert training_probe_limit(_ctx(tmp_path, 900.0), 20)[0] == 900.0


def test_the_probe_and_its_ranks_get_the_limit(tmp_path, monkeypatch):
    seen = {}

    def probe(python, name, args, **kw):
        seen.update(args=args, timeout=kw["timeout"])
        return ToolResult.failure("stopped here")

    monkeypatch.setattr(target_checks, "run_probe", probe)
    target_checks.training_parity(_ctx(tmp_path), plugins=[], model_id="m", config_path=tmp_path / "c.yaml",
                                  steps=20, nproc=2, timeout=2392.0)
    assert seen["timeout"] == 2392.0
    assert seen["args"][seen["args"].index("--rank-timeout") + 1] == "2332"
    target_checks.training_parity(_ctx(tmp_path), plugins=[], model_id="m", config_path=tmp_path / "c.yaml",
                                  steps=20, nproc=2, timeout=10.0)
    assert seen["timeout"] == TRAINING_PROBE_FLOOR_S
