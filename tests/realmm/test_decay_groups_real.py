"""The decay-groups probe's reading of the real MindSpeed-MM trainer (``probes/decay_groups.py``): its
``TrainingArguments`` define ``no_decay_modules`` / ``no_decay_params``, but the optimizer its ``Trainer.get_optimizer``
builds decays every parameter whatever they say (it does not pass them on, snapshot 57069cd). The probe's own
functions find both fields and see that setting them changes nothing: G3's finding then says the YAML cannot keep norms
and biases out, instead of proposing a setting the trainer ignores."""

from __future__ import annotations

import json
import subprocess

import pytest

from msmigrate.tools.runtime import PROBES_DIR

pytestmark = pytest.mark.realmm

SCRIPT = """
import json, os, sys
sys.path.insert(0, os.getcwd()); sys.path.insert(0, sys.argv[1])
import torch
from _single_rank import start_single_rank
start_single_rank()
from types import SimpleNamespace
from mindspeed_mm.fsdp.params.training_args import TrainingArguments
import decay_groups as dg
from training_parity import target_optimizer
t = TrainingArguments(weight_decay=0.1)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2))
cfg = SimpleNamespace(training=t)
out = {"fields": dg.exempting_fields(t), "before": dg.decayed_names(target_optimizer(cfg, model), model)}
for key, value in dg.candidate_values(["1.weight", "0.bias"], {"1.weight": "LayerNorm", "0.bias": "Linear"},
                                      out["fields"]).items():
    setattr(t, key, value)
out["after"] = dg.decayed_names(target_optimizer(cfg, model), model)
print("RESULT", json.dumps(out))
"""


def test_the_real_trainer_decays_every_parameter_whatever_its_no_decay_fields_say(tmp_path, real_checkout,
                                                                                   real_runtime):
    script = tmp_path / "real_decay.py"
    script.write_text(SCRIPT)
    res = subprocess.run([real_runtime, str(script), str(PROBES_DIR)], cwd=real_checkout, capture_output=True,
                         text=True, timeout=600, env={"NON_MEGATRON": "true", "PATH": "/usr/bin:/bin",
                                                      "OMP_NUM_THREADS": "1",
                                                      # the checkout is the session's shared copy: leave it clean
                                                      "PYTHONDONTWRITEBYTECODE": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.split("RESULT", 1)[1])
    assert out["fields"] == {"no_decay_modules": "modules", "no_decay_params": "names"}
    every = ["0.bias", "0.weight", "1.bias", "1.weight", "2.bias", "2.weight"]
    assert out["before"] == every and out["after"] == every
