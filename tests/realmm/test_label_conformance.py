"""The stand-in's dataset labels a conversation the way the real one does (behaviour, not text): the real
``SupervisedDatasetProcessor._encode_data_example`` and the stand-in's ``_supervised_example`` run on the same
encoded turns (a fake template: fixed prompt/answer ids, efficient_eos on/off, mask_history on/off), each in its own
runtime, and must give the same input_ids and labels. This is the label convention data parity reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.realmm

PAIRS = [[[10, 11], [20, 21]], [[12, 13], [22, 23]]]
CASES = [(eff, mh) for eff in (True, False) for mh in (False, True)]

FAKES = f"""
import json, sys
from types import SimpleNamespace as NS
PAIRS, CASES = {PAIRS!r}, {CASES!r}

class Plugin:
    def process_messages(self, messages, *rest):
        return messages

    def process_token_ids(self, ids, labels, *rest):
        return ids, labels

def template(efficient_eos):
    return NS(mm_plugin=Plugin(), efficient_eos=efficient_eos,
              encode_multiturn=lambda tok, messages, system=None, tools=None: [(list(a), list(b)) for a, b in PAIRS])

def args(mask_history):
    return NS(cutoff_len=100, mask_history=mask_history, train_on_prompt=False)

TOK = NS(eos_token_id=2)
"""

REAL = FAKES + """
from mindspeed_mm.fsdp.data.data_utils.func_utils.convert import SupervisedDatasetProcessor
out = {}
for eff, mh in CASES:
    proc = SupervisedDatasetProcessor(template=template(eff), tokenizer=TOK, processor=None, data_args=args(mh))
    ids, labels = proc._encode_data_example(prompt=[{}] * 3, response=[{}], system=None, images=[], videos=[],
                                            audios=[], tools=[])
    out[f"{eff}-{mh}"] = [ids, labels]
print("RESULT " + json.dumps(out))
"""

STANDIN = FAKES + """
from mindspeed_mm.fsdp.data.datasets.huggingface.qwen2vl_dataset import _supervised_example
converted = {"_prompt": [], "_response": [], "_images": None, "_videos": None, "_audios": None, "_system": None}
out = {}
for eff, mh in CASES:
    ex = _supervised_example(converted, template(eff), TOK, None, args(mh))
    out[f"{eff}-{mh}"] = [ex["input_ids"], ex["labels"]]
print("RESULT " + json.dumps(out))
"""


def _run(python: str, root, code: str, extra_path: str = "") -> dict:
    env = {**os.environ, "NON_MEGATRON": "true", "PYTHONPATH": os.pathsep.join(p for p in (str(root), extra_path) if p)}
    proc = subprocess.run([python, "-c", code], cwd=root, capture_output=True, text=True, timeout=600, env=env)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def test_standin_labels_turns_as_the_real_dataset(realmm_snapshot, real_runtime, tmp_path):
    from msmigrate.testbeds.standin import write_standin

    real = _run(real_runtime, realmm_snapshot / "MindSpeed-MM", REAL, str(realmm_snapshot / "MindSpeed"))
    standin = _run(sys.executable, write_standin(tmp_path / "standin", with_assets=False), STANDIN)
    assert standin == real
    # what data parity relies on: aligned labels, the efficient eos on position 0 and at the next turn's start
    assert real["True-False"][1] == [2, -100, 20, 21, 2, -100, 22, 23, 2]
