"""Probe: a recorded launcher argv parsed by the runtime's own torchrun argument parser (runs IN the target runtime;
imports nothing from msmigrate).

    python launch_args.py --argv-json '["--nproc_per_node", "2", "train.py", "cfg.yaml"]'

The argv is what the delivered launch script handed ``torchrun`` (or ``python -m torch.distributed.run``) when run
through the shell (``tools/launch_dry_run.py``). ``torch.distributed.run.get_args_parser()`` is the parser torchrun
itself uses, so what it makes of the words — which one is the training script, which are that script's arguments,
how many processes a node starts — is torchrun's reading, not a guess. Prints one line ``MSMIGRATE_PROBE_RESULT
{json}``: ``training_script``, ``training_script_args``, ``module`` / ``no_python`` (the script is a module name or
a plain command), ``nproc_per_node``, ``nnodes``, ``master_addr``, ``master_port``; or ``parse_error`` (the parser's
own message) — an argv torchrun rejects is a finding, not a failure of the probe.
"""
import contextlib
import io
import json
import sys

from _one_arg import one_arg_main

FIELDS = ("training_script", "training_script_args", "module", "no_python", "nproc_per_node", "nnodes",
          "master_addr", "master_port", "rdzv_backend", "rdzv_endpoint", "standalone")


def parse(words):
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(words)
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"parse_error": lines[-1] if lines else "torchrun's parser rejected the arguments"}
    return {k: getattr(args, k, None) for k in FIELDS}


def main(argv):
    return one_arg_main(argv, __doc__, "--argv-json", parse, json.loads)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
