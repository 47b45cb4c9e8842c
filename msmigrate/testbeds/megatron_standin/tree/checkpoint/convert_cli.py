"""``mm-convert <Converter> <hf_to_mm|mm_to_hf|resplit> --cfg.a.b VALUE ...`` (the real CLI is jsonargparse's
auto_cli over Commandable.subclasses; the stand-in reads the same dotted flags with its own small parser)."""
import json
import sys
from types import SimpleNamespace

from checkpoint.common.converter import Commandable


def _value(text):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _namespace(pairs):
    root = {}
    for key, value in pairs:
        node = root
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = _value(value)

    def wrap(d):
        return SimpleNamespace(**{k: wrap(v) if isinstance(v, dict) else v for k, v in d.items()})
    return wrap(root)


def main():
    import checkpoint  # noqa: F401  (imports every converter, which registers it)
    argv = sys.argv[1:]
    if len(argv) < 2:
        raise SystemExit("usage: mm-convert <Converter> <hf_to_mm|mm_to_hf|resplit> --cfg.key value ...")
    classes = {c.__name__: c for c in Commandable.subclasses}
    name, command, rest = argv[0], argv[1], argv[2:]
    if name not in classes:
        raise SystemExit(f"unknown converter {name!r}; known: {sorted(classes)}")
    if len(rest) % 2 or any(not k.startswith("--cfg.") for k in rest[::2]):
        raise SystemExit("arguments must be pairs of --cfg.<key> <value>")
    cfg = _namespace([(k[len("--cfg."):], v) for k, v in zip(rest[::2], rest[1::2])])
    getattr(classes[name], command)(cfg)


if __name__ == "__main__":
    main()
