"""Value-range and consistency checks: what the trainer would reject or divide by, caught at G3 instead of in a
training launch.

From the target's own argument definitions first (``probes/config_schema.py`` records them): the numeric bounds a
field declares (``Field(ge=...)``, dataclass metadata) and the checks its class's post-init makes before raising
(``if self.lr < self.lr_min: raise ValueError(...)``), evaluated here on the YAML's values over the schema's
defaults — never by instantiating the class. A check is evaluated only when every name in its condition is a field
value (``self.world_size`` comes from the launch, not the YAML: skipped) and reported only when the YAML sets one
of its fields (the target's own defaults are the target's business).

Where the target states nothing about a field, generic rules that follow from what the value means, each with its
reason: an integer size, length, step count or interval whose default is positive is used as a divisor or a loop
bound (0 or less breaks the run: ``micro_batch_size: 0`` divides by zero in the sampler, ``gradient_accumulation_
steps: 0`` makes every step empty); a ``*_ratio`` is a fraction in [0, 1]; a learning rate or weight decay is not
negative; Adam's moment decay rates (``adam_beta1`` / ``adam_beta2``, ``beta1`` / ``beta2``) are each in [0, 1) and
keep β1 < √β2 — the condition Adam's convergence analyses assume (Reddi et al. 2018, γ = β1/√β2 < 1; Kingma & Ba's
weaker β1²/√β2 < 1 fails too on the pair written in swapped order, 0.999 / 0.9): the first moment must forget faster
than the second's square root, or the update divides a slow momentum by a fast-moving scale.

Schedule arithmetic, from the section's own fields: where the schema has a training length (an integer
``train_iters`` / ``max_steps`` / ``total_steps``-like field) and a warmup (a ``*warmup*_ratio`` fraction of it or a
``*warmup*_iters`` / ``_steps`` count), the warmup's length in steps is set against the run's (the YAML's values
over the schema's defaults; not evaluated when an epoch count decides the length instead, which depends on the
dataset). A warmup that takes half the run or more keeps the learning rate below its peak for most of training — a
recipe's ratio carried over to a run of another length; recipes warm up for a few percent of their steps.
"""

from __future__ import annotations

import ast
import operator
import re
from typing import Any, Iterator

from msmigrate.tools.yaml_validator.findings import Finding, join_path
from msmigrate.tools.yaml_validator.schema import model_of
from msmigrate.tools.yaml_validator.semantics import _num  # one reading of a YAML number for every check

CODE = "value-out-of-range"
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_BOUND_TEST = {"gt": (operator.gt, ">"), "ge": (operator.ge, ">="), "lt": (operator.lt, "<"), "le": (operator.le, "<=")}
# names whose integer value is a size, length, step count or interval: used as a divisor or a loop bound (a count
# of workers or retries is not: 0 of those is a legitimate "none")
_SIZE_NAME = re.compile(r"(^|_)(size|steps|iters|len|length|interval)$")
_PLAIN_SIZE = re.compile(r"_(size|steps|iters|len|length)$")
_RATIO_NAME = re.compile(r"_ratio$")
_RATE_NAME = re.compile(r"^(lr|lr_\w+|\w+_lr|weight_decay)$")
_LENGTH_NAME = re.compile(r"^(train|max|total|num_train)_(iters|steps|iterations)$")
_EPOCHS_NAME = re.compile(r"(^|_)epochs$")
_WARMUP_FRACTION = re.compile(r"warmup\w*_(ratio|fraction|frac)$")
_WARMUP_COUNT = re.compile(r"warmup\w*_(iters|steps|iterations)$")
_WARMUP_MOST = 0.5  # a warmup of this share of the run or more: the peak learning rate is not what trains
_BETA_NAME = re.compile(r"^(?:(\w+)_)?beta([12])$")  # adam_beta1, beta2: one optimizer's pair shares the prefix


class _Unknown(Exception):
    """A name the YAML does not decide (a value computed at launch, a call): the check is not evaluated."""


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    if isinstance(node, ast.Name) and node.id == "self":
        return ""
    raise _Unknown(ast.unparse(node))


class _Values:
    """A section's values: the YAML's over the schema's defaults; records which fields a condition read."""

    def __init__(self, node: dict, section: dict):
        self.node, self.section, self.read = node, section, []

    def get(self, dotted: str) -> Any:
        node, section, value = self.node, self.section, None
        for i, part in enumerate(dotted.split(".")):
            fields = node.get("fields", {})
            if part not in fields:
                raise _Unknown(dotted)
            if isinstance(section, dict) and part in section:
                value = section[part]
            elif "default" in fields[part]:
                value = fields[part]["default"]
            else:
                raise _Unknown(dotted)
            sub = model_of(fields[part]["type"])
            if sub is not None:
                node, section = sub, value if isinstance(value, dict) else {}
        self.read.append(dotted)
        if isinstance(value, str) and _num(value) is not None:  # YAML reads 1e-4 (no dot) as a string
            return _num(value)
        return value

    def set_in_yaml(self, dotted: str) -> bool:
        section: Any = self.section
        for part in dotted.split("."):
            if not isinstance(section, dict) or part not in section:
                return False
            section = section[part]
        return True


def _eval(node: ast.AST, values: _Values) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute):
        return values.get(_dotted(node))
    if isinstance(node, ast.BoolOp):
        results = [_eval(v, values) for v in node.values]
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _eval(node.operand, values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, values)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        return _ARITH[type(node.op)](_eval(node.left, values), _eval(node.right, values))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, values)
            if type(op) not in _COMPARE:
                raise _Unknown(ast.unparse(node))
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_eval(e, values) for e in node.elts)
    raise _Unknown(ast.unparse(node))


def _message(source: str, values: _Values) -> str:
    """The target's own message with the YAML's values put in (an f-string's fields evaluated where they can be)."""
    try:
        expr = ast.parse(source, mode="eval").body
    except SyntaxError:
        return source
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.JoinedStr):
        parts = []
        for part in expr.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
                continue
            try:
                parts.append(str(_eval(part.value, values)))
            except (_Unknown, TypeError, ZeroDivisionError):
                parts.append("{" + ast.unparse(part.value) + "}")
        return "".join(parts)
    return source


def _sections(node: dict, data: Any, path: str = "") -> Iterator[tuple[str, dict, dict]]:
    """Every model node of the schema with the YAML mapping at its path ({} where the YAML has none)."""
    section = data if isinstance(data, dict) else {}
    yield path, node, section
    for name, fnode in node.get("fields", {}).items():
        sub = model_of(fnode["type"])
        if sub is not None and not sub.get("recursive"):
            yield from _sections(sub, section.get(name), join_path(path, name))


def range_checks(data: dict, schema_root: dict, said: set[str] = frozenset()) -> list[Finding]:
    """``said``: key paths another check already reported an error on (a target check reading one is not repeated)."""
    out: list[Finding] = []
    for path, node, section in _sections(schema_root, data):
        stated: set[str] = set()  # fields the target's own checks or bounds speak about
        for check in node.get("checks", []):
            values = _Values(node, section)
            try:
                hit = _eval(ast.parse(check["when"], mode="eval").body, values)
            except (_Unknown, SyntaxError, TypeError, ZeroDivisionError):
                continue
            stated.update(values.read)
            if any(join_path(path, f) in said for f in values.read):
                continue
            if hit and any(values.set_in_yaml(f) for f in values.read):
                first = next(f for f in values.read if values.set_in_yaml(f))
                out.append(Finding("error", CODE, join_path(path, first),
                                   f"the target rejects this: {_message(check['message'], values)} (its "
                                   f"{node.get('class', 'argument')} check `{check['when']}`)",
                                   f"change {join_path(path, first)} so that `{check['when']}` no longer holds"))
        for name, fnode in node.get("fields", {}).items():
            if name not in section:
                continue
            value = _num(section[name]) if not isinstance(section[name], bool) else None
            bounds = fnode.get("constraints") or {}
            if bounds:
                stated.add(name)
            for bound, limit in bounds.items():
                test, sign = _BOUND_TEST[bound]
                if value is not None and not test(value, limit):
                    out.append(Finding("error", CODE, join_path(path, name),
                                       f"{join_path(path, name)}={section[name]!r}: the target declares it {sign} "
                                       f"{limit}", f"use a value {sign} {limit}"))
            if value is None or name in stated or join_path(path, name) in said:
                continue
            out.extend(_generic(join_path(path, name), name, value, fnode))
        out.extend(_moment_pairs(path, node, section, stated, said))
        out.extend(_warmup_share(path, node, section, said))
    return out


def _value(fields: dict, section: dict, name: str) -> float | None:
    raw = section[name] if name in section else fields[name].get("default")
    return None if isinstance(raw, bool) else _num(raw)


def _warmup_share(path: str, node: dict, section: dict, said) -> list[Finding]:
    """A warmup that spans half the run or more (module docstring), checked when the YAML sets the warmup or the
    length and the section's fields decide both."""
    fields = node.get("fields", {})
    if any(_EPOCHS_NAME.search(n) and section.get(n) is not None for n in fields):
        return []  # the length follows from the dataset's size: not decidable from the YAML
    lengths = [n for n in fields if _LENGTH_NAME.match(n) and _scalar_kind(fields[n]["type"]) == "int"]
    set_lengths = [n for n in lengths if section.get(n) is not None]
    length_name = set_lengths[0] if len(set_lengths) == 1 else (
        lengths[0] if len(lengths) == 1 and not set_lengths else None)
    total = _value(fields, section, length_name) if length_name else None
    if not total or total <= 0:
        return []
    out = []
    for name in fields:
        fraction, count = _WARMUP_FRACTION.search(name), _WARMUP_COUNT.search(name)
        if not (fraction or count) or join_path(path, name) in said:
            continue
        if name not in section and length_name not in section:
            continue  # neither is the YAML's: the target's defaults are the target's business
        value = _value(fields, section, name)
        if value is None or value < 0 or (fraction and value > 1):
            continue  # the range rules above report those
        steps = int(value * total) if fraction else int(value)
        if steps >= _WARMUP_MOST * total:
            where = join_path(path, name) if name in section else join_path(path, length_name)
            out.append(Finding(
                "error", CODE, where,
                f"{join_path(path, name)}={value:g} with {join_path(path, length_name)}={int(total)}: the warmup "
                f"takes {steps} of the run's {int(total)} steps ({steps / total:.0%}), so the learning rate stays "
                "below its peak for most of training" + (" and never reaches it" if steps >= total - 1 else ""),
                f"size the warmup for this run's length (a few percent of {join_path(path, length_name)}, e.g. "
                + (f"{join_path(path, name)}: 0.03)" if fraction else f"{join_path(path, name)}: "
                   f"{max(1, int(0.03 * total))})")))
    return out


def _moment_pairs(path: str, node: dict, section: dict, stated: set[str], said) -> list[Finding]:
    """Adam's (β1, β2) pairs of a section, the YAML's values over the schema's defaults, checked when the YAML sets
    one of them and the target states nothing about either."""
    fields = node.get("fields", {})
    pairs: dict[str, dict[str, str]] = {}
    for name in fields:
        m = _BETA_NAME.match(name)
        if m:
            pairs.setdefault(m.group(1) or "", {})[m.group(2)] = name
    out = []
    for pair in pairs.values():
        if len(pair) != 2 or not any(pair[i] in section for i in "12") or any(pair[i] in stated for i in "12") or \
                any(join_path(path, pair[i]) in said for i in "12"):
            continue
        raw = {i: section[pair[i]] if pair[i] in section else fields[pair[i]].get("default") for i in "12"}
        b1, b2 = (None if isinstance(raw[i], bool) else _num(raw[i]) for i in "12")
        if b1 is None or b2 is None:
            continue
        first = join_path(path, pair["1"] if pair["1"] in section else pair["2"])
        both = f"{join_path(path, pair['1'])}={b1:g}, {join_path(path, pair['2'])}={b2:g}"
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            out.append(Finding("error", CODE, first, f"{both}: Adam's moment decay rates are each in [0, 1)",
                               "use values in [0, 1) (the usual pair is 0.9, 0.999)"))
        elif b1 >= b2 ** 0.5:
            out.append(Finding("error", CODE, first, f"{both}: β1 ≥ √β2 ({b2 ** 0.5:.4g}) breaks the condition "
                               "Adam's convergence rests on (β1 < √β2): the first moment would average over a longer "
                               "window than the second — the pair looks written in swapped order",
                               f"set {join_path(path, pair['1'])} below √β2 (swap the two values if they were "
                               "written in each other's place; the usual pair is 0.9, 0.999)"))
    return out


def _generic(path: str, name: str, value: float, fnode: dict) -> list[Finding]:
    kind = _scalar_kind(fnode["type"])
    default = _num(fnode.get("default"))
    # a positive default says 0 is not "off" for this key; without a default only the plain size names count
    sized = default > 0 if default is not None else bool(_PLAIN_SIZE.search(name))
    if kind == "int" and _SIZE_NAME.search(name) and value <= 0 and sized:
        return [Finding("error", CODE, path, f"{path}={int(value)}: a size, count or interval of 0 or less breaks "
                        "the trainer (it divides by it or loops over it: an empty step or a division by zero)",
                        f"use a positive {name}" + (f" (the target's default is {int(default)})" if default else ""))]
    if kind == "float" and _RATIO_NAME.search(name) and not 0 <= value <= 1:
        return [Finding("error", CODE, path, f"{path}={value:g}: a ratio is a fraction in [0, 1] (not a percentage)",
                        f"use {value / 100:g}" if 1 < value <= 100 else "use a value in [0, 1]")]
    if kind in ("float", "int") and _RATE_NAME.match(name) and value < 0:
        return [Finding("error", CODE, path, f"{path}={value:g}: a learning rate or weight decay is not negative",
                        "use a value >= 0")]
    return []


def _scalar_kind(tnode: dict) -> str:
    kind = tnode.get("kind")
    if kind == "optional":
        return _scalar_kind(tnode["inner"])
    if kind == "union":
        kinds = {_scalar_kind(o) for o in tnode["options"]}
        return kinds.pop() if len(kinds) == 1 else "mixed"
    return kind or ""
