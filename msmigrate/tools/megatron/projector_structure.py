"""What a vision projector *builds*, from evidence on both sides, as encoder_structure does for the encoder: the
registered projector class's ``__init__`` and ``forward`` read by AST (nothing imported) against the source's
projector tensors (safetensors headers: names and shapes).

Compared facts: the number of weight matrices, the number of norms, a width change before the first matrix (the
encoder's neighbouring patches concatenated: Qwen's merger takes 4 x the encoder width) and a pooling step (tokens
reduced by an op without weights: Gemma 3's average pool). LLaVA's projector is two matrices, no norm, no width
change; Qwen's is a norm, a width change and two matrices; Gemma 3's one matrix, one norm and a pooling step.

The source side: the projector is the part of the model that is neither the vision tower nor the language model
and ends in the language model's width. Its root is found from the tensors: the 2-D tensors outside every stack of
numbered layers (and not vocabulary-sized) with a dimension equal to the text hidden size, each walked up to its
deepest ancestor module that holds neither the tower's patch convolution nor a layer stack. A width change: the
first matrix's input is k x the encoder's output width (k > 1). The first matrix is the one whose input width no
other projector matrix produces (else the narrowest multiple of the encoder width). Pooling leaves nothing in the
weights; it is seen only where the config states the tokens per image and they are fewer than the patches.

The component side: the statements of ``__init__`` in order, with branches on ``config.model_id`` decided for the
id at hand (the real ``MultimodalProjector`` builds ``mlp`` and ``lnmlp`` in one class), other config values taken
from the id's example model JSON when it has one; a branch that cannot be decided makes the structure unknown (not
a fit). Matrices: ``Linear`` calls, ``build_module(submodules.linear_*, in, out)``, and Megatron-core's ``MLP``,
which is not in the target: megatron/core/transformer/mlp.py (0.12) builds ``linear_fc1`` (input ``input_size``,
else ``config.hidden_size``) and ``linear_fc2``. Norms: calls whose name ends in ``Norm``. The width change: the
width the forward's first call on its input takes differs from the first matrix's input width.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.encoder_structure import _class_index, _POSITION
from msmigrate.tools.megatron.registry import _parse, read_registry

COMPARED = ("matrices", "norms", "width_change", "pooling")
_STACK = re.compile(r"^(.*?)\.(\d+)\.")
# Megatron-core classes the target's projectors build but do not define: what they build (megatron-core 0.12,
# megatron/core/transformer/mlp.py: MLP = linear_fc1 over input_size -> ffn_hidden_size, then linear_fc2)
EXTERNAL_MATRICES = {"MLP": 2}


@dataclass
class ProjectorStructure:
    matrices: int | None = None  # weight matrices (Linear / a bare 2-D parameter / Megatron's MLP: two)
    norms: int | None = None
    width_change: bool | None = None  # the first matrix takes a wider input than the encoder gives (patch merge)
    pooling: bool | None = None  # tokens reduced by an op without weights; None: this side cannot show it
    merge: int | None = None  # the width factor, when known
    norm: str | None = None  # layernorm | rmsnorm (source side; reported)
    bias: bool | None = None
    widths: dict[str, int] = field(default_factory=dict)  # source: input / inner / output of the matrices
    pool: int | None = None  # source: patches per token the pooling step averages (4: 2 x 2)
    # the first norm is as wide as the first matrix's input: it normalises the merged rows (a post-shuffle norm,
    # Qwen3-VL's deepstack mergers), not the encoder's; None: no norm, or no width change to tell them apart
    norm_at_input: bool | None = None
    # source: the parts in forward order, when the shapes decide it (a new projector is written from this):
    # {"kind": "norm", "module", "width", "bias", "before_merge"} / {"kind": "matrix", "tensor", "in", "out",
    # "bare", "bias"}; None with ``chain_error`` when they do not form one chain
    chain: list[dict[str, Any]] | None = None
    chain_error: str | None = None
    root: str | None = None  # source: the projector's module; component: the class
    evidence: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def facts(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in COMPARED}


def projector_diff(source: ProjectorStructure, component: ProjectorStructure) -> list[str]:
    """Compared facts that differ, or that the component side cannot show while the source does (no fit either:
    unknown is not the same)."""
    out = []
    for k in COMPARED:
        s, c = getattr(source, k), getattr(component, k)
        if s is not None and s != c:
            out.append(f"{k}: source {s!r}, component {c!r}")
    return out


# ---------------------------------------------------------------- the source's weights

def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def source_projector(shapes: dict[str, list[int]], text_hidden: int | None, encoder_width: int | None,
                     patch_tensor: str | None, vocab: int | None = None,
                     tokens_per_image: int | None = None, patches_per_image: int | None = None
                     ) -> ProjectorStructure | None:
    """The source projector's structure (None: no tensor ends in the text width outside the tower and the LM)."""
    if not text_hidden or not encoder_width:
        return None
    stacks: dict[str, dict[int, set[tuple[str, int]]]] = {}
    for n, s in shapes.items():
        m = _STACK.match(n)
        if m:
            rest = n[m.end():]
            stacks.setdefault(m.group(1), {}).setdefault(int(m.group(2)), set()).add((rest, len(s)))
    # a stack of layers (LM, tower blocks, a list of mergers): indices 0..n-1 of alike entries; an nn.Sequential's
    # linear-activation-linear (0, 2) or norm-linear (different tensors) is not one
    deep = {p for p, idx in stacks.items() if len(idx) >= 2 and set(idx) == set(range(len(idx)))
            and all(v == idx[0] for v in idx.values())}
    blocked = {n for n in shapes if any(n.startswith(p + ".") for p in deep)} | ({patch_tensor} - {None})
    roots: set[str] = set()
    for name, shape in shapes.items():
        module, _, leaf = name.rpartition(".")
        owner = module.rpartition(".")[2] if leaf in ("weight", "bias") else leaf
        if (len(shape) != 2 or text_hidden not in shape or name in blocked or (vocab and vocab in shape)
                or _POSITION.search(owner)):
            continue
        root = None
        for anc in _ancestors(module):  # deepest first: the outermost module that holds no tower / layer stack
            if any(b.startswith(anc + ".") for b in blocked):
                break
            root = anc
        if root:
            roots.add(root)
    roots = {r for r in roots if not any(r != o and r.startswith(o + ".") for o in roots)}
    if not roots:
        return None
    # more than one: a plain module before a numbered list of them (Qwen3-VL's merger before its deepstack
    # mergers), then the one with the most matrices; the rest are named
    def rank(r: str) -> tuple[bool, int, str]:
        under = [n for n in shapes if n.startswith(r + ".")]
        return (any(re.match(re.escape(r) + r"\.\d+\.", n) for n in under),
                -sum(1 for n in under if len(shapes[n]) == 2), r)
    root = min(roots, key=rank)
    out = projector_at(shapes, root, encoder_width, text_hidden)
    if len(roots) > 1:
        out.evidence["other_projectors"] = ", ".join(sorted(roots - {root}))
    if tokens_per_image and patches_per_image:
        merged = patches_per_image // max(out.merge or 1, 1)
        out.pooling = tokens_per_image < merged
        out.pool = merged // tokens_per_image if out.pooling and merged % tokens_per_image == 0 else None
        out.evidence["pooling"] = (f"{tokens_per_image} tokens per image from {patches_per_image} patches"
                                   + (f" (/{out.merge} merged)" if (out.merge or 1) > 1 else ""))
    return out


def projector_at(shapes: dict[str, list[int]], root: str, encoder_width: int, text_hidden: int | None
                 ) -> ProjectorStructure:
    """What the tensors under ``root`` build (matrices, norms, width change, their chain); pooling is not seen in
    weights and stays None. Used for the projector and for each of the extra mergers (tools/megatron/deepstack.py)."""
    mine = {n: s for n, s in shapes.items() if n.startswith(root + ".")}
    out = ProjectorStructure(root=root, pooling=None)
    modules: dict[str, dict[str, list[int]]] = {}
    for n, s in mine.items():
        mod, _, leaf = n.rpartition(".")
        modules.setdefault(mod, {})[leaf] = s
    mats: list[tuple[str, int, int]] = []  # (name, in, out)
    norms: list[str] = []
    for mod, leaves in sorted(modules.items()):
        for leaf, s in sorted(leaves.items()):
            if len(s) != 2:
                continue
            if leaf == "weight":
                mats.append((f"{mod}.{leaf}", s[1], s[0]))
            elif leaf != "bias":  # a bare matrix used as x @ W (Gemma 3's mm_input_projection_weight [in, out])
                mats.append((f"{mod}.{leaf}", s[0], s[1]))
        if "weight" in leaves and len(leaves["weight"]) == 1 and not any(len(s) == 2 for s in leaves.values()):
            norms.append(mod)
    out.matrices, out.norms = len(mats), len(norms)
    if norms:
        out.norm = "layernorm" if all("bias" in modules[m] for m in norms) else "rmsnorm"
        out.evidence["norms"] = ", ".join(f"{m} {modules[m]['weight']}" for m in norms)
    out.bias = any(n.rpartition(".")[0] + ".bias" in mine for n, _, _ in mats)
    if mats:
        outs = {o for _, _, o in mats}
        first = [m for m in mats if m[1] not in outs] or sorted(
            (m for m in mats if m[1] % encoder_width == 0), key=lambda m: m[1]) or mats
        name, width_in, _ = first[0]
        out.merge = width_in // encoder_width if width_in % encoder_width == 0 else None
        out.width_change = width_in != encoder_width
        inner = next((o for n, i, o in mats if n == name), None)
        out.widths = {"input": width_in, "inner": inner, "output": text_hidden}
        out.evidence["matrices"] = ", ".join(f"{n} [in {i}, out {o}]" for n, i, o in mats)
        out.evidence["width_change"] = (f"{name} takes {width_in}, the encoder gives {encoder_width}"
                                        + (f" (x{out.merge})" if out.merge and out.merge > 1 else ""))
        if norms and out.width_change:  # a norm over the merged rows (after the shuffle) or over the encoder's
            out.norm_at_input = any(modules[m]["weight"][0] == width_in for m in norms)
        out.chain, out.chain_error = _chain(mats, norms, modules, first[0], encoder_width, out.merge or 1)
    return out


def _natural(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _chain(mats: list[tuple[str, int, int]], norms: list[str], modules: dict[str, dict[str, list[int]]],
           first: tuple[str, int, int], encoder_width: int, merge: int) -> tuple[list | None, str | None]:
    """The parts in forward order: the matrices chained by width (each takes the previous one's output, from the
    first), each norm placed by its width (the encoder's width: before the merge; the first matrix's input: after
    it; a matrix's output: after that matrix)."""
    def chains(done: list, left: list) -> list[list]:
        if not left:
            return [done]
        return [c for m in left if m[1] == done[-1][2] for c in chains(done + [m], [x for x in left if x is not m])]
    starts = [m for m in mats if m[1] % encoder_width == 0] or [first]
    found = [c for m in sorted(starts, key=lambda m: _natural(m[0])) for c in chains([m], [x for x in mats if x is not m])]
    if not found:
        return None, ("the matrices do not form one chain by width (parallel matrices, e.g. gate and up, are not "
                      "written)")
    by_name = sorted(mats, key=lambda m: _natural(m[0]))
    if len(found) > 1 and by_name not in found:
        return None, f"the shapes allow {len(found)} orders of the matrices and their names decide none"
    order = found[0] if len(found) == 1 else by_name
    first = order[0]

    def matrix(m: tuple[str, int, int]) -> dict[str, Any]:
        mod, _, leaf = m[0].rpartition(".")
        return {"kind": "matrix", "tensor": m[0], "in": m[1], "out": m[2], "bare": leaf != "weight",
                "bias": f"{mod}.bias" if leaf == "weight" and "bias" in modules.get(mod, {}) else None}
    chain = [matrix(m) for m in order]
    for n in sorted(norms, key=_natural, reverse=True):
        width = modules[n]["weight"][0]
        part = {"kind": "norm", "module": n, "width": width, "bias": "bias" in modules[n],
                "before_merge": merge > 1 and width == encoder_width}
        if width in (first[1], encoder_width):
            chain.insert(0, part)
        else:
            at = max((i for i, c in enumerate(chain) if c["kind"] == "matrix" and c["out"] == width), default=None)
            if at is None:
                return None, f"norm {n} over width {width} fits no place between the matrices"
            chain.insert(at + 1, part)
    return chain, None


# ---------------------------------------------------------------- the component's code (AST)

class _Unknown(Exception):
    """A value the AST walk cannot decide (a config field with no example value in a branch test)."""


class _Sym(str):
    """A width known only as an expression (``config.input_size``): equal when the expressions are."""


def _eval(node: ast.AST, env: dict[str, Any], cfg: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unknown(node.id)
    if isinstance(node, ast.Attribute):
        base = ast.unparse(node.value)
        if base == "self":
            key = f"self.{node.attr}"
            if key in env:
                return env[key]
            raise _Unknown(key)
        if base in env.get("__configs__", ()):
            return cfg[node.attr] if node.attr in cfg else _Sym(f"config.{node.attr}")
        raise _Unknown(ast.unparse(node))
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and len(node.args) >= 2:
        if ast.unparse(node.args[0]) in env.get("__configs__", ()) and isinstance(node.args[1], ast.Constant):
            key = node.args[1].value
            if key in cfg:
                return cfg[key]
            if len(node.args) > 2:
                return _eval(node.args[2], env, cfg)
            return _Sym(f"config.{key}")
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "int" and len(node.args) == 1:
        v = _eval(node.args[0], env, cfg)
        return v if isinstance(v, _Sym) else int(v)
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _truth(node.test, env, cfg) else node.orelse, env, cfg)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env, cfg), _eval(node.right, env, cfg)
        if isinstance(a, _Sym) or isinstance(b, _Sym):
            return _Sym(ast.unparse(node))
        ops = {ast.Mult: lambda x, y: x * y, ast.Div: lambda x, y: x / y, ast.FloorDiv: lambda x, y: x // y,
               ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Pow: lambda x, y: x ** y}
        if type(node.op) in ops:
            return ops[type(node.op)](a, b)
    raise _Unknown(ast.unparse(node))


def _truth(node: ast.AST, env: dict[str, Any], cfg: dict[str, Any]) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _truth(node.operand, env, cfg)
    if isinstance(node, ast.BoolOp):
        vals = [_truth(v, env, cfg) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a, b = _eval(node.left, env, cfg), _eval(node.comparators[0], env, cfg)
        if isinstance(a, _Sym) or isinstance(b, _Sym):
            raise _Unknown(ast.unparse(node))
        op = node.ops[0]
        table = {ast.Eq: a == b, ast.NotEq: a != b}
        if type(op) in table:
            return table[type(op)]
        if isinstance(op, (ast.In, ast.NotIn)):
            return (a in b) == isinstance(op, ast.In)
        if isinstance(op, (ast.Is, ast.IsNot)):
            return (a is b) == isinstance(op, ast.Is)
        raise _Unknown(ast.unparse(node))
    v = _eval(node, env, cfg)
    if isinstance(v, _Sym):
        raise _Unknown(ast.unparse(node))
    return bool(v)


def _callee(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def _kw(call: ast.Call, *names: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg in names), None)


class _Walk:
    def __init__(self, cfg: dict[str, Any], imports: dict[str, str]):
        self.cfg, self.imports = cfg, imports  # imports: name -> the module the class file imports it from
        self.matrices: list[tuple[Any, str]] = []  # (input width, where)
        self.norms: list[tuple[Any, str]] = []
        self.attrs: dict[str, tuple[str, Any]] = {}  # self.X -> (kind, input width)
        self.pooling = False

    def call(self, call: ast.Call, env: dict[str, Any], where: str) -> tuple[str, Any] | None:
        name = _callee(call)
        if name is None:
            return None

        def width(node: ast.AST | None) -> Any:
            try:
                return _eval(node, env, self.cfg) if node is not None else None
            except _Unknown:
                return _Sym(ast.unparse(node))
        if name == "Linear":
            w = width(call.args[0] if call.args else _kw(call, "in_features"))
            self.matrices.append((w, where))
            return "matrix", w
        if name == "build_module" and call.args and "linear" in ast.unparse(call.args[0]):
            w = width(call.args[1] if len(call.args) > 1 else None)
            self.matrices.append((w, where))
            return "matrix", w
        if name in EXTERNAL_MATRICES and self.imports.get(name, "").startswith("megatron."):
            w = width(_kw(call, "input_size")) or width(ast.parse("config.hidden_size", mode="eval").body)
            for _ in range(EXTERNAL_MATRICES[name]):
                self.matrices.append((w, where))
            return "matrix", w
        if name.endswith("Norm"):
            w = width(call.args[0] if call.args else _kw(call, "hidden_size", "normalized_shape", "dim"))
            self.norms.append((w, where))
            return "norm", w
        if "Pool" in name:
            self.pooling = True
            return "pool", None
        return None

    def block(self, body: list[ast.stmt], env: dict[str, Any], rel: str) -> None:
        for stmt in body:
            if isinstance(stmt, ast.If):
                try:
                    taken = _truth(stmt.test, env, self.cfg)
                except _Unknown:
                    # a guard on an argument (``if submodules is None: raise``): the path that builds goes on
                    if not stmt.orelse and all(isinstance(b, ast.Raise) for b in stmt.body):
                        continue
                    raise
                self.block(stmt.body if taken else stmt.orelse, env, rel)
                continue
            if isinstance(stmt, (ast.Raise, ast.Return)):
                if isinstance(stmt, ast.Raise):
                    raise _Unknown(f"this model_id's branch raises at {rel}:{stmt.lineno}")
                return
            value = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
            if value is None:
                continue
            if isinstance(value, ast.IfExp):  # self.norm = LayerNorm(...) if use_norm else None
                value = value.body if _truth(value.test, env, self.cfg) else value.orelse
            got = self.call(value, env, f"{rel}:{stmt.lineno}") if isinstance(value, ast.Call) else None
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                t = stmt.targets[0]
                key = ast.unparse(t)
                if got:
                    self.attrs[key] = got
                elif isinstance(t, (ast.Name, ast.Attribute)):
                    try:
                        env[key] = _eval(value, env, self.cfg)
                    except _Unknown:
                        env.pop(key, None)


def component_projector(target: Path, class_name: str, model_id: str, example: dict[str, Any] | None = None,
                        classes: dict | None = None, args: dict[str, Any] | None = None) -> ProjectorStructure:
    """What the target's projector ``class_name`` builds for ``model_id`` (``example``: the id's section of an
    example model JSON, the config values its branches are decided with; ``args``: constant keyword arguments a
    caller passes to its ``__init__``, e.g. ``use_postshuffle_norm=True`` where an encoder layer builds one)."""
    classes = _class_index(target) if classes is None else classes
    if class_name not in classes:
        return ProjectorStructure(error=f"class {class_name} is not defined under the models tree")
    rel, node = classes[class_name]
    return _read_class(node, _parse(Path(target) / rel), rel, model_id, example, args)


def projector_from_code(code: str, class_name: str, model_id: str) -> ProjectorStructure:
    """What ``class_name`` in ``code`` (a module not yet written) builds for ``model_id``."""
    tree = ast.parse(code)
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if node is None:
        return ProjectorStructure(error=f"class {class_name} is not in the code")
    return _read_class(node, tree, "<new>", model_id, None)


def _read_class(node: ast.ClassDef, tree: ast.Module | None, rel: str, model_id: str,
                example: dict[str, Any] | None, init_args: dict[str, Any] | None = None) -> ProjectorStructure:
    class_name = node.name
    fns = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
    init = fns.get("__init__")
    if init is None:
        return ProjectorStructure(error=f"{class_name} has no __init__")
    args = init.args
    env: dict[str, Any] = {"__configs__": {"config", "cfg"}}
    for a, d in zip(args.args[len(args.args) - len(args.defaults):], args.defaults):
        if isinstance(d, ast.Constant):
            env[a.arg] = d.value
    env.update(init_args or {})
    cfg = {**(example or {}), "model_id": model_id}
    imports = {a.asname or a.name: n.module or "" for n in (tree.body if tree else [])
               if isinstance(n, ast.ImportFrom) for a in n.names}
    walk = _Walk(cfg, imports)
    out = ProjectorStructure(root=class_name, pooling=False)
    try:
        walk.block(init.body, env, rel)
    except _Unknown as exc:
        out.error = f"{class_name}'s structure for {model_id!r} depends on {exc}"
        return out
    fwd = fns.get("forward")
    if fwd is not None:
        walk.pooling |= any(isinstance(c, ast.Call) and "pool" in (_callee(c) or "").lower()
                            for c in ast.walk(fwd))
    out.matrices, out.norms, out.pooling = len(walk.matrices), len(walk.norms), walk.pooling
    out.evidence = {"matrices": ", ".join(f"{w} at {at}" for w, at in walk.matrices),
                    "norms": ", ".join(f"{w} at {at}" for w, at in walk.norms)}
    if walk.matrices:
        first_in = walk.matrices[0][0]
        if walk.norms:  # the norm as wide as the first matrix's input normalises the merged rows
            out.norm_at_input = str(walk.norms[0][0]) == str(first_in)
        given = _input_width(fwd, walk) if fwd is not None else None
        if given is not None:
            out.width_change = str(given) != str(first_in)
            out.evidence["width_change"] = f"forward's input goes first into width {given}; first matrix {first_in}"
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (given, first_in)) and given:
                out.merge = int(first_in // given)
    return out


def _input_width(fwd: ast.FunctionDef, walk: _Walk) -> Any:
    """The width of the module the forward applies first to its input tensor (its first parameter after self)."""
    params = [a.arg for a in fwd.args.args if a.arg != "self"]
    if not params:
        return None
    x = params[0]
    calls = sorted((c for c in ast.walk(fwd) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and ast.unparse(c.func).startswith("self.") and any(isinstance(a, ast.Name) and a.id == x
                                                                         for a in c.args)),
                   key=lambda c: (c.lineno, c.col_offset))
    for c in calls:  # a module this model_id's __init__ did not build (another id's branch) is skipped
        got = walk.attrs.get(ast.unparse(c.func))
        if got and got[1] is not None:
            return got[1]
    return None


def projector_structures(target: Path, examples: dict[str, dict[str, Any]] | None = None
                         ) -> dict[str, ProjectorStructure]:
    """model_id -> structure for every id a target registry serves as ``vision_projector`` with a class (the
    layer-spec table serves the role too; its values are functions and are skipped). ``examples``: model_id ->
    its example section (config values)."""
    reg = read_registry(target)
    if reg.error:
        return {}
    classes = _class_index(target)
    out: dict[str, ProjectorStructure] = {}
    for r in reg.for_role("vision_projector"):
        for c in r.components:
            name = c.target.split(".")[-1]
            if name not in classes:  # a factory function (the real DeepSeekVL2MLP): what it builds is not read
                out.setdefault(c.model_id, ProjectorStructure(error=f"{name} is not a class under the models tree"))
                continue
            s = component_projector(target, name, c.model_id, (examples or {}).get(c.model_id), classes)
            if c.model_id not in out or out[c.model_id].error:
                out[c.model_id] = s
    return out


def source_widths(cfg: dict[str, Any], shapes: dict[str, list[int]]) -> dict[str, Any] | None:
    """The widths the source's projectors are read against: the text width and vocabulary from the text
    sub-config, the encoder's output width from the tower's convolutions (the patch conv's channels, or those of a
    conv after it, GLM-4V's downsampling conv), and the patch conv's tensor. None: no vision convolution."""
    from msmigrate.tools.megatron.parallel_check import text_config

    text = text_config(cfg) or {}
    vision_words = ("vision", "visual")
    convs = sorted((s[1], n, s) for n, s in shapes.items()
                   if len(s) in (4, 5) and any(w in n for w in vision_words) and n.endswith("weight"))
    if not convs:
        return None
    # the last conv in the chain (most input channels) gives the tower's output width
    return {"patch": convs[0][1], "encoder": convs[-1][2][0], "text": text.get("hidden_size"),
            "vocab": text.get("vocab_size")}


def source_projector_of(cfg: dict[str, Any], shapes: dict[str, list[int]]) -> ProjectorStructure | None:
    """The source projector from its config.json and weights (widths: ``source_widths``), tokens per image and
    patches from the config where it states them."""
    w = source_widths(cfg, shapes)
    if w is None:
        return None
    vision = next((cfg[k] for k in ("vision_config", "vision_tower_config", "visual") if isinstance(cfg.get(k), dict)),
                  {})
    patches = None
    if isinstance(vision.get("image_size"), int) and isinstance(vision.get("patch_size"), int) and vision["patch_size"]:
        patches = (vision["image_size"] // vision["patch_size"]) ** 2
    return source_projector(shapes, w["text"], w["encoder"], w["patch"], w["vocab"],
                            cfg.get("mm_tokens_per_image"), patches)
