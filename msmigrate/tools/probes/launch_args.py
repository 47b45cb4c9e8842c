"""Probe: a recorded launcher argv parsed by the runtime's own torchrun argument parser (runs IN the target runtime;
imports nothing from msmigrate).

    python launch_args.py --argv-json '["--nproc_per_node", "2", "train.py", "cfg.yaml"]'

The argv is what the delivered launch script handed ``torchrun`` (or ``python -m torch.distributed.run``) when run
through the shell (``tools/launch_dry_run.py``). ``torch.distributed.run.get_args_parser()`` is the parser torchrun
itself uses, so what it makes of the words — which one is the training script, which are that script's arguments,
how many processes a node starts — is torchrun's reading, not a guess. Prints one line ``MSMIGRATE_PROBE_RESULT
{json}``: ``training_script``, ``training_script_args``, ``module`` / ``no_python`` (the script is a module name or
a plain command), ``nproc_per_node``, ``nnodes``, ``master_addr``, ``master_port``, and ``local_world_size`` (the
processes a node starts, as torchrun resolves ``--nproc_per_node`` on this host) or ``nproc_per_node_error`` (a
keyword it refuses here: ``gpu`` without CUDA); or ``parse_error`` (the parser's own message) — an argv torchrun
rejects is a finding, not a failure of the probe.
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
    out = {k: getattr(args, k, None) for k in FIELDS}
    out.update(local_world_size(args.nproc_per_node))
    return out


def local_world_size(nproc_per_node):
    """How many processes torchrun starts on this node for ``--nproc_per_node`` as this runtime resolves it (its own
    ``determine_local_world_size``: a number, or a keyword — gpu, cpu, auto, the accelerator's name — counted on this
    host): ``{"local_world_size": n}``, or ``{"nproc_per_node_error": its message}`` where torchrun refuses it here
    (``gpu`` on a host without CUDA)."""
    import logging

    try:
        from torch.distributed.run import determine_local_world_size
    except ImportError:
        return {}
    logging.disable(logging.INFO)
    try:
        return {"local_world_size": determine_local_world_size(str(nproc_per_node))}
    except (ValueError, RuntimeError) as exc:
        return {"nproc_per_node_error": f"{type(exc).__name__}: {exc}"}
    finally:
        logging.disable(logging.NOTSET)


def main(argv):
    return one_arg_main(argv, __doc__, "--argv-json", parse, json.loads)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
