"""Checks shared by the blind fault groups' tests (tests/agent/test_heldout3_faults.py, test_heldout4_faults.py,
test_heldout5_faults.py, test_heldout_groups_6_to_12.py): a group is registered apart and well formed, the routing
bench reports every group, a runtime fault's simulation is the cause of the condition it stands for, and a data-path or
plugin fault changes what a green copy computes (or makes it fail)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from msmigrate.testbeds.faults import GROUPS, all_faults, fault_group, wrap_runtime

# the surfaces whose files are the run's own artifacts: where a fault's fix lies there, a full run must repair it
ARTIFACT_SURFACES = {"plugin", "mm_plugin", "template", "collator", "yaml", "launch"}


def assert_group_apart(group: str, faults: dict, prefix: str, size: int, per_owner_at_least: dict[str, int]) -> None:
    """``faults`` (id -> Fault) are the group ``group`` selects and nothing else, blind, spread over owners and
    surfaces, ``repair`` exactly on the run's own artifacts, and none repeats another group's edits or runtime."""
    everything = all_faults()
    assert {f.id for f in everything if fault_group(f) == group} == set(faults)
    assert group in GROUPS and not any(fault_group(f) == group for f in everything if f.id not in faults)
    assert all(i.startswith(prefix) and f.heldout for i, f in faults.items())
    per_owner = Counter(f.owner for f in faults.values())
    assert len(faults) >= size and all(per_owner[o] >= n for o, n in per_owner_at_least.items()), per_owner
    assert {f.surface for f in faults.values()} >= ARTIFACT_SURFACES | {"dataset", "runtime", "host"}
    # never repair on the records, the target's own data code, the runtime or the host
    assert all(f.repair == (f.surface in ARTIFACT_SURFACES) for f in faults.values())
    assert all((f.runtime is not None) == (f.owner == "environment") for f in faults.values())
    others = [f for f in everything if f.id not in faults]
    edits = {tuple(f.edits) for f in others if f.edits}
    assert not [i for i, f in faults.items() if f.edits and tuple(f.edits) in edits]
    runtimes = [f.runtime for f in others if f.runtime is not None]
    assert not [i for i, f in faults.items() if f.runtime is not None and f.runtime in runtimes]


def assert_bench_reports_every_group() -> None:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_fault_routing.py"
    spec = importlib.util.spec_from_file_location("bench_fault_routing_groups", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = [{"id": f.id, "owner": f.owner} for f in all_faults()]
    assert set(bench.grouped_totals(results)) == set(GROUPS)


def run_wrapped_and_plain(runtime, program: str, env: dict[str, str], folder: Path):
    """``program`` under the fault's wrapped runtime and under the plain interpreter, with the same variables."""
    python = wrap_runtime(runtime, sys.executable, folder / "rt", model_type="qwen2_vl")
    wrapped = subprocess.run([python, "-c", program], capture_output=True, text=True, timeout=180,
                             env={**os.environ, **env}, cwd=folder)
    plain = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=180,
                           env={**os.environ, **env}, cwd=folder)
    return wrapped, plain


# What a copy computes on the green records: the data path's first batch (the YAML's data settings, the copy's
# template / mm_plugin / collator) and, for ``model``, the plugin's loss on it in training mode (seeded)
_COMPUTE = '''import hashlib, importlib, json, sys
import torch, yaml
from mindspeed_mm.fsdp.data.datasets.huggingface.qwen2vl_dataset import get_qwen2vl_dataset
from mindspeed_mm.fsdp.data.data_utils.func_utils.collator import MultiModalDataCollatorForSeq2Seq
from mindspeed_mm.fsdp.data.data_utils.func_utils.convert import load_tokenizer
from mindspeed_mm.fsdp.data.data_utils.func_utils.model_args import ProcessorArguments
from mindspeed_mm.fsdp.data.data_utils.func_utils.template import get_template_and_fix_tokenizer

config_path, what, modeling = sys.argv[1:4]
with open(config_path, encoding="utf-8") as f:
    cfg = yaml.safe_load(f)
param = cfg["data"]["dataset_param"]
basic, pre = param["basic_parameters"], param["preprocess_parameters"]
dataset = get_qwen2vl_dataset(basic, pre, {"attr": param["attr"]})
loaded = load_tokenizer(ProcessorArguments(**pre))
template = get_template_and_fix_tokenizer(loaded["tokenizer"], basic["template"])
batch = MultiModalDataCollatorForSeq2Seq(template=template, **loaded)([dataset[i] for i in range(4)])
if what == "data":
    print("RESULT " + json.dumps({"input_ids": batch["input_ids"].tolist(), "labels": batch["labels"].tolist(),
                                  "pixels": hashlib.sha256(batch["pixel_values"].numpy().tobytes()).hexdigest()}))
else:
    module = importlib.import_module(modeling)
    torch.manual_seed(0)
    # (the attention the YAML names, as ModelHub asks for it: a model that refuses it fails here as in the trainer)
    model = module.Qwen2VLForConditionalGeneration.from_pretrained(
        cfg["model"]["model_name_or_path"], attn_implementation=cfg["model"].get("attn_implementation"))
    model.train()
    torch.manual_seed(1)
    print("RESULT " + json.dumps({"loss": model(**batch).loss.item()}))
'''


def compute(layout, green, what: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict | None]:
    program = tmp_path / "compute.py"
    program.write_text(_COMPUTE, encoding="utf-8")
    modeling = green["modeling"].removesuffix(".py").replace("/", ".")
    env = {**os.environ, "PYTHONPATH": str(layout.root), "NON_MEGATRON": "true"}
    out = subprocess.run([sys.executable, str(program), str(layout.path("{config}")), what, modeling],
                         capture_output=True, text=True, timeout=600, env=env, cwd=layout.root)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    return out, (json.loads(lines[-1].removeprefix("RESULT ")) if out.returncode == 0 and lines else None)


def computed_on_green(green, folder: Path) -> dict:
    """What the green copy computes, twice for the model (the seeded loss is reproducible, so a difference is the
    fault's)."""
    from standin_migration import fault_copy

    layout = fault_copy(green, folder)
    results = {}
    for what in ("data", "model", "model"):
        out, result = compute(layout, green, what, folder)
        assert result is not None, out.stderr[-3000:]
        assert results.setdefault(what, result) == result
    return results


def assert_computes_otherwise(layout, green, green_computed: dict, what: str, folder: Path) -> None:
    """The faulted copy computes another ``what`` than the green one, or fails in its own code (a loud fault)."""
    out, result = compute(layout, green, what, folder)
    if result is None:
        assert out.returncode != 0 and "Traceback" in out.stderr, out.stderr[-3000:]
        return
    if what == "model":
        assert abs(result["loss"] - green_computed["model"]["loss"]) > 1e-6, (result, green_computed["model"])
    else:
        assert result != green_computed["data"]
