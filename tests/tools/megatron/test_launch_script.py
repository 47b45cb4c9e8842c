"""Launch scripts are expanded the way the shell would, without running them."""
from msmigrate.tools.megatron.launch_script import parse_launch_script

SCRIPT = '''#!/bin/bash
NPUS_PER_NODE=8
NNODES=2
WORLD_SIZE=$(($NPUS_PER_NODE*$NNODES))
TP=2
PP=${PP:-4}
MBS=1
DP=$(($WORLD_SIZE/$TP/$PP))
GBS=$(($MBS*16*$DP))
MASTER_ADDR=$(head -n1 hostfile)  # decided at run time
DISTRIBUTED_ARGS="
    --nproc_per_node $NPUS_PER_NODE \\
    --nnodes $NNODES \\
    --master_addr $MASTER_ADDR
"
GPT_ARGS="
    --tensor-model-parallel-size ${TP} \\
    --pipeline-model-parallel-size ${PP} \\
    --micro-batch-size ${MBS} \\
    --global-batch-size ${GBS} \\
    --bf16 \\
"
# torchrun in a comment is not the launch line
torchrun $DISTRIBUTED_ARGS pretrain_vlm.py \\
    $GPT_ARGS \\
    --mm-model ./examples/x/model.json \\
    --distributed-backend nccl \\
    2>&1 | tee logs/train.log
'''


def test_variables_arithmetic_and_flags():
    r = parse_launch_script(SCRIPT)
    assert r.error is None and r.entry == "pretrain_vlm.py"
    assert r.launcher_args["--nproc_per_node"] == "8" and r.launcher_args["--nnodes"] == "2"
    assert r.flags["--tensor-model-parallel-size"] == "2" and r.int_flag("--pipeline-model-parallel-size") == 4
    assert r.int_flag("--global-batch-size") == 32  # 1 * 16 * (16 / 2 / 4)
    assert r.flags["--bf16"] is True and r.flags["--mm-model"] == "./examples/x/model.json"
    assert r.flags["--distributed-backend"] == "nccl" and "tee" not in r.flags


def test_command_substitution_is_unresolved_not_guessed():
    r = parse_launch_script(SCRIPT)
    assert "MASTER_ADDR" in r.unresolved and r.launcher_args["--master_addr"] == "<MASTER_ADDR>"


def test_no_launch_line():
    assert "no torchrun" in parse_launch_script("echo hi\n").error
    assert "no .py entry" in parse_launch_script("torchrun --nproc_per_node 2 -m foo\n").error
