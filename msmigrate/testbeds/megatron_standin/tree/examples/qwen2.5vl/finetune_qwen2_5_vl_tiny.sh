#!/bin/bash
# Stand-in launch of the Megatron VLM route: 2 CPU ranks, gloo, TP = PP = CP = 1.
NPUS_PER_NODE=2
MASTER_ADDR=localhost
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=1
NODE_RANK=0
WORLD_SIZE=$(($NPUS_PER_NODE*$NNODES))

MM_DATA="./examples/qwen2.5vl/data_tiny.json"
MM_MODEL="./examples/qwen2.5vl/model_tiny.json"
MM_TOOL="./mindspeed_mm/tools/tools.json"
LOAD_PATH="ckpt/mm_path/tiny_qwen2_5_vl"
SAVE_PATH="save_dir"
TP=1
PP=1
CP=1
MBS=1
GRAD_ACC_STEP=2
DP=$(($WORLD_SIZE/$TP/$PP/$CP))
GBS=$(($MBS*$GRAD_ACC_STEP*$DP))

DISTRIBUTED_ARGS="
    --nproc_per_node $NPUS_PER_NODE \
    --nnodes $NNODES \
    --node_rank $NODE_RANK \
    --master_addr $MASTER_ADDR \
    --master_port $MASTER_PORT
"

GPT_ARGS="
    --use-mcore-models \
    --tensor-model-parallel-size ${TP} \
    --pipeline-model-parallel-size ${PP} \
    --context-parallel-size ${CP} \
    --micro-batch-size ${MBS} \
    --global-batch-size ${GBS} \
    --tokenizer-type NullTokenizer \
    --vocab-size 128 \
    --seq-length 64 \
    --lr 1.0e-3 \
    --train-iters 6 \
    --seed 42 \
    --load $LOAD_PATH \
    --no-load-optim \
    --no-load-rng \
"

MM_ARGS="
    --mm-data $MM_DATA \
    --mm-model $MM_MODEL \
    --mm-tool $MM_TOOL
"

OUTPUT_ARGS="
    --log-interval 1 \
    --save-interval 10000 \
    --save $SAVE_PATH \
    --ckpt-format torch \
"
mkdir -p logs
torchrun $DISTRIBUTED_ARGS pretrain_vlm.py \
    $GPT_ARGS \
    $MM_ARGS \
    $OUTPUT_ARGS \
    --distributed-backend gloo \
    2>&1 | tee logs/train_tiny.log
exit ${PIPESTATUS[0]}
