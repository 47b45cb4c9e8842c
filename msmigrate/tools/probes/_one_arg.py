"""The shape of a probe that takes one argument and prints one result line (imports nothing from msmigrate)."""
import argparse
import json

RESULT_MARKER = "MSMIGRATE_PROBE_RESULT "


def emit(payload):
    print(RESULT_MARKER + json.dumps(payload, default=str), flush=True)


def one_arg_main(argv, doc, flag, check, convert=lambda value: value):
    """``check(convert(<flag's value>))`` printed as the result; an ImportError (no torch.distributed: other gates
    report the runtime itself) printed as ``error``, exit 1."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument(flag, required=True)
    value = vars(parser.parse_args(argv))[flag.lstrip("-").replace("-", "_")]
    try:
        emit(check(convert(value)))
    except ImportError as exc:
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0
