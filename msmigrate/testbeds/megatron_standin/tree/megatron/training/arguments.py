"""Stand-in of Megatron-LM's training argument parser (megatron/training/arguments.py there): the subset of
flags the stand-in loop reads, each a literal add_argument (so msmigrate's flag check can read it); an
unknown flag is an argparse error, as in Megatron."""
import argparse


def _parser():
    p = argparse.ArgumentParser(description="stand-in Megatron arguments", allow_abbrev=False)
    p.add_argument("--tensor-model-parallel-size", type=int, default=1)
    p.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    p.add_argument("--context-parallel-size", type=int, default=1)
    p.add_argument("--micro-batch-size", type=int, default=1)
    p.add_argument("--global-batch-size", type=int, default=None)
    p.add_argument("--seq-length", type=int, default=1024)
    p.add_argument("--train-iters", type=int, default=10)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--log-interval", type=int, default=1)
    p.add_argument("--save-interval", type=int, default=10000)
    p.add_argument("--eval-interval", type=int, default=10000)
    p.add_argument("--eval-iters", type=int, default=0)
    p.add_argument("--vocab-size", type=int, default=None)
    p.add_argument("--make-vocab-size-divisible-by", type=int, default=128)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--distributed-timeout-minutes", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-05)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--clip-grad", type=float, default=1.0)
    p.add_argument("--adam-beta1", type=float, default=0.9)
    p.add_argument("--adam-beta2", type=float, default=0.999)
    p.add_argument("--lr-warmup-fraction", type=float, default=0.0)
    p.add_argument("--tokenizer-type", type=str, default=None)
    p.add_argument("--lr-decay-style", type=str, default=None)
    p.add_argument("--normalization", type=str, default=None)
    p.add_argument("--load", type=str, default=None)
    p.add_argument("--save", type=str, default=None)
    p.add_argument("--context-parallel-algo", type=str, default=None)
    p.add_argument("--ckpt-format", type=str, default=None)
    p.add_argument("--distributed-backend", type=str, default="gloo", choices=["gloo", "nccl", "hccl"])
    p.add_argument("--use-mcore-models", action="store_true")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--fp16", action="store_true")
    p.add_argument("--swiglu", action="store_true")
    p.add_argument("--no-load-optim", action="store_true")
    p.add_argument("--no-load-rng", action="store_true")
    p.add_argument("--no-save-optim", action="store_true")
    p.add_argument("--no-save-rng", action="store_true")
    p.add_argument("--use-distributed-optimizer", action="store_true")
    p.add_argument("--log-tps", action="store_true")
    p.add_argument("--no-masked-softmax-fusion", action="store_true")
    p.add_argument("--no-gradient-accumulation-fusion", action="store_true")
    p.add_argument("--calculate-per-token-loss", action="store_true")
    return p


def parse_args(extra_args_provider=None):
    parser = _parser()
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    return parser.parse_args()
