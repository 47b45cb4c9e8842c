"""G4/G5 launch plan with a fake trainer behind ``launch`` (the real one is exercised by the integration tests):
G4 saves, G5's same-seed repeat is a launch of its own (never G4's log read twice), G5 resumes from G4's checkpoint,
and each proof still fails when its evidence is missing or wrong."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

from msmigrate.agent.config import Budgets, LaunchSettings
from msmigrate.agent.routes.fsdp2.gates import training
from msmigrate.core.tool_result import ToolResult


class FakeTrainer:
    """Losses from the seed (or from a fresh RNG when ``deterministic`` is off); save writes a marker, load needs it."""

    def __init__(self, deterministic: bool = True, saves: bool = True, step_ms: float = 40.0):
        self.deterministic, self.saves, self.step_ms = deterministic, saves, step_ms
        self.specs: list = []

    def __call__(self, ctx, spec, on_progress=None, **_):
        self.specs.append(spec)
        t = spec.overrides["training"]
        rng = random.Random(0 if self.deterministic else len(self.specs))
        start, saved, loaded = 0, [], None
        if t.get("load"):
            marker = Path(t["load"]) / "latest"
            if not marker.is_file():
                return ToolResult(ok=False, data={"summary": {"steps": 0}}, error="launch failed: no checkpoint")
            start, loaded = int(marker.read_text()), t["load"]
        curve = [[i, 5.0 - 0.1 * i + rng.random() * 1e-3] for i in range(start + 1, t["train_iters"] + 1)]
        if t.get("save") and self.saves:
            Path(t["save"]).mkdir(parents=True, exist_ok=True)
            (Path(t["save"]) / "latest").write_text(str(t["train_iters"]))
            saved = [t["save"]]
        summary = {"steps": len(curve), "first_loss": curve[0][1], "last_loss": curve[-1][1], "loss_finite": True,
                   "loss_constant": False, "loss_curve_head": curve[:10], "loss_curve_tail": curve[-10:],
                   "checkpoints_saved": saved, "checkpoint_loaded": loaded, "last_iteration": curve[-1][0],
                   "median_step_ms": self.step_ms}
        return ToolResult(ok=True, data={"summary": summary, "argv": ["torchrun"], "exit_code": 0, "reused": False,
                                         "launch_id": f"{spec.gate.lower()}-{len(self.specs)}"})


def _deps(tmp_path: Path):
    spec = SimpleNamespace(launch=LaunchSettings(gate_train_iters=6), budgets=Budgets(), bind_inputs=False, policy="rules")
    ctx = SimpleNamespace(run_dir=tmp_path / "run", target=tmp_path / "target",  # not git: code state "nogit"
                          source=tmp_path / "source")
    return SimpleNamespace(spec=spec, ctx=ctx, emit=lambda *a, **k: None)


calls: list[bool] = []  # real_weights of each training-parity call
work: list[dict] = []  # the measured work (step_s, setup_s) each training-parity call was given


def _parity(problems: list[str]):
    """A stand-in for G4's training-parity probe (the real one: tests/agent/test_training_parity.py)."""
    def check(deps, state, nproc=1, real_weights=False, step_s=None, setup_s=None):
        calls.append(real_weights)
        work.append({"step_s": step_s, "setup_s": setup_s})
        record = {"status": "fail" if problems else "pass", "steps": 20, "fixed_batch": {"before": 6.2, "after": 5.7,
                                                                                         "fall": 0.08},
                  "max_dloss": 0.0, "max_rel_dgrad_norm": 0.0, "problems": problems}
        ev = {"label": "training parity", "metrics": record, "log_excerpt": ""}
        return ev, [f"training parity: {p}" for p in problems], record
    return check


def _export(deps, state, checkpoint, media_token_id=None):
    """A stand-in for G4's HF export probe (the real one: tests/agent/test_training_parity.py)."""
    record = {"status": "pass", "tensors": 12, "exact": True, "max_abs_dlogit": 0.0, "converter": "product: test",
              "checkpoint": str(checkpoint), "problems": []}
    return {"label": "HF weights out", "metrics": record, "log_excerpt": ""}, [], record


def _run(monkeypatch, tmp_path, trainer, parity_problems=()):
    monkeypatch.setattr(training, "launch", trainer)
    monkeypatch.setattr(training, "training_parity_check", _parity(list(parity_problems)))
    monkeypatch.setattr(training, "hf_export_check", _export)
    deps, state = _deps(tmp_path), {"plan": {"config_path": "examples/x/x.yaml"}, "gates": {}}
    state["gates"]["G4"] = training.gate_functional(deps, state)
    return deps, state["gates"]["G4"], training.gate_reliability(deps, state)


def test_four_launches_g5_repeats_and_resumes_from_g4(monkeypatch, tmp_path):
    trainer = FakeTrainer()
    deps, g4, g5 = _run(monkeypatch, tmp_path, trainer)
    assert g4["passed"] and g5["passed"], (g4["summary"], g5["summary"])
    assert [s.gate for s in trainer.specs] == ["G4-single-process", "G5-repeat-same-seed", "G5-load"]
    g4_spec, repeat, load = trainer.specs
    ckpt = str(training.g4_checkpoint(deps))
    assert g4_spec.overrides["training"]["save"] == ckpt and load.overrides["training"]["load"] == ckpt
    # the repeat trains what G4 trained (same iterations, seed, init) and is its own launch, never a reuse
    assert "save" not in repeat.overrides["training"] and not repeat.force
    same = {k: v for k, v in g4_spec.overrides["training"].items() if k not in ("save", "save_interval")}
    assert {k: v for k, v in repeat.overrides["training"].items() if k != "save_interval"} == same
    assert load.overrides["training"]["train_iters"] == 8 and g5["launches"] == 2 and g4["launches"] == 1


def test_nondeterministic_trainer_fails_g5(monkeypatch, tmp_path):
    _, g4, g5 = _run(monkeypatch, tmp_path, FakeTrainer(deterministic=False))
    assert g4["passed"] and not g5["passed"] and "same seed, different losses" in g5["summary"]


def test_g4_without_a_checkpoint_fails_g5_without_a_load_launch(monkeypatch, tmp_path):
    trainer = FakeTrainer(saves=False)
    _, g4, g5 = _run(monkeypatch, tmp_path, trainer)
    assert not g5["passed"] and "G4 saved no checkpoint" in g5["summary"]
    assert [s.gate for s in trainer.specs] == ["G4-single-process", "G5-repeat-same-seed"]


def test_checkpoint_folder_follows_the_code_state(monkeypatch, tmp_path):
    deps = _deps(tmp_path)
    monkeypatch.setattr(training, "target_state", lambda target: "aaaa")
    first = training.g4_checkpoint(deps)
    monkeypatch.setattr(training, "target_state", lambda target: "bbbb")  # a repair committed in between
    assert training.g4_checkpoint(deps) != first


def test_g4_fails_on_training_parity_after_a_clean_launch(monkeypatch, tmp_path):
    """A launch whose loss is finite and falling still fails G4 when the K steps do not match the source; the parity
    record is kept for the report, and G5 still finds G4's launch (not the parity evidence) to compare with."""
    cause = "step 1: parameter group model.visual.merger gets no gradient in the migrated model"
    _, g4, g5 = _run(monkeypatch, tmp_path, FakeTrainer(), parity_problems=[cause])
    assert not g4["passed"] and f"training parity: {cause}" in g4["summary"]
    assert g4["parity"]["training"]["status"] == "fail" and len(g4["evidence"]) == 2
    assert g5["passed"], g5["summary"]


def test_g4_summary_carries_the_training_parity_figures(monkeypatch, tmp_path):
    calls.clear()
    _, g4, _ = _run(monkeypatch, tmp_path, FakeTrainer())
    assert calls == [False]  # a source folder without safetensors weights: no real-weights run
    calls.clear()
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "model-00001-of-00002.safetensors").write_bytes(b"")
    _, g4, _ = _run(monkeypatch, tmp_path, FakeTrainer())
    assert calls == [False, True] and set(g4["parity"]) == {"training", "training_real_weights"}
    assert "on the real weights cut pass: 20 steps" in g4["summary"]
    assert g4["passed"] and "training parity pass: 20 steps" in g4["summary"]
    # the export round trip ran on G4's own save folder, and the gate keeps its record
    assert "HF export pass: 12 tensors bit-exact" in g4["summary"]
    assert g4["hf_export"]["checkpoint"] == str(training.g4_checkpoint(_deps(tmp_path)))


def test_g4_sizes_its_parity_probes_from_its_own_launch(monkeypatch, tmp_path):
    """Both of G4's parity probes get the launch's measured median step (a real-scale source's 25 s step must not
    meet a limit sized for a tiny one) and its wall as the setup."""
    work.clear()
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "model-00001-of-00002.safetensors").write_bytes(b"")
    _, g4, _ = _run(monkeypatch, tmp_path, FakeTrainer(step_ms=25044.95))
    assert [w["step_s"] for w in work] == [25.04495, 25.04495]
    assert all(w["setup_s"] is not None and w["setup_s"] >= 0 for w in work)


def test_a_launch_states_the_dataloader_workers_it_ran_otherwise_than_the_delivered_yaml():
    """The evidence of a CPU launch says its dataloader ran in-process while the delivered YAML keeps its workers;
    a launch that ran the delivered count says nothing."""
    delivered = {"data": {"dataloader_param": {"num_workers": 8}}}
    note = training.loader_note({"data": {"dataloader_param": {"num_workers": 0}}}, delivered)
    assert note and "num_workers 0 in this launch, 8 in the delivered YAML" in note
    assert training.loader_note(delivered, delivered) is None
    assert "framework's default" in training.loader_note({"data": {"dataloader_param": {"num_workers": 0}}}, {})
    assert training.loader_note({}, delivered) is None  # no per-run YAML read: nothing to say
