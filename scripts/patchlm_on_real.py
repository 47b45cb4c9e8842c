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

    python scripts/patchlm_on_real.py WORK --target CHECKOUT --runtime-python PY

WORK gets a copy of CHECKOUT, the source written by PY's transformers and the run folder; prints the exit status and
the gate table (one JSON object)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
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
final = replay({**rec, "classify": []}, work, "patchlm-real", source=source, target=target,
               runtime_python=py)["final"]
print(json.dumps({"exit_status": final.get("exit_status"), "detail": str(final.get("exit_detail"))[:2000],
                  "gates": {g: v.get("passed") for g, v in (final.get("gates") or {}).items()}}, indent=1))
