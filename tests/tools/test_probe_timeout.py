"""The runtime probes' time limit is the user's (spec ``launch.probe_timeout_s``): it reaches every probe a gate or
tool runs through the run context, and a probe that runs past it says which setting raises it — a message the
failure catalog sends to the environment owner with that advice, not to the model's code."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from msmigrate.agent.config import RunSpec
from msmigrate.core.run_context import RunContext
from msmigrate.core.tool_result import ToolResult
from msmigrate.knowledge.classifier import classify
from msmigrate.tools import media_expansion, runtime_processor, target_checks
from msmigrate.tools.runtime import PROBE_TIMEOUT_SETTING, run_probe
from msmigrate.tools.warm_runtime import POOL, SWITCH_ENV


def _spec(tmp_path: Path, **launch) -> RunSpec:
    return RunSpec(source=tmp_path, target=tmp_path, model_name="demo", launch=launch)


def test_the_spec_setting_defaults_to_300_s_and_refuses_a_non_positive_limit(tmp_path):
    assert _spec(tmp_path).launch.probe_timeout_s == 300.0
    assert _spec(tmp_path, probe_timeout_s=900).launch.probe_timeout_s == 900.0
    with pytest.raises(ValidationError, match="probe_timeout_s"):
        _spec(tmp_path, probe_timeout_s=0)
    assert "probe_timeout_s" == PROBE_TIMEOUT_SETTING.split(".")[-1]


class Recorder:
    """Stands in for ``run_probe``: records the limit each probe was given and fails as a timed-out probe would."""

    def __init__(self):
        self.timeouts: dict[str, float] = {}

    def __call__(self, python, probe, args=None, *, timeout, **kwargs) -> ToolResult:
        self.timeouts[probe] = timeout
        return ToolResult.failure(f"probe {probe} timed out after {timeout:.0f}s")


@pytest.fixture
def recorder(monkeypatch) -> Recorder:
    rec = Recorder()
    for module in (target_checks, media_expansion, runtime_processor):
        monkeypatch.setattr(module, "run_probe", rec)
    return rec


def test_the_run_contexts_limit_reaches_the_gate_probes(tmp_path, recorder):
    ctx = RunContext(run_id="r", run_dir=tmp_path, source=tmp_path, target=tmp_path, model_name="m",
                     probe_timeout_s=1234.0)
    target_checks.forward_check(ctx, plugins=[], model_id="m")
    target_checks.module_tree(ctx)
    target_checks.model_parity(ctx, plugins=[], model_id="m")
    target_checks.data_check(ctx, tmp_path / "c.yaml")
    assert recorder.timeouts == {"forward_smoke": 1234.0, "module_tree": 1234.0, "model_parity": 1234.0,
                                 "data_check": 1234.0}


def test_the_plan_probes_take_the_limit_they_are_given(tmp_path, recorder):
    media_expansion.derive_media_expansion(sys.executable, tmp_path, tmp_path / "d.json", timeout=777.0)
    runtime_processor.probe_runtime_processor(sys.executable, tmp_path, timeout=778.0)
    assert recorder.timeouts == {"media_expansion": 777.0, "processor_class": 778.0}


SLOW = textwrap.dedent("""
    import time
    time.sleep(60)
""")


def test_a_timed_out_probe_names_the_setting_and_is_classified_as_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(SWITCH_ENV, "0")  # a fresh process: no warm server to start for one sleep
    (tmp_path / "slow.py").write_text(SLOW)
    try:
        res = run_probe(sys.executable, "slow", probes_dir=tmp_path, timeout=1)
    finally:
        POOL.close_all()
    assert not res.ok and res.data["returncode"] is None
    assert res.error.startswith("probe slow timed out after 1s") and PROBE_TIMEOUT_SETTING in res.error
    verdict = classify(f"G1 forward smoke failed: {res.error}")
    assert (verdict.case_id, verdict.owner) == ("probe-timeout", "environment")
    assert PROBE_TIMEOUT_SETTING in verdict.diagnosis
