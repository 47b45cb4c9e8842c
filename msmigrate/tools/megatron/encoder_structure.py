"""What a vision encoder *builds*, from evidence on both sides: the registered component's own code (read by AST,
nothing imported) and the source's weights (safetensors headers: names and shapes, no tensor read).

Fields in the example model JSONs say what a component is *configured* with; they cannot tell a CLIP tower from a
Qwen one when every example is Qwen-family. What the modules are can: the patch embedding's kind (a 2-D conv over
an image vs a 3-D conv over temporal patches), a learned position table (an ``Embedding`` outside the blocks) or
none (rotary only), a learned class token (a bare parameter), extra convolutions (a downsampling conv after the
blocks). The component side walks the class's ``__init__`` in source order and follows the classes it builds that
are defined in the target (two levels: ``PatchEmbed`` → ``Conv3d``); the source side groups its vision tensors into
modules by name and reads each module's kind from its tensors' shapes (a 5-D weight is a 3-D conv; the conv with
the fewest input channels is the patch embedding). Facts only one side can show (rotary: its ``inv_freq`` buffer is
not saved with the weights; the norm type: configured by the model JSON's ``normalization``) are reported, never
compared.
"""

from __future__ import annotations

import ast
import json
import re
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.registry import MODELS_DIR, _parse, read_registry

COMPARED = ("patch_embed", "other_convs", "learned_position", "class_token")
_CONV = {"Conv1d": "conv1d", "Conv2d": "conv2d", "Conv3d": "conv3d"}
_BLOCK_INDEX = re.compile(r"\.\d+\.")
# a position table's module: HF's naming convention for it (position_embedding, pos_embed, position_embeddings)
_POSITION = re.compile(r"(^|\.)pos(ition)?_?embed")
VISION_WORDS = ("vision", "visual")
MAX_DEPTH = 2


@dataclass
class EncoderStructure:
    patch_embed: str | None = None  # conv2d | conv3d | linear | None (not seen)
    other_convs: list[str] = field(default_factory=list)  # convs besides the patch embedding (sorted kinds)
    learned_position: bool = False
    class_token: bool = False
    rotary: bool | None = None  # None: this side cannot show it
    norm: str | None = None  # layernorm | rmsnorm (source side only)
    evidence: dict[str, str] = field(default_factory=dict)  # fact -> where it was seen
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def facts(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in COMPARED}


def structure_diff(source: EncoderStructure, component: EncoderStructure) -> list[str]:
    """The compared facts where the two differ, each naming both values."""
    return [f"{k}: source {getattr(source, k)!r}, component {getattr(component, k)!r}"
            for k in COMPARED if getattr(source, k) != getattr(component, k)]


# ---------------------------------------------------------------- the component's code (AST)

def _top_level(target: Path, kind: type[ast.AST]) -> dict[str, tuple[str, Any]]:
    """name -> (file, node) for every top-level definition of ``kind`` under the models tree (first one wins)."""
    out: dict[str, tuple[str, Any]] = {}
    for p in sorted((Path(target) / MODELS_DIR).rglob("*.py")):
        tree = _parse(p)
        for node in tree.body if tree else []:
            if isinstance(node, kind):
                out.setdefault(node.name, (str(p.relative_to(target)), node))
    return out


def _class_index(target: Path) -> dict[str, tuple[str, ast.ClassDef]]:
    """class name -> (file, node) for every top-level class under the models tree (first one wins)."""
    return _top_level(target, ast.ClassDef)


def _calls_in_order(fn: ast.FunctionDef) -> list[ast.Call]:
    return sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))


def _callee(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def _walk_class(classes: dict, name: str, depth: int, out: EncoderStructure, convs: list[str],
                seen: set[str]) -> None:
    if name in seen or name not in classes:
        return
    seen.add(name)
    rel, node = classes[name]
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    for call in _calls_in_order(init) if init else []:
        callee, where = _callee(call), f"{rel}:{call.lineno}"
        if callee in _CONV:
            convs.append(_CONV[callee])
            out.evidence.setdefault(f"conv{len(convs)}", f"{callee} at {where}")
        elif callee == "Embedding":
            out.learned_position = True
            out.evidence.setdefault("learned_position", f"Embedding at {where}")
        elif callee == "Parameter" and depth == 0:  # a learned tensor of the encoder itself: a class token
            out.class_token = True
            out.evidence.setdefault("class_token", f"Parameter at {where}")
        elif callee == "register_buffer" and call.args and isinstance(call.args[0], ast.Constant) \
                and call.args[0].value == "inv_freq":
            out.rotary = True
            out.evidence.setdefault("rotary", f"inv_freq buffer at {where}")
        elif callee in classes and depth < MAX_DEPTH:
            _walk_class(classes, callee, depth + 1, out, convs, seen)


def component_structure(target: Path, class_name: str, classes: dict | None = None) -> EncoderStructure:
    """What the target's encoder class ``class_name`` builds in its ``__init__`` (and the target classes it builds)."""
    classes = _class_index(target) if classes is None else classes
    if class_name not in classes:
        return EncoderStructure(error=f"class {class_name} is not defined under {MODELS_DIR}")
    out, convs = EncoderStructure(rotary=False), []
    _walk_class(classes, class_name, 0, out, convs, set())
    out.patch_embed = convs[0] if convs else None  # the first conv built is the one over the pixels
    out.other_convs = sorted(convs[1:])
    return out


def encoder_structures(target: Path) -> dict[str, EncoderStructure]:
    """model_id -> structure, for every id the target's registries serve as ``vision_encoder``."""
    reg = read_registry(target)
    if reg.error:
        return {}
    classes = _class_index(target)
    out: dict[str, EncoderStructure] = {}
    for r in reg.for_role("vision_encoder"):  # the class registry and the layer-spec table both serve the role
        for c in r.components:
            s = component_structure(target, c.target.split(".")[-1], classes)
            if c.model_id not in out or out[c.model_id].error:
                out[c.model_id] = s
    return out


# ---------------------------------------------------------------- the source's weights (names and shapes)

def weight_shapes(source: Path) -> dict[str, list[int]]:
    """name -> shape from the source's safetensors headers (the JSON header only; no tensor is read)."""
    out: dict[str, list[int]] = {}
    for f in sorted(Path(source).glob("*.safetensors")):
        try:
            with f.open("rb") as fh:
                size = struct.unpack("<Q", fh.read(8))[0]
                header = json.loads(fh.read(size))
        except (OSError, ValueError, struct.error):
            continue
        out.update({k: list(v.get("shape") or []) for k, v in header.items() if k != "__metadata__"})
    return out


def source_structure(shapes: dict[str, list[int]]) -> EncoderStructure | None:
    """The source vision tower's structure from its tensors (None: no vision tensors)."""
    vision = {n: s for n, s in shapes.items() if any(w in n for w in VISION_WORDS)}
    if not vision:
        return None
    out = EncoderStructure()
    modules: dict[str, dict[str, list[int]]] = {}
    for name, shape in vision.items():
        mod, _, leaf = name.rpartition(".")
        modules.setdefault(mod, {})[leaf] = shape
    convs = sorted(((s["weight"][1], len(s["weight"]), m) for m, s in modules.items()
                    if len(s.get("weight", [])) in (4, 5)))
    kinds = {4: "conv2d", 5: "conv3d"}
    if convs:
        out.patch_embed = kinds[convs[0][1]]  # the conv with the fewest input channels reads the pixels
        out.evidence["patch_embed"] = f"{convs[0][2]}.weight {vision[convs[0][2] + '.weight']}"
        out.other_convs = sorted(kinds[c[1]] for c in convs[1:])
        for i, c in enumerate(convs[1:]):
            out.evidence[f"conv{i + 2}"] = f"{c[2]}.weight"
    patch_module = convs[0][2] if convs else None
    width = vision[patch_module + ".weight"][0] if patch_module else None
    outside = {n: s for n, s in vision.items() if not _BLOCK_INDEX.search(n)}
    for name, shape in sorted(outside.items()):
        mod, _, leaf = name.rpartition(".")
        bare = leaf not in ("weight", "bias")
        # a position table: an Embedding's weight, or a bare parameter (InternViT keeps one [1, n, width])
        if (len(shape) == 2 and not bare and _POSITION.search(mod.rpartition(".")[2])) or (
                bare and _POSITION.search(leaf)):
            out.learned_position = True
            out.evidence.setdefault("learned_position", f"{name} {shape}")
        # a class token: a bare parameter (not a module's weight/bias) of the model width, held next to the patch
        # embedding (a pooling head's learned query or an attention's in_proj_bias sits elsewhere)
        elif (bare and shape and shape[-1] == width and len(shape) <= 3
                and patch_module.startswith(mod + ".")):
            out.class_token = True
            out.evidence.setdefault("class_token", f"{name} {shape}")
    block0 = [m for m in modules if _BLOCK_INDEX.search(m + ".") and re.search(r"\.0\.", m + ".")]
    norms = [modules[m] for m in block0 if all(len(s) == 1 for s in modules[m].values()) and "weight" in modules[m]]
    if norms:
        out.norm = "layernorm" if all("bias" in n for n in norms) else "rmsnorm"
    return out
