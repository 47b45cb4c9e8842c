"""Extra mergers fed from inside the vision tower (Qwen3-VL's *deepstack* mergers), from evidence on both sides.

Some towers hand the language model more than their last layer: a numbered list of mergers, each reading the
output of one tower layer, whose outputs are added into the first decoder layers. The main projector match
(projector_structure.py) sees only the projector after the tower; this module matches the list.

The source side (safetensors headers + config.json): a numbered list of alike modules, outside the stack holding
the patch convolution, whose tensors each form one projector-shaped chain (norms and matrices, from a multiple of
the encoder width to the text width; ``projector_structure.projector_at``). Which tower layers feed them is a
list of layer indexes in the vision config as long as the merger list (HF Qwen3-VL: ``deepstack_visual_indexes``).

The component side (the target's code by AST, nothing imported): what the matched encoder's layer builds. The
layer class is the ``ModuleSpec(module=...)`` of the encoder's layer-spec function (``vit_layer_specs``), plus the
encoder class itself. A tap is an attribute its ``__init__`` sets to a class the target registers as a vision
projector, under a test on a config field (the real ``Qwen3VLVisionTransformerLayer`` sets ``deepstack_layer`` to
``MultimodalProjector(config.projector_config, ..., use_postshuffle_norm=True)`` when its index is in
``config.deepstack_visual_indexes``). What the tap builds is read with ``component_projector`` for the projector
id the model JSON pairs with the encoder, with the call's constant keyword arguments.

Compared per merger: matrices, norms, and whether the norm is as wide as the first matrix's input (a norm over the
merged rows). The width change itself is not compared on this side: the real class reshapes its input into merged
rows before its first module (a view the AST walk does not follow), so its first module's width is already the
merged one. The converter check (probe megatron_converter_roundtrip, ``--taps``) then asks that each merger's
tensors land on the tap of the tower layer its index names.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.encoder_structure import _class_index, _top_level
from msmigrate.tools.megatron.projector_structure import component_projector, projector_at, source_widths
from msmigrate.tools.megatron.registry import read_registry

TAP_COMPARED = ("matrices", "norms", "norm_at_input")
_ENTRY = re.compile(r"^(.*?)\.(\d+)\.(.+)$")
VISION_KEYS = ("vision_config", "vision_tower_config", "visual")


@dataclass
class SourceTaps:
    list: str  # the module holding the numbered mergers (model.visual.deepstack_merger_list)
    count: int
    index_field: str | None = None  # the vision config field naming the tower layers that feed them
    indexes: list[int] | None = None
    structure: dict[str, Any] = field(default_factory=dict)  # what merger 0 builds (ProjectorStructure)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ComponentTaps:
    encoder: str
    layer_class: str | None = None  # the class whose __init__ builds the tap
    attr: str | None = None  # the attribute the tap is set on (deepstack_layer)
    projector_class: str | None = None
    projector_id: str | None = None  # the id whose config the tap is built with (the encoder's paired projector)
    init_args: dict[str, Any] = field(default_factory=dict)
    index_field: str | None = None  # the config field the build is conditioned on
    where: str | None = None
    structure: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- the source

def source_taps(cfg: dict[str, Any], shapes: dict[str, list[int]]) -> SourceTaps | None:
    """The source's per-layer mergers (None: the weights show no such list)."""
    w = source_widths(cfg, shapes)
    if w is None or not w["text"]:
        return None
    entries: dict[str, dict[int, set[str]]] = {}
    for n in shapes:
        m = _ENTRY.match(n)
        if m:
            entries.setdefault(m.group(1), {}).setdefault(int(m.group(2)), set()).add(m.group(3))
    # an inner numbered list (a block's mlp.0 / mlp.2) is judged with its own prefix; the shortest matching
    # prefix per list is what the regex's lazy first group gives
    found = []
    for prefix, idx in entries.items():
        if (w["patch"] or "").startswith(prefix + ".") or set(idx) != set(range(len(idx))):
            continue
        if any(v != idx[0] for v in idx.values()) or any(len(shapes[f"{prefix}.0.{r}"]) > 2 for r in idx[0]):
            continue
        s = projector_at(shapes, f"{prefix}.0", w["encoder"], w["text"])
        # one chain of all its matrices ending in the text width (a layer of the tower or of the LM has parallel
        # matrices, q/k/v or gate/up, and forms none)
        if s.chain and [c for c in s.chain if c["kind"] == "matrix"][-1]["out"] == w["text"]:
            found.append((prefix, len(idx), s))
    if not found:
        return None
    prefix, count, s = min(found, key=lambda f: f[0])
    out = SourceTaps(list=prefix, count=count, structure=s.to_dict())
    vision = next((cfg[k] for k in VISION_KEYS if isinstance(cfg.get(k), dict)), {})
    fields = [k for k, v in vision.items() if isinstance(v, list) and len(v) == count
              and all(isinstance(i, int) and not isinstance(i, bool) for i in v)]
    if len(fields) == 1:
        out.index_field, out.indexes = fields[0], list(vision[fields[0]])
    else:
        out.error = (f"the vision config has {len(fields)} integer lists as long as the {count} mergers "
                     f"({fields}): which tower layers feed them is not known")
    return out


# ---------------------------------------------------------------- the component

def _functions(target: Path) -> dict[str, tuple[str, ast.FunctionDef]]:
    return _top_level(target, ast.FunctionDef)


def _spec_modules(fn: ast.FunctionDef) -> list[str]:
    """Classes a layer-spec function puts in ``ModuleSpec(module=...)`` (outermost first)."""
    calls = sorted((c for c in ast.walk(fn) if isinstance(c, ast.Call)
                    and getattr(c.func, "id", getattr(c.func, "attr", None)) == "ModuleSpec"),
                   key=lambda c: (c.lineno, c.col_offset))
    return [k.value.id for c in calls for k in c.keywords if k.arg == "module" and isinstance(k.value, ast.Name)]


def _config_field(test: ast.AST, aliases: dict[str, str]) -> str | None:
    for node in ast.walk(test):
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "config":
            return node.attr
        if isinstance(node, ast.Name) and node.id in aliases:
            return aliases[node.id]
    return None


def _taps_in(node: ast.ClassDef, projector_classes: set[str]) -> list[tuple[str, ast.Call, str | None]]:
    """(attribute, call, config field) for each ``self.X = <projector class>(...)`` in ``__init__``."""
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:
        return []
    aliases = {t.id: s.value.attr for s in ast.walk(init) if isinstance(s, ast.Assign) for t in s.targets
               if isinstance(t, ast.Name) and isinstance(s.value, ast.Attribute)
               and ast.unparse(s.value.value) == "config"}
    out = []

    def visit(body: list[ast.stmt], test: ast.AST | None) -> None:
        for stmt in body:
            if isinstance(stmt, ast.If):
                visit(stmt.body, stmt.test)
                visit(stmt.orelse, stmt.test)
            elif (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
                  and getattr(stmt.value.func, "id", None) in projector_classes
                  and isinstance(stmt.targets[0], ast.Attribute) and ast.unparse(stmt.targets[0].value) == "self"):
                out.append((stmt.targets[0].attr, stmt.value, _config_field(test, aliases) if test else None))
    visit(init.body, None)
    return out


def component_taps(target: Path, encoder_id: str, projector_id: str | None,
                   projector_example: dict[str, Any] | None = None) -> ComponentTaps:
    """What the target's encoder ``encoder_id`` builds inside its layers from a registered projector class (an
    empty result, no ``attr``, when it builds none)."""
    out = ComponentTaps(encoder=encoder_id, projector_id=projector_id)
    reg = read_registry(target)
    if reg.error:
        out.error = reg.error
        return out
    names = [c.target.split(".")[-1] for r in reg.for_role("vision_encoder") for c in r.components
             if c.model_id == encoder_id]
    projector_classes = {c.target.split(".")[-1] for r in reg.for_role("vision_projector") for c in r.components}
    classes, functions = _class_index(target), _functions(target)
    candidates = [n for n in names if n in classes]
    for n in names:
        if n in functions:
            candidates += [m for m in _spec_modules(functions[n][1]) if m in classes]
    for cls in dict.fromkeys(candidates):
        rel, node = classes[cls]
        for attr, call, cfg_field in _taps_in(node, projector_classes):
            kwargs = {k.arg: k.value.value for k in call.keywords if k.arg and isinstance(k.value, ast.Constant)}
            out.layer_class, out.attr, out.projector_class = cls, attr, call.func.id
            out.init_args, out.index_field, out.where = kwargs, cfg_field, f"{rel}:{call.lineno}"
            if projector_id is None:
                out.error = "no projector is paired with the encoder: what its taps build is not read"
                return out
            s = component_projector(target, call.func.id, projector_id, projector_example, classes, kwargs)
            out.structure = s.to_dict()
            out.error = s.error
            return out
    return out


def taps_diff(source: SourceTaps, component: ComponentTaps) -> list[str]:
    """Why the component does not build the source's mergers (empty: it does)."""
    if component.attr is None:
        return [f"per-layer mergers: source {source.count} ({source.list}), component {component.encoder} "
                "builds none"]
    if component.error:
        return [f"per-layer mergers: {component.error}"]
    out = []
    for k in TAP_COMPARED:
        s, c = source.structure.get(k), component.structure.get(k)
        if s is not None and s != c:
            out.append(f"per-layer merger {k}: source {s!r}, component {c!r}")
    if source.index_field and component.index_field and source.index_field != component.index_field:
        out.append(f"per-layer merger indexes: source field {source.index_field}, component field "
                   f"{component.index_field}")
    return out


def converter_taps(source: SourceTaps, component: ComponentTaps) -> dict[str, Any] | None:
    """What the converter check needs (probe ``--taps``): the HF list, the vision config field with the tower
    layers, and the attribute the component builds each merger on."""
    if not (component.attr and source.index_field):
        return None
    return {"hf_list": source.list, "index_field": source.index_field, "attr": component.attr}
