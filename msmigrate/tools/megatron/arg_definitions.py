"""Which command-line flags the framework itself defines, read by AST from its source (nothing is imported), and
which flags of a Megatron launch script those definitions cover.

MindSpeed-MM and MindSpeed add their arguments to Megatron-LM's parser with ``add_argument``; Megatron-LM's own
definitions (``--tensor-model-parallel-size`` …) are not in the snapshots this project has, so a flag none of the
given files defines is reported as *unverified*, never as wrong. Pass only the files that extend the training
parser (MindSpeed-MM's arguments.py and configs/, MindSpeed's arguments.py and features_manager/): other modules
hold parsers of unrelated tools (auto-tuners, task trainers) whose flags would count as defined.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)")


@dataclass
class FlagCheck:
    defined: dict[str, str] = field(default_factory=dict)  # flag -> "file:line" of its add_argument
    unverified: list[str] = field(default_factory=list)  # no definition in the files read
    files_read: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def argument_definitions(paths: list[Path]) -> tuple[dict[str, str], int]:
    """Every ``--flag`` given as a literal to an ``add_argument`` call in the Python files under ``paths``."""
    out: dict[str, str] = {}
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(Path(p).rglob("*.py")))]
    for f in files:
        try:
            with warnings.catch_warnings():  # old escape sequences in the framework's own files are not ours to report
                warnings.simplefilter("ignore", SyntaxWarning)
                tree = ast.parse(f.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue  # a file that does not parse defines nothing we can trust
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                        out.setdefault(arg.value, f"{f}:{node.lineno}")
    return out, len(files)


def script_flags(text: str) -> list[str]:
    """The ``--flags`` a shell launch script passes (comments dropped, continuation lines joined)."""
    body = "\n".join(line.split(" #")[0] for line in text.replace("\\\n", " ").splitlines()
                     if not line.lstrip().startswith("#"))
    return sorted({"--" + m for m in FLAG.findall(body)})


def check_script_flags(script: Path, definition_paths: list[Path]) -> FlagCheck:
    try:
        text = Path(script).read_text(encoding="utf-8")
    except OSError as exc:
        return FlagCheck(error=f"cannot read {script}: {exc}")
    defs, n = argument_definitions(definition_paths)
    if not defs:
        return FlagCheck(files_read=n, error="no add_argument definitions found in the given files")
    flags = script_flags(text)
    return FlagCheck(defined={f: defs[f] for f in flags if f in defs}, unverified=[f for f in flags if f not in defs],
                     files_read=n)


def _set_attrs(test: ast.AST) -> list[str] | None:
    """``args.X is not None`` (or an ``or`` of such tests): the attributes whose being set alone makes it true."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [_set_attrs(v) for v in test.values]
        return None if any(p is None for p in parts) else [a for p in parts for a in p]
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
            and isinstance(test.left, ast.Attribute) and ast.unparse(test.left.value) == "args"):
        return [test.left.attr]
    return None


def refused_flags(root: Path) -> dict[str, str]:
    """Flags the framework's own argument checks refuse whatever their value: ``if args.X is not None: raise``
    (MindSpeed-MM's validate_args patch refuses ``--num-layers-per-virtual-pipeline-stage`` this way, as
    deprecated). flag -> "file:line: the raise's message"."""
    out: dict[str, str] = {}
    for f in sorted(Path(root).rglob("*.py")) if Path(root).is_dir() else []:
        text = f.read_text(encoding="utf-8", errors="replace")
        if "args." not in text or "raise" not in text:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)
                tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.If) and node.body and isinstance(node.body[0], ast.Raise)):
                continue
            attrs = _set_attrs(node.test)
            exc = node.body[0].exc
            msg = next((a.value for a in getattr(exc, "args", []) if isinstance(a, ast.Constant)
                        and isinstance(a.value, str)), "")
            for attr in attrs or []:
                out.setdefault("--" + attr.replace("_", "-"), f"{f.relative_to(root.parent)}:{node.lineno}: {msg}")
    return out
