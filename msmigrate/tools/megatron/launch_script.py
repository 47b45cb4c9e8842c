"""What a Megatron launch script runs: the entry point, the launcher's and the entry's flags with their values,
after the shell's own expansion of the script's variables (``TP=2`` ... ``--tensor-model-parallel-size ${TP}``,
``DP=$(($WORLD_SIZE/$TP/$PP/$CP))``). Nothing is executed: assignments are read top to bottom, ``$VAR`` /
``${VAR}`` / ``${VAR:-default}`` are substituted and ``$(( ))`` is evaluated over integers (``/`` is integer
division, as in the shell). A value that needs anything else (command substitution, a variable from the caller's
environment) stays unresolved and is listed, never guessed.
"""

from __future__ import annotations

import ast
import operator
import re
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=(.*)$", re.S)
VAR = re.compile(r"\$\{([A-Za-z_]\w*)(?::-([^}]*))?\}|\$([A-Za-z_]\w*)")
ARITH = re.compile(r"\$\(\(([^()]*(?:\([^()]*\)[^()]*)*)\)\)")
LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.floordiv,
       ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


@dataclass
class LaunchScript:
    entry: str | None = None  # the .py the launcher runs, e.g. pretrain_vlm.py
    launcher_args: dict[str, Any] = field(default_factory=dict)  # --nproc_per_node 8 ... (values as text)
    flags: dict[str, Any] = field(default_factory=dict)  # the entry's --flags: value text, or True for a switch
    variables: dict[str, str] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)  # variables or expressions left unexpanded
    error: str | None = None

    def int_flag(self, flag: str, default: int | None = None) -> int | None:
        value = self.flags.get(flag, default)
        try:
            return int(value) if value is not None and value is not True else default
        except (TypeError, ValueError):
            return default

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _arith(expr: str) -> int | None:
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPS:
            return OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(ast.dump(node))
    try:
        return ev(ast.parse(expr.strip(), mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None


def _expand(text: str, env: dict[str, str], unresolved: list[str]) -> str:
    def sub_var(m):
        name, default = m.group(1) or m.group(3), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        unresolved.append(name)
        return m.group(0)

    def sub_arith(m):
        inner = VAR.sub(sub_var, m.group(1))
        inner = re.sub(r"\b([A-Za-z_]\w*)\b", lambda v: env.get(v.group(1), v.group(1)), inner)  # bare names
        value = _arith(inner)
        if value is None:
            unresolved.append(m.group(0))
            return m.group(0)
        return str(value)

    return VAR.sub(sub_var, ARITH.sub(sub_arith, text))


def _logical_lines(text: str) -> list[str]:
    """Comments dropped, backslash continuations joined, double-quoted values spanning lines kept as one line."""
    out, buf = [], ""
    for raw in text.splitlines():
        line = raw if buf else raw.split(" #")[0]
        if not buf and line.lstrip().startswith("#"):
            continue
        buf = (buf + "\n" + line) if buf else line
        if buf.count('"') % 2:  # inside a multi-line double-quoted value
            continue
        if buf.endswith("\\"):
            buf = buf[:-1] + " "
            continue
        out.append(buf)
        buf = ""
    if buf:
        out.append(buf)
    return out


def _split_flags(tokens: list[str]) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("--"):
            name, eq, val = tok.partition("=")
            if eq:
                flags[name] = val
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                flags[name] = tokens[i + 1]
                i += 1
            else:
                flags[name] = True
        i += 1
    return flags


def parse_launch_script(text: str) -> LaunchScript:
    out = LaunchScript()
    env: dict[str, str] = {}
    for line in _logical_lines(text):
        m = ASSIGN.match(line)
        if m and not any(x in line.split("=", 1)[0] for x in LAUNCHERS):
            value = m.group(2).replace("\\\n", " ").strip()
            if value[:1] == '"' and value[-1:] == '"':
                value = value[1:-1]
            elif value[:1] == "'" and value[-1:] == "'":
                env[m.group(1)] = value[1:-1]  # single quotes: no expansion
                continue
            if re.search(r"\$\((?!\()|`", value):  # command substitution: the script's run decides it
                env[m.group(1)] = f"<{m.group(1)}>"
                out.unresolved.append(m.group(1))
                continue
            env[m.group(1)] = _expand(value, env, out.unresolved)
            continue
        if out.entry is None and any(lz in line for lz in LAUNCHERS):
            expanded = _expand(line, env, out.unresolved)
            cmd = re.split(r"\s(?:\||2>&1|>|&&|;)\s?", expanded)[0]
            try:
                tokens = shlex.split(cmd)
            except ValueError as exc:
                out.error = f"cannot split the launch line: {exc}"
                return out
            py = next((i for i, t in enumerate(tokens) if t.endswith(".py")), None)
            if py is None:
                out.error = "the launch line runs no .py entry point"
                return out
            out.entry = tokens[py]
            out.launcher_args = _split_flags(tokens[:py])
            out.flags = _split_flags(tokens[py + 1:])
    out.variables = env
    out.unresolved = sorted(set(out.unresolved))
    if out.entry is None and out.error is None:
        out.error = "no torchrun / torch.distributed launch line found"
    return out
