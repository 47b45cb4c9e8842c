"""Probe: the arguments a launch line hands the trainer, read by the target's own configuration loading (runs IN the
target runtime, cwd = the target root; imports nothing from msmigrate).

    python trainer_args.py --call-json '{"args": ["--local-rank=0", "examples/m/m.yaml"], "cwd": "."}'

``args`` is the trainer's argv after its script name as the launcher would hand it (``tools/launch_dry_run.py``
recorded the launcher's argv; torchrun's parser split off the script's arguments; a ``torch.distributed.launch``
without ``--use-env`` puts ``--local-rank=<n>`` first), ``cwd`` where the launcher runs, relative to the root. The
FSDP2 trainer reads its configuration with ``ConfigManager(config_class=Arguments).load_and_parse()`` from
``sys.argv`` (the YAML as the first argument, ``key=value`` overrides after it): the same call is made here on
those arguments, so what it rejects or leaves out is the trainer's reading, not a guess. Prints one line
``MSMIGRATE_PROBE_RESULT {json}``: ``loaded`` (bool), ``rejected`` (the loading's own message and the one it was raised
from), ``yaml`` (the configuration file it read, None when it read none) and ``overrides_take_effect`` (False where
arguments besides the YAML leave the parsed configuration as the YAML alone gives it).
"""
import contextlib
import io
import json
import os
import sys

from _one_arg import one_arg_main


def _load(argv):
    from mindspeed_mm.config.config_manager import ConfigManager
    from mindspeed_mm.fsdp.params.argument import Arguments

    sys.argv = ["trainer.py", *argv]
    manager = ConfigManager(config_class=Arguments)
    with contextlib.redirect_stdout(io.StringIO()):
        return manager.load_and_parse(), getattr(manager, "config_file_path", None)


def _message(exc):
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__
    return text + (f" (from {type(cause).__name__}: {cause})" if cause is not None else "")


def check(call):
    root = os.getcwd()
    if root not in sys.path:
        sys.path.insert(0, root)
    os.chdir(os.path.join(root, call.get("cwd") or "."))
    args = [str(a) for a in call["args"]]
    # the framework's own modules first: a runtime that cannot import them is no finding about the arguments
    # (one_arg_main reports it as the probe's error)
    import mindspeed_mm.config.config_manager  # noqa: F401
    import mindspeed_mm.fsdp.params.argument  # noqa: F401
    from _single_rank import start_single_rank

    start_single_rank()  # the loading reads the rank layout a launcher sets (one rank here, as the probes run)

    try:
        parsed, yaml_file = _load(args)
    except Exception as exc:  # probe boundary: the trainer's own loading rejects these arguments
        return {"loaded": False, "rejected": _message(exc)[:800]}
    out = {"loaded": True, "yaml": yaml_file}
    rest = [a for a in args if a != yaml_file]
    if yaml_file and rest:
        alone, _ = _load([yaml_file])
        out["overrides_take_effect"] = repr(parsed) != repr(alone)
        out["other_args"] = rest[:20]
    return out


def main(argv):
    return one_arg_main(argv, __doc__, "--call-json", check, json.loads)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
