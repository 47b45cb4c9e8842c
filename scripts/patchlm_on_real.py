"""Drive the scripted LLM play of the custom-code fixture patchlm (tests/agent/patchlm_script.py: written by the
project, not a recorded live play — none exists for patchlm) into a copy of a real MindSpeed-MM checkout, adapted BY
HAND where the play was written against the stand-in (not blind):

- its ``template.py`` and ``mm_plugin.py`` edits re-anchored on the real files (tests/realmm/adapted_plays.py);
- its launch script mirrors the real FSDP2 qwen3vl script (``finetune_qwen3vl_30B_v1.sh``, config path replaced): the
  real checkout has no ``examples/qwen3vl/finetune_qwen3vl.sh``;
- its processor folder also gets the source's ``config.json`` and ``configuration_patchlm.py``: the real
  ``load_tokenizer`` calls ``AutoConfig`` on that folder before the tokenizer (the stand-in's does not);
- its ``PatchLMProcessor`` names its parts on the class (``attributes``, ``image_processor_class``,
  ``tokenizer_class``): transformers 4.57's ``ProcessorMixin`` needs them, 5.x infers them.

    python scripts/patchlm_on_real.py WORK --target CHECKOUT --runtime-python PY [--source-step FILE.py:function]

WORK gets a copy of CHECKOUT, the source written by PY's transformers and the run folder; prints the exit status,
the gate table and G4's training-parity figures (one JSON object). patchlm's forward returns logits only and it ships
no training code, so G4's training parity is "not comparable" unless a source step is given: ``--source-step`` is
the run's option of that name (``msmigrate run --source-step``), e.g. the step a patchlm user has,
``msmigrate/testbeds/fixtures/source_steps/patchlm_step.py:training_step``."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "agent"), str(REPO / "tests" / "realmm")]
from live_recording import replay  # noqa: E402
from patchlm_script import build_script  # noqa: E402

import adapted_plays as ap  # noqa: E402

ap_ = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap_.add_argument("work")
ap_.add_argument("--target", required=True, help="the checkout to copy (left untouched)")
ap_.add_argument("--runtime-python", required=True)
ap_.add_argument("--source-step", help="FILE.py:function: the user's training step, G4's training-parity source side")
args = ap_.parse_args()
work = Path(args.work).resolve()
work.mkdir(parents=True, exist_ok=True)
py = args.runtime_python
target = work / "MindSpeed-MM"
if not target.exists():
    shutil.copytree(args.target, target, symlinks=True)
source = work / "source"
if not source.exists():
    subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", "fixtures", "source", "patchlm", str(source),
                    "--for-runtime", py], check=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
# the play mirrors the stand-in's examples/qwen3vl/finetune_qwen3vl.sh; the real checkout has no such file: it
# mirrors the real FSDP2 qwen3vl script instead (read there, its config path replaced), through a shadow folder
REAL_SH = "examples/qwen3vl/finetune_qwen3vl_30B_v1.sh"
shadow = work / "shadow"
(shadow / "examples/qwen3vl").mkdir(parents=True, exist_ok=True)
(shadow / "examples/qwen3vl/finetune_qwen3vl.sh").write_text((target / REAL_SH).read_text().replace(
    "examples/qwen3vl/qwen3vl_30B_config_v1.yaml", "examples/qwen3vl/qwen3vl_config.yaml"))
script = build_script(source, shadow, source / "data" / "train.json")
# the real load_tokenizer calls AutoConfig on preprocess_parameters.model_name_or_path before AutoTokenizer (the
# stand-in's does not): the play's processor folder gets the source's config.json and configuration code too
for turn in script["data"]:
    calls = turn.get("tool_calls") or []
    if any(c["arguments"].get("path", "").startswith("examples/patchlm/processor/") for c in calls):
        calls += [{"name": "write_file", "arguments": {"path": f"examples/patchlm/processor/{n}",
                   "content": (source / n).read_text(), "reason": "AutoConfig reads the processor folder"}}
                  for n in ("config.json", "configuration_patchlm.py")]
# transformers 4.57's ProcessorMixin needs the processor's parts named on the class (5.x infers them from __init__)
for turn in script["data"]:
    for c in turn.get("tool_calls") or []:
        if c["arguments"].get("path", "").endswith("processor/processing_patchlm.py"):
            c["arguments"]["content"] = c["arguments"]["content"].replace(
                "class PatchLMProcessor(ProcessorMixin):\n",
                'class PatchLMProcessor(ProcessorMixin):\n    attributes = ["image_processor", "tokenizer"]\n'
                '    image_processor_class = "AutoImageProcessor"\n    tokenizer_class = "AutoTokenizer"\n\n')
            assert "attributes = " in c["arguments"]["content"]
for turn in script["config"]:
    for c in turn.get("tool_calls") or []:
        if c["arguments"].get("path") == "examples/qwen3vl/finetune_qwen3vl.sh":
            c["arguments"]["path"] = REAL_SH
GLM = '    "glm4.1v": GLM4VPlugin,\n'
rec = ap.to_real({"fixture": "patchlm", "script": script},
                 anchors={GLM + "}": (GLM, GLM + '    "patchlm": PatchLMPlugin,\n')})
started = time.monotonic()
step = {"source_step": f"{Path(args.source_step.rpartition(':')[0]).resolve()}:{args.source_step.rpartition(':')[2]}"} \
    if args.source_step else {}
final = replay({**rec, "classify": []}, work, "patchlm-real", source=source, target=target,
               runtime_python=py, spec_extra=step)["final"]
g4 = (final.get("gates") or {}).get("G4") or {}
figures = {}
for name, run in {**(g4.get("parity") or {}),
                  **{"G6": ((final.get("gates") or {}).get("G6") or {}).get("parity", {}).get("training")}}.items():
    if run:
        fixed = run.get("fixed_batch") or {}
        figures[name] = {"status": run.get("status"), "steps": run.get("steps"), "source_step": run.get("source_step"),
                         "max_dloss": run.get("max_dloss"), "max_rel_dgrad_norm": run.get("max_rel_dgrad_norm"),
                         "fixed_batch_fall": fixed.get("fall"), "source_fall": fixed.get("source_fall"),
                         "groups": len(run.get("grad_groups") or []), "why_not": run.get("why_not"),
                         "problems": run.get("problems")}
export = g4.get("hf_export") or {}
print(json.dumps({"exit_status": final.get("exit_status"), "detail": str(final.get("exit_detail"))[:2000],
                  "gates": {g: v.get("passed") for g, v in (final.get("gates") or {}).items()},
                  "training_parity": figures, "hf_export": {k: export.get(k) for k in (
                      "status", "tensors", "exact", "max_abs_dlogit", "converter", "problems")},
                  "wall_s": round(time.monotonic() - started)}, indent=1, default=str))
