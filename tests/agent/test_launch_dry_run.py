"""G3's launch-script dry run: the delivered script run through bash with torchrun shadowed by a recorder, the
recorded argv parsed by torchrun's own parser (the probe, run here for real in this interpreter), and what torchrun
would open checked from the cwd it was started in. The scripts are the stand-in's own example and a copy of the real
MindSpeed-MM example's shape; the two heldout4 launch faults are applied with their own edits. Nothing here names a
fault's message."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import msmigrate
from msmigrate.agent.launch_dry_run_checks import dry_run_findings
from msmigrate.knowledge.classifier import classify
from msmigrate.testbeds.faults import all_faults
from msmigrate.tools.launch_dry_run import dry_run
from msmigrate.tools.runtime import run_probe

STANDIN = Path(msmigrate.__file__).parent / "testbeds" / "standin" / "tree"
SCRIPT = "examples/qwen3vl/finetune_qwen3vl.sh"
CONFIG = "examples/qwen3vl/qwen3vl_config.yaml"
FAULTS = {f.id: f for f in all_faults()}
# the real MindSpeed-MM example's shape: a toolkit file only an Ascend host has, the YAML through a variable, a log
# read back after the run
REAL_SHAPE = """# 根据实际情况修改 ascend-toolkit 路径
source /usr/local/Ascend/cann/set_env.sh
export NON_MEGATRON=true
NPUS_PER_NODE=2
MASTER_ADDR=localhost
MASTER_PORT=6000
NNODES=1
NODE_RANK=0
DISTRIBUTED_ARGS="
    --nproc_per_node $NPUS_PER_NODE \\
    --nnodes $NNODES \\
    --node_rank $NODE_RANK \\
    --master_addr $MASTER_ADDR \\
    --master_port $MASTER_PORT
"
logfile=$(date +%Y%m%d)_$(date +%H%M%S)
config_path=examples/qwen3vl/qwen3vl_config.yaml
mkdir -p logs
torchrun $DISTRIBUTED_ARGS mindspeed_mm/fsdp/train/trainer.py \\
    ${config_path} \\
    2>&1 | tee logs/train_${logfile}.log
STEP_TIME=`grep "elapsed time per iteration" logs/train_${logfile}.log | awk -F ':' '{print$2}' | head -n 1`
echo "Elapsed Time Per iteration (ms): $STEP_TIME" | tee -a logs/train_${logfile}.log
"""


def _parse(argv):
    res = run_probe(sys.executable, "launch_args", ["--argv-json", __import__("json").dumps(argv)], timeout=120)
    assert res.ok, res.error
    return res.data["result"]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkout")
    for rel in ("mindspeed_mm/fsdp/train/trainer.py", CONFIG, SCRIPT):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STANDIN / rel, root / rel)
    return root


def _with(root: Path, text: str) -> Path:
    (root / SCRIPT).write_text(text)
    return root


def _faulted(fault_id: str) -> str:
    text = (STANDIN / SCRIPT).read_text()
    (edit,) = FAULTS[fault_id].edits
    assert text.count(edit.old) == 1
    return text.replace(edit.old, edit.new)


@pytest.mark.parametrize("text", [(STANDIN / SCRIPT).read_text(), REAL_SHAPE], ids=["standin", "real-shape"])
def test_the_green_scripts_hand_torchrun_what_resolves(checkout, text):
    before = sorted(p.relative_to(checkout) for p in checkout.rglob("*"))
    found, facts = dry_run_findings(SCRIPT, _with(checkout, text), _parse)
    assert found == [] and facts["examined"], facts
    (call,) = facts["parsed"]
    assert call["cwd"] == "." and call["training_script"] == "mindspeed_mm/fsdp/train/trainer.py"
    assert call["training_script_args"] == [CONFIG]
    # what the script wrote (logs/, its tee) stayed in the shadow: the checkout is as it was
    assert sorted(p.relative_to(checkout) for p in checkout.rglob("*")) == before


def test_a_quoted_argument_block_is_one_word_torchrun_takes_for_its_script(checkout):
    found, facts = dry_run_findings(SCRIPT, _with(checkout, _faulted("h4-config-launch-args-quoted")), _parse)
    assert facts["examined"] and [f["key"] for f in found] == ["training_script"]
    msg = found[0]["message"]
    assert '"$DISTRIBUTED_ARGS"' in msg and "ONE word" in msg and msg.startswith("line ")
    verdict = classify(f"[launch-dry-run] {SCRIPT}: {msg}", finding_codes=["launch-dry-run"])
    assert verdict.owner == "config"


def test_a_cd_into_the_scripts_folder_moves_every_relative_path(checkout):
    found, facts = dry_run_findings(SCRIPT, _with(checkout, _faulted("h4-config-launch-cd-into-example")), _parse)
    assert facts["parsed"][0]["cwd"] == "examples/qwen3vl"
    assert [f["key"] for f in found] == ["training_script", CONFIG]
    assert all("cd \"$(dirname \"$0\")\"" in f["message"] for f in found)


def test_a_module_launcher_is_recorded_and_its_parse_error_reported(checkout):
    text = ("python -m torch.distributed.run --nproc_per_node 2 mindspeed_mm/fsdp/train/trainer.py "
            f"{CONFIG}\npython -c 'print(1)'\n")
    found, facts = dry_run_findings(SCRIPT, _with(checkout, text), _parse)
    assert found == [] and facts["parsed"][0]["launcher"] == "python -m torch.distributed.run"
    found, _ = dry_run_findings(SCRIPT, _with(checkout, f"torchrun --master_port six t.py {CONFIG}\n"), _parse)
    assert [f["key"] for f in found] == ["torchrun"] and "invalid int value" in found[0]["message"]


def test_a_process_count_keyword_torchrun_refuses_on_this_host_is_a_finding(checkout):
    """`--nproc_per_node gpu` parses, and torchrun's own resolution of it counts CUDA devices: on a host without
    CUDA it refuses to start any rank. `cpu` resolves here (the CPU count): no finding."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA host resolves gpu")
    text = (STANDIN / SCRIPT).read_text().replace("--nproc_per_node $NPUS_PER_NODE", "--nproc_per_node gpu")
    assert "--nproc_per_node gpu" in text
    found, facts = dry_run_findings(SCRIPT, _with(checkout, text), _parse)
    assert [(f["code"], f["key"]) for f in found] == [("launch-size", "--nproc_per_node")]
    assert "Cuda is not available" in found[0]["message"] and facts["parsed"][0].get("local_world_size") is None
    verdict = classify(f"[launch-size] {SCRIPT}: {found[0]['message']}", finding_codes=["launch-size"])
    assert verdict.owner == "config"
    found, facts = dry_run_findings(SCRIPT, _with(checkout, text.replace("nproc_per_node gpu", "nproc_per_node cpu")),
                                    _parse)
    assert found == [] and facts["parsed"][0]["local_world_size"] >= 1


def test_an_option_left_without_its_value_by_the_host_is_not_judged(checkout):
    # a multi-node script's rank and rendezvous come from a hostfile only the cluster has: here they are empty
    text = ('NODE_RANK=$(awk \'{print $1}\' /nonexistent/hostfile)\nMASTER_ADDR=$(head -n1 /nonexistent/hostfile)\n'
            f'torchrun --nnodes 2 --node_rank $NODE_RANK --master_addr $MASTER_ADDR t.py {CONFIG}\n')
    found, facts = dry_run_findings(SCRIPT, _with(checkout, text), _parse)
    assert found == [] and facts["examined"] is False and "expected one argument" in facts["not_examined"][0]["why"]


def test_a_script_that_stops_before_its_launcher_is_not_examined(checkout):
    text = "set -e\nsource /nonexistent/toolkit/set_env.sh\ntorchrun $NOPE t.py\n"
    found, facts = dry_run_findings(SCRIPT, _with(checkout, text), _parse)
    assert found == [] and facts["examined"] is False and "no torchrun" in facts["why_not"]
    # and where the parser cannot run, nothing is claimed either
    found, facts = dry_run_findings(SCRIPT, _with(checkout, (STANDIN / SCRIPT).read_text()), lambda argv: None)
    assert found == [] and facts["examined"] is False


def test_a_script_that_stops_where_the_one_it_was_derived_from_reaches_torchrun_is_a_finding(checkout):
    example = (STANDIN / SCRIPT).read_text()
    strict = example.replace("#!/bin/bash\n", "#!/bin/bash\nset -euo pipefail\n", 1)
    assert strict != example
    found, facts = dry_run_findings(SCRIPT, _with(checkout, strict), _parse, reference=("the example's script",
                                                                                        example))
    (f,) = found
    assert f["code"] == "launch-dry-run" and f["path"] == SCRIPT and facts["examined"] is True
    assert "before it reaches torchrun" in f["message"] and "`set -euo pipefail`" in f["message"]
    assert facts["reference"]["calls"] == 1
    # a stop the derived script shares is this machine's, not the script's: still not examined
    shared = "set -e\nsource /nonexistent/toolkit/set_env.sh\ntorchrun $NOPE t.py\n"
    found, facts = dry_run_findings(SCRIPT, _with(checkout, shared + "# edited\n"), _parse,
                                    reference=("the example's script", shared))
    assert found == [] and facts["examined"] is False and facts["reference"]["calls"] == 0
    # and the unchanged script that reaches torchrun never needs the comparison
    found, facts = dry_run_findings(SCRIPT, _with(checkout, example), _parse, reference=("x", strict))
    assert found == [] and facts["examined"] is True and "reference" not in facts


def test_on_a_migrations_branch_the_script_is_compared_with_the_version_msmigrate_wrote(tmp_path):
    # a verify of a migration on its branch: the similar example is the delivered config itself, so what the script
    # stands for is the version this product committed; a later commit (a hand edit) that makes it stop is found
    import subprocess

    from msmigrate.agent.routes.fsdp2.draft_config import derived_script

    target = tmp_path / "target"
    for rel in ("mindspeed_mm/fsdp/train/trainer.py", CONFIG, SCRIPT):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STANDIN / rel, target / rel)

    def commit(message):
        for argv in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message]):
            subprocess.run(["git", *argv], cwd=target, check=True)

    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    commit("base")
    example = (STANDIN / SCRIPT).read_text()
    (target / SCRIPT).write_text(example + "# sized\n")
    commit(f"msmigrate: write {SCRIPT} (launch script mirroring the similar example)")
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=target, capture_output=True, text=True,
                         check=True).stdout.strip()
    plan = {"similar_case": CONFIG, "config_path": CONFIG, "script_path": SCRIPT}
    assert derived_script(target, plan) is None  # unchanged since msmigrate wrote it
    (target / SCRIPT).write_text("#!/bin/bash\nset -euo pipefail\n" + (example + "# sized\n").split("\n", 1)[1])
    commit("hand edit: strict mode")
    what, text = derived_script(target, plan)
    assert what == f"the version msmigrate wrote at {sha}" and text == example + "# sized\n"
    found, facts = dry_run_findings(SCRIPT, target, _parse, reference=(what, text))
    (f,) = found
    assert f["code"] == "launch-dry-run" and f"msmigrate wrote at {sha}" in f["message"]


def _read(args, cwd):
    """The trainer_args probe run for real on the stand-in's own tree (its ConfigManager and Arguments)."""
    res = run_probe(sys.executable, "trainer_args", ["--call-json", __import__("json").dumps({"args": args,
                                                                                             "cwd": cwd})],
                    cwd=STANDIN, env_extra={"NON_MEGATRON": "true"}, timeout=180)
    assert res.ok, res.error
    return res.data["result"]


TRAINER = "mindspeed_mm/fsdp/train/trainer.py"


@pytest.mark.parametrize("edit,said", [
    (("torchrun $DISTRIBUTED_ARGS ", "python -m torch.distributed.launch $DISTRIBUTED_ARGS "),
     "torch.distributed.launch without --use-env puts --local-rank=0 ahead"),
    (("_config.yaml \\\n", "_config.yaml \\\n    train_iters=20 \\\n"),
     "Command-line argument 'train_iters' is not defined")], ids=["legacy-launcher", "bare-override"])
def test_what_the_trainer_is_handed_is_read_by_its_own_configuration_loading(checkout, edit, said):
    green = (STANDIN / SCRIPT).read_text()
    found, _ = dry_run_findings(SCRIPT, _with(checkout, green), _parse, read=_read, trainer=TRAINER)
    assert found == []
    assert green.count(edit[0]) == 1
    found, facts = dry_run_findings(SCRIPT, _with(checkout, green.replace(*edit)), _parse, read=_read,
                                    trainer=TRAINER)
    (f,) = found
    assert f["code"] == "launch-dry-run" and f["key"] == "trainer-arguments" and said in f["message"]
    # with --use-env the legacy launcher hands the script its own arguments only, as torchrun does
    if "legacy" in said or "launch " in edit[1]:
        fixed = green.replace(edit[0], "python -m torch.distributed.launch --use-env $DISTRIBUTED_ARGS ")
        assert dry_run_findings(SCRIPT, _with(checkout, fixed), _parse, read=_read, trainer=TRAINER)[0] == []


def test_the_recorder_sees_the_shells_words_and_the_scripts_environment(tmp_path):
    (tmp_path / "run.sh").write_text('export A_KNOB=7\nARGS="--nnodes 1 --nproc_per_node 2"\n'
                                     'torchrun $ARGS "my script.py" "a b"\n')
    result = dry_run(tmp_path / "run.sh", tmp_path)
    (call,) = result.calls
    assert call.argv == ["--nnodes", "1", "--nproc_per_node", "2", "my script.py", "a b"]
    assert call.cwd == "." and call.set_env.get("A_KNOB") == "7"


def test_the_rules_config_phase_derives_the_script_again_after_the_dry_run_rejects_it(tmp_path):
    from types import SimpleNamespace

    from msmigrate.agent.policies.base import PolicyView
    from msmigrate.agent.routes.fsdp2.rules.config import _rederived_script

    target = tmp_path / "target"
    for rel in (CONFIG, SCRIPT):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STANDIN / rel, target / rel)
    delivered = "examples/m/finetune_m.sh"
    plan = {"similar_case": CONFIG, "config_path": "examples/m/m.yaml", "script_path": delivered}
    (target / delivered).parent.mkdir(parents=True)
    example = (STANDIN / SCRIPT).read_text().replace(CONFIG, plan["config_path"])
    (target / delivered).write_text(example.replace("torchrun $DISTRIBUTED_ARGS ", 'torchrun "$DISTRIBUTED_ARGS" '))
    state = {"plan": plan, "gates": {"G3": {"finding_codes": ["launch-dry-run"]}}}
    view = PolicyView("config", state, [], [], SimpleNamespace(target=target, runtime_python=sys.executable,
                                                                 probe_timeout_s=120))
    assert _rederived_script(view)[1] == example
    state["gates"]["G3"]["finding_codes"] = ["launch-port"]  # another finding: not this repair's
    assert _rederived_script(view) is None


@pytest.mark.parametrize("fault_id,how", [("h4-config-launch-args-quoted", '$DISTRIBUTED_ARGS unquoted'),
                                          ("h4-config-launch-cd-into-example", "(cd) removed")])
def test_a_faulted_example_is_repaired_in_its_own_lines_as_the_dry_run_verifies(checkout, fault_id, how):
    # the similar example is the faulted script itself (a copy of a delivered migration): re-deriving repeats it
    from msmigrate.agent.launch_dry_run_checks import verified_repair

    _with(checkout, _faulted(fault_id))
    what, text = verified_repair(SCRIPT, checkout, _parse)
    assert how in what and text == (STANDIN / SCRIPT).read_text()
    _with(checkout, "torchrun --nnodes 1 \"$A\" \"$B\" t.py\n")  # two quoted expansions: which one is not known
    assert verified_repair(SCRIPT, checkout, _parse) is None


def test_what_reaches_outside_the_shadow_is_not_run(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("x")
    root = tmp_path / "checkout"
    (root / "ckpt").mkdir(parents=True)
    (root / "ckpt" / "old.pt").write_text("")
    (root / "run.sh").write_text(f"pip install transformers==0.0.1\npython -m pip install nothing\n"
                                 f"rm -rf {outside}\nrm -rf ckpt\ncurl https://example.invalid\n"
                                 "torchrun --nnodes 1 t.py\n")
    result = dry_run(root / "run.sh", root)
    assert len(result.calls) == 1 and result.returncode == 0
    assert (outside / "keep.txt").is_file() and (root / "ckpt" / "old.pt").is_file()  # the checkout's own too


def test_the_script_a_launch_stands_for_never_reads_the_yaml(tmp_path):
    # a verify of a YAML with a pasted duplicate key: G3 reports the YAML; the launch check must not crash on it
    from msmigrate.agent.routes.fsdp2.draft_config import derived_script

    for rel in (CONFIG, SCRIPT):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STANDIN / rel, tmp_path / rel)
    (tmp_path / CONFIG).write_text((STANDIN / CONFIG).read_text() + "training:\n  lr: 1.0e-5\n")
    plan = {"similar_case": CONFIG, "config_path": CONFIG, "script_path": SCRIPT}
    assert derived_script(tmp_path, plan) is None  # the script is its own example's, unchanged: nothing to compare
