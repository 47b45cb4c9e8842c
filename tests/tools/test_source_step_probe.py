"""The probe's side of ``--source-step`` (``probes/_source_step.py`` and ``training_parity.py``), in process on the
patchlm fixture, no migration and no torchrun: the user's step loads from its file and its form is read from its
parameters; the fixture's step computes the loss of the fixture's own data convention (``causal_lm_loss``: labels
equal to the ids, -100 where nothing trains, shifted inside the loss); the probe's fixed-batch loss and precheck run
it; and the first-loss cause names a step ×2 as a loss scale and a step that does not shift its labels as such."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from msmigrate.testbeds.fixtures import build_source, causal_lm_loss, model_inputs

REPO = Path(__file__).resolve().parents[2]
PROBES = REPO / "msmigrate" / "tools" / "probes"
USER_STEP = REPO / "msmigrate" / "testbeds" / "fixtures" / "source_steps" / "patchlm_step.py"
WRONG = REPO / "tests" / "agent" / "patchlm_wrong_steps.py"


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    sys.path.insert(0, str(PROBES))
    import _source_step
    import training_parity

    folder = build_source("patchlm", tmp_path_factory.mktemp("patchlm") / "src")
    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, trust_remote_code=True, torch_dtype=torch.float32).eval()
    batch = model_inputs("patchlm", folder)
    yield _source_step, training_parity, model, batch
    sys.path.remove(str(PROBES))


def test_the_step_loads_from_its_file_with_its_form(probe, tmp_path):
    steps, _, _, _ = probe
    fn, form = steps.load_step(f"{USER_STEP}:training_step")
    assert form == "loss" and fn.__name__ == "training_step"
    (tmp_path / "loop_mod.py").write_text("def loop(model, micro_batches, settings):\n    return []\n\n"
                                          "def bad(model):\n    return 0\n")
    sys.path.insert(0, str(tmp_path))
    try:
        assert steps.load_step("loop_mod:loop")[1] == "loop"  # module:function, importable in the runtime
    finally:
        sys.path.remove(str(tmp_path))
    with pytest.raises(TypeError, match="1 required positional"):
        steps.load_step(f"{tmp_path / 'loop_mod.py'}:bad")
    with pytest.raises(ValueError, match="no function 'missing'"):
        steps.load_step(f"{USER_STEP}:missing")


def test_the_fixture_step_is_the_fixture_data_conventions_loss(probe):
    import torch

    steps, tp, model, batch = probe
    fn, form = steps.load_step(f"{USER_STEP}:training_step")
    with torch.no_grad():
        expected = float(causal_lm_loss(model(**{k: v for k, v in batch.items() if k != "labels"})["logits"],
                                        batch["labels"]))
    assert tp.fixed_loss(model, batch, loss_of=fn) == pytest.approx(expected, rel=1e-6)
    # the probe's precheck runs the step on the whole batch: no "not comparable" for a forward without labels
    why_not, before = tp.source_precheck(model, batch, None, step=(fn, form))
    assert why_not is None and before == pytest.approx(expected, rel=1e-6)
    assert tp.source_precheck(model, batch, None, step=(fn, "loop")) == (None, None)


def test_the_first_loss_cause_names_a_scaled_or_unshifted_step(probe):
    steps, tp, model, batch = probe
    right, _ = steps.load_step(f"{USER_STEP}:training_step")
    doubled, _ = steps.load_step(f"{WRONG}:loss_doubled")
    unshifted, _ = steps.load_step(f"{WRONG}:labels_unshifted")
    target = tp.fixed_loss(model, batch, loss_of=right)  # the migrated model computes the right loss
    src = tp.fixed_loss(model, batch, loss_of=doubled)
    assert "0.5× the source's" in tp.loss_cause(model, [batch], src, target, loss_of=doubled, user_step="s.py:f")
    src = tp.fixed_loss(model, batch, loss_of=unshifted)
    cause = tp.loss_cause(model, [batch], src, target, loss_of=unshifted, user_step="s.py:f")
    assert cause.startswith("labels are shifted once more in the migrated model than in the user's step s.py:f")
