"""A new vision encoder for the Megatron route, registered the framework's way: a class in a module under the
target's ``models/vision/vision_encoders``, an entry in the vit layer-spec table, an entry in the encoder registry,
each keyed by a new ``model_id``; the model JSON then selects it.

What the class builds comes from the source's weights (tools/megatron/encoder_structure.py: the patch conv's kind
and its bias, a class token, a learned position table and its length); what it is built *from* comes from the
target: the transformer block, its import and its call are the ones the closest registered encoder uses (read by
AST from that class's ``__init__`` and ``forward``), and its layer spec is the closest's spec function. Nothing is
written when a fact cannot be carried over (the block's call uses locals of the closest's forward, a patch
embedding of a kind this writer does not build): the design says why and the model phase stops there.

Norms outside the blocks are carried over when the weights show them and transformers' names place them (``pre`` /
``post``; a post norm only when the model reads the last layer's features). Not carried over (named in
``not_built``): outside norms whose place the names do not say, rotary position embedding.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.encoder_structure import EncoderStructure, encoder_structures, structure_diff
from msmigrate.tools.megatron.encoder_taps import component_taps
from msmigrate.tools.megatron.feature_norm import reads_last_entry
from msmigrate.tools.megatron.registry import MODELS_DIR, _parse, read_registry

ENCODERS_DIR = f"{MODELS_DIR}/vision/vision_encoders"
SPEC_TABLE = "vit_layer_specs"


@dataclass
class EncoderDesign:
    model_id: str | None = None
    class_name: str | None = None
    module_path: str | None = None  # relative to the target
    code: str | None = None
    edits: dict[str, str] = field(default_factory=dict)  # target file -> its new text (registry, layer specs)
    tables: dict[str, str] = field(default_factory=dict)  # "registry" / "specs" -> "file:dict name" it is added to
    json_fields: dict[str, Any] = field(default_factory=dict)  # the model JSON section the class reads
    reuses: dict[str, str] = field(default_factory=dict)  # what comes from the closest component, with where
    not_built: list[str] = field(default_factory=list)
    # norms outside the blocks the class builds: {"name" (the source's module name), "place": pre | post, "bias"}
    outside_norms: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _module_name(rel: str) -> str:
    return rel[:-3].replace("/", ".")


def _absolute_import(node: ast.ImportFrom, rel: str) -> str:
    if not node.level:
        return node.module or ""
    pkg = _module_name(rel).split(".")[:-node.level]
    return ".".join(pkg + ([node.module] if node.module else []))


def _block_of(target: Path, defined_in: str, class_name: str) -> dict[str, Any] | str:
    """The closest encoder's transformer block: the ``self.X = Call(...)`` in its __init__ that takes the layer
    spec, the import that brings the callee in, and the expression its forward calls ``self.X`` in."""
    rel = defined_in.split(":")[0]
    tree = _parse(Path(target) / rel)
    cls = next((n for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        return f"class {class_name} not found in {rel}"
    fns = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    if "__init__" not in fns or "forward" not in fns:
        return f"{class_name} has no __init__/forward to read"
    spec_param = next((a.arg for a in fns["__init__"].args.args if "layer_spec" in a.arg), None)
    attr = call = None
    for node in ast.walk(fns["__init__"]):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Attribute) and spec_param
                and any(isinstance(a, ast.Name) and a.id == spec_param
                        for a in [*node.value.args, *(k.value for k in node.value.keywords)])):
            attr, call = node.targets[0].attr, node.value
            break
    if call is None or not isinstance(call.func, ast.Name):
        return f"{class_name}.__init__ builds no block from its layer spec ({spec_param}) by a plain class call"
    imp = next((n for n in tree.body if isinstance(n, ast.ImportFrom) and any(a.name == call.func.id for a in n.names)),
               None)
    if imp is None:
        return f"the import of {call.func.id} is not at the top of {rel}"
    fwd = fns["forward"]
    stmt = next((s for s in ast.walk(fwd) if isinstance(s, (ast.Return, ast.Assign)) and s.value is not None
                 and any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == attr
                         for c in ast.walk(s.value))), None)
    if stmt is None:
        return f"{class_name}.forward never calls self.{attr}"
    inner = next(c for c in ast.walk(stmt.value) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                 and c.func.attr == attr)
    first = inner.args[0] if inner.args else None
    root = next((n.id for n in ast.walk(first) if isinstance(n, ast.Name)), None) if first is not None else None
    params = {a.arg for a in (*fwd.args.args, *fwd.args.kwonlyargs)} - {"self"}
    free = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)} - {"self", root}
    params_used = sorted(free & params)
    if free - params - set(dir(builtins)):
        return (f"{class_name}.forward calls self.{attr} with locals {sorted(free - params)}, which a new class "
                "cannot reproduce")
    expr = ast.unparse(stmt.value)
    if root:
        expr = re.sub(rf"\b{re.escape(root)}\b", "x", expr)
    return {"attr": attr, "init": ast.unparse(call),
            "import": f"from {_absolute_import(imp, rel)} import {call.func.id}",
            "forward": expr, "forward_params": params_used, "file": rel,
            "seq_first": _seq_first_before(fwd, root, stmt.lineno), "mask": _builds_full_mask(fwd, params_used),
            "mask_when": _mask_condition(fwd, params_used, fns["__init__"], tree, rel)}


def _seq_first_before(fwd: ast.FunctionDef, var: str | None, line: int) -> bool:
    """Whether the closest's forward turns the block's input sequence-first ([s, b, h]: ``permute(1, 0, 2)`` or
    ``transpose(0, 1)`` assigned to it) before calling the block: the block then takes that layout."""
    for node in ast.walk(fwd):
        if (isinstance(node, ast.Assign) and node.lineno < line and var
                and any(isinstance(t, ast.Name) and t.id == var for t in node.targets)):
            for c in ast.walk(node.value):
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute):
                    args = [a.value for a in c.args if isinstance(a, ast.Constant)]
                    if (c.func.attr, args) in (("permute", [1, 0, 2]), ("transpose", [0, 1]), ("transpose", [1, 0])):
                        return True
    return False


def _builds_full_mask(fwd: ast.FunctionDef, params: list[str]) -> str | None:
    """The mask parameter the closest's forward fills itself when the caller passes none (``if <mask> is None:
    <mask> = ...``): the new class does the same, every patch seeing every patch."""
    for node in ast.walk(fwd):
        if (isinstance(node, ast.If) and isinstance(node.test, (ast.Compare, ast.BoolOp))):
            names = [n.id for n in ast.walk(node.test) if isinstance(n, ast.Name) and n.id in params]
            if names and any(isinstance(t, ast.Name) and t.id == names[0] for st in node.body
                             if isinstance(st, ast.Assign) for t in st.targets):
                return names[0]
    return None


def _mask_condition(fwd: ast.FunctionDef, params: list[str], init: ast.FunctionDef, tree: ast.Module,
                    rel: str) -> dict[str, Any] | None:
    """The whole test under which the closest fills a missing mask (``if mask is None and not
    self.use_flash_attn:``), with the ``self.X = ...`` lines of its __init__ that the test reads and the imports
    those lines need. Why it matters: on the fused-attention path the closest passes no mask at all, and the fused
    kernel (sparse_mode 0) treats a given mask differently from none: without one it computes every pair and
    ignores the pre/next token band; with one it also applies that band, whose next-tokens default in MindSpeed is
    0 — an all-visible mask then attends causally. None when the fill is unconditional or the test reads what a new
    class cannot carry over."""
    for node in ast.walk(fwd):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.BoolOp)):
            continue
        names = [n.id for n in ast.walk(node.test) if isinstance(n, ast.Name) and n.id in params]
        if not names or not any(isinstance(t, ast.Name) and t.id == names[0] for st in node.body
                                if isinstance(st, ast.Assign) for t in st.targets):
            continue
        attrs = sorted({n.attr for n in ast.walk(node.test) if isinstance(n, ast.Attribute)
                        and isinstance(n.value, ast.Name) and n.value.id == "self"})
        free = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)} - {"self", *params, *dir(builtins)}
        if free:
            return None
        lines, imports = [], []
        for attr in attrs:
            assign = next((st for st in ast.walk(init) if isinstance(st, ast.Assign) and len(st.targets) == 1
                           and isinstance(st.targets[0], ast.Attribute) and st.targets[0].attr == attr
                           and isinstance(st.targets[0].value, ast.Name) and st.targets[0].value.id == "self"), None)
            if assign is None:
                return None
            used = {n.id for n in ast.walk(assign.value) if isinstance(n, ast.Name)} - set(dir(builtins))
            for name in sorted(used):
                imp = next((n for n in tree.body if isinstance(n, ast.ImportFrom)
                            and any((a.asname or a.name) == name for a in n.names)), None)
                if imp is None:
                    return None
                alias = next(a for a in imp.names if (a.asname or a.name) == name)
                imports.append(f"from {_absolute_import(imp, rel)} import {alias.name}"
                               + (f" as {alias.asname}" if alias.asname else ""))
            lines.append(ast.unparse(assign))
        return {"test": ast.unparse(node.test), "init": lines, "imports": imports}
    return None


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[_\W]+", name) if p)


def outside_norms(shapes: dict[str, list[int]], patch_name: str, width: int, vision_cfg: dict[str, Any],
                  cfg_top: dict[str, Any], feature_post_normed: bool | None = None
                  ) -> tuple[list[dict[str, Any]], list[str]]:
    """The tower's norms outside its blocks (a module of the tower width with only 1-D tensors, outside the
    numbered layers and the embeddings), placed by transformers' naming: ``pre`` before the blocks, ``post`` /
    ``final`` after them. When the model reads its features from the tower's list of layer outputs (a
    ``vision_feature_layer`` in its config, LLaVA's convention), a post norm is carried only when that feature has
    passed it: ``feature_post_normed``, measured in the source's runtime for the list's last entry (transformers
    4.56-4.57 put the post-normed output there, 5.x the raw last layer; tools/megatron/feature_norm.py). Not
    measured (None), or another entry than the last: left out, the entries before the last are layer outputs.
    Returns ({"name", "place", "bias"} per norm carried, the names not placed)."""
    tower = patch_name
    while tower and not any(re.match(re.escape(tower) + r"\.[\w.]*?\d+\.", n) for n in shapes):
        tower = tower.rpartition(".")[0]
    if not tower:
        return [], []
    modules: dict[str, dict[str, list[int]]] = {}
    for n, s in shapes.items():
        if n.startswith(tower + ".") and not re.search(r"\.\d+\.", n[len(tower):] + "."):
            mod, _, leaf = n.rpartition(".")
            modules.setdefault(mod, {})[leaf] = s
    feature_layer = cfg_top.get("vision_feature_layer")
    post_feature = bool(feature_post_normed) and reads_last_entry(cfg_top, vision_cfg)
    carried, skipped = [], []
    for mod, leaves in sorted(modules.items()):
        if leaves.get("weight") != [width] or set(leaves) - {"weight", "bias"} or any(len(v) != 1 for v in
                                                                                      leaves.values()):
            continue
        leaf = mod.rpartition(".")[2]
        words = set(re.split(r"[_\W]+", leaf.lower()))
        place = "pre" if "pre" in words else "post" if words & {"post", "final"} else None
        if place is None or (place == "post" and feature_layer is not None and not post_feature):
            skipped.append(mod + (f" (features from layer {feature_layer}, not post-normed)" if place == "post"
                                  else ""))
            continue
        carried.append({"name": leaf, "place": place, "bias": "bias" in leaves})
    return carried, skipped


# A new component's model_id, class and module file are named after the source's model_type (config.json): only a
# plain name may become a path and an identifier (and reach the prompt's editable paths)
PLAIN_MODEL_TYPE = re.compile(r"[a-z][a-z0-9_]{0,39}")


def model_type_problem(model_type: str) -> str | None:
    if PLAIN_MODEL_TYPE.fullmatch(model_type or ""):
        return None
    return (f"the source's model_type {str(model_type)[:60]!r} is not a plain name (lower-case letters, digits, "
            "'_'): a new component's model_id, class and module file are named after it")


def design_encoder(target: Path, match: dict[str, Any], vision_cfg: dict[str, Any], shapes: dict[str, list[int]],
                   model_type: str, cfg_top: dict[str, Any] | None = None,
                   feature_post_normed: bool | None = None) -> EncoderDesign:
    """The new encoder for a source whose tower no registered class builds (``match``: the plan's
    vision_encoder entry, with ``structure`` and ``closest``; ``cfg_top``: the source's config.json;
    ``feature_post_normed``: see ``outside_norms``)."""
    struct, closest = match.get("structure") or {}, match.get("closest")
    if model_type_problem(model_type):
        return EncoderDesign(error=model_type_problem(model_type))
    if not struct or not closest:
        return EncoderDesign(error="the match has no source structure / closest component to build from")
    reg = read_registry(target)
    registries = [r for r in reg.for_role("vision_encoder") if r.name != SPEC_TABLE]
    comp = next((c for r in registries for c in r.components if c.model_id == closest), None)
    if comp is None or not comp.defined_in:
        return EncoderDesign(error=f"closest encoder {closest} is not found in the target's registries")
    if struct.get("patch_embed") != "conv2d" or struct.get("other_convs"):
        return EncoderDesign(error=f"this writer builds a 2-D patch conv tower only; the source has "
                                   f"{struct.get('patch_embed')} + {struct.get('other_convs')}")
    block = _block_of(target, comp.defined_in, comp.target.split(".")[-1])
    if isinstance(block, str):
        return EncoderDesign(error=block)
    model_id = f"{model_type}_vit"
    if model_id in reg.ids_for("vision_encoder"):
        return EncoderDesign(error=f"model_id {model_id} is already registered")
    ev = struct.get("evidence") or {}
    patch_name = ev.get("patch_embed", "").split(" ")[0]
    patch_bias = patch_name.endswith(".weight") and patch_name[:-len("weight")] + "bias" in shapes
    table = ev.get("learned_position", "").split(" ")[0]
    positions = shapes.get(table, [0, 0])[-2] if struct.get("learned_position") else 0
    width = shapes.get(patch_name, [vision_cfg.get("hidden_size")])[0]
    out = EncoderDesign(model_id=model_id, class_name=f"{_camel(model_type)}ViT",
                        module_path=f"{ENCODERS_DIR}/{model_type}_vit_model.py")
    out.json_fields = {"model_id": model_id,
                       "num_layers": vision_cfg.get("num_hidden_layers") or vision_cfg.get("depth"),
                       "hidden_size": width, "ffn_hidden_size": vision_cfg.get("intermediate_size"),
                       "num_attention_heads": vision_cfg.get("num_attention_heads") or vision_cfg.get("num_heads"),
                       "in_channels": shapes.get(patch_name, [0, 3])[1], "patch_size": vision_cfg.get("patch_size"),
                       "num_positions": positions, "class_token_len": 1 if struct.get("class_token") else 0,
                       "gated_linear_unit": False, "activation_func": vision_cfg.get("hidden_act"),
                       "layernorm_epsilon": vision_cfg.get("layer_norm_eps") or vision_cfg.get("rms_norm_eps") or 1e-6,
                       "normalization": "LayerNorm" if struct.get("norm") == "layernorm" else "RMSNorm",
                       # the source's dropout (transformers' towers: attention_dropout, none on the hidden states);
                       # left out, Megatron's defaults (0.1) would train another model and have no CPU reference
                       "attention_dropout": float(vision_cfg.get("attention_dropout") or 0.0),
                       "hidden_dropout": float(vision_cfg.get("hidden_dropout") or 0.0)}
    out.reuses = {"block": f"{block['init']} ({block['file']}, as {closest} builds it)",
                  "layer_spec": f"{closest}'s entry in {SPEC_TABLE}"}
    norms, skipped = outside_norms(shapes, patch_name, width, vision_cfg, cfg_top or {}, feature_post_normed)
    out.outside_norms = norms
    out.not_built = ([f"norms outside the blocks whose place the names do not say: {skipped}"] if skipped else []) + [
        "rotary position embedding (not visible in the weights)",
        f"the block's tensor layout is {closest}'s (its forward call is copied, not re-derived)"]
    out.code = _render_class(out, block, patch_bias)
    edits = _registry_edits(target, registries, comp, out, EncoderStructure(**{
        k: v for k, v in struct.items() if k in EncoderStructure.__dataclass_fields__}))
    if isinstance(edits, str):
        out.error = edits
    else:
        out.edits = edits
    return out


def _render_class(d: EncoderDesign, block: dict[str, Any], patch_bias: bool) -> str:
    extra = "".join(f", {p}=None" for p in block["forward_params"])
    cls_tok = d.json_fields["class_token_len"]
    lines = [
        f'"""{d.class_name}: a vision encoder for model_id {d.model_id!r} (written by msmigrate from the source\'s',
        "weights): a 2-D patch convolution over the image"
        + (", a learned class token" if cls_tok else "")
        + (", a learned position table" if d.json_fields["num_positions"] else "") + ",",
        f"then the framework's {block['init'].split('(')[0]}.\"\"\"",
        "import torch", "", "from mindspeed_mm.models.common.module import MultiModalModule", block["import"],
        *dict.fromkeys((block.get("mask_when") or {}).get("imports", [])), "", "",
        f"class {d.class_name}(MultiModalModule):",
        "    def __init__(self, config, transformer_layer_spec, pre_process=True, post_process=True, *args, **kwargs):",
        "        super().__init__(config=config)",
        "        if transformer_layer_spec is None:",
        "            raise KeyError(\"no layer spec for vision_encoder model_id \"",
        "                           f\"{getattr(config, 'model_id', None)!r}\")",
        "        self.patch_embed = torch.nn.Conv2d(config.in_channels, config.hidden_size,",
        "                                           kernel_size=config.patch_size,",
        f"                                           stride=config.patch_size, bias={patch_bias})",
    ]
    if cls_tok:
        lines.append("        self.class_embedding = torch.nn.Parameter(torch.zeros(config.hidden_size))")
    if d.json_fields["num_positions"]:
        lines.append("        self.position_embedding = torch.nn.Embedding(config.num_positions, config.hidden_size)")
    norms = d.outside_norms
    for n in norms:  # named as the source names them: the converter pairs them by name tokens
        kind = "LayerNorm" if n["bias"] else "RMSNorm"
        lines.append(f"        self.{n['name']} = torch.nn.{kind}(config.hidden_size, eps=config.layernorm_epsilon)")
    lines += [f"        {line}" for line in (block.get("mask_when") or {}).get("init", [])]
    lines += [f"        self.{block['attr']} = {block['init']}", "",
              f"    def forward(self, pixel_values, *args{extra}, **kwargs):",
              "        # [images, channels, H, W] -> [images, patches, width]",
              "        x = self.patch_embed(pixel_values).flatten(2).transpose(1, 2)", "        images = x.shape[0]"]
    if cls_tok:
        lines.append("        x = torch.cat([self.class_embedding.expand(images, 1, -1).to(x.dtype), x], dim=1)")
    if d.json_fields["num_positions"]:
        lines.append("        x = x + self.position_embedding(torch.arange(x.shape[1], device=x.device))")
    lines += [f"        x = self.{n['name']}(x)" for n in norms if n["place"] == "pre"]
    lines += ["        tokens = x.shape[1]"]
    if block.get("seq_first"):  # the block takes [s, b, h], as the closest feeds it
        lines.append("        x = x.transpose(0, 1).contiguous()  # [images, patches, width] -> [patches, images, width]")
    else:
        lines.append("        x = x.reshape(images * tokens, -1)")
    if block.get("mask"):  # as the closest: no mask given, every patch attends to every patch (True = masked);
        # under the closest's own condition (none on the fused path: see _mask_condition)
        when = (block.get("mask_when") or {}).get("test") or f"{block['mask']} is None"
        lines += [f"        if {when}:",
                  f"            {block['mask']} = torch.zeros(1, 1, tokens, tokens, dtype=torch.bool, device=x.device)"]
    lines.append(f"        x = {block['forward']}")
    if block.get("seq_first"):
        lines.append("        x = x.transpose(0, 1).contiguous()")
    lines += [f"        x = self.{n['name']}(x)" for n in norms if n["place"] == "post"]
    lines += [
              f"        # drop the class token{'' if cls_tok else ' (none here)'}: the projector takes patch features",
              f"        return x.reshape(images, tokens, -1)[:, {cls_tok}:].reshape(-1, x.shape[-1])", ""]
    return "\n".join(lines)


def _insert_entry(text: str, table: str, entry: str) -> str | None:
    """``entry`` added after the last item of the module-level dict literal ``table`` (its layout kept)."""
    tree = ast.parse(text)
    node = next((n for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict)
                 and n.value.values and any(isinstance(t, ast.Name) and t.id == table for t in n.targets)), None)
    if node is None:
        return None
    last, key = node.value.values[-1], node.value.keys[-1]
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    # ast offsets are in UTF-8 bytes; the framework's files are ASCII where these tables sit
    pos = starts[last.end_lineno - 1] + last.end_col_offset
    rest = text[pos:]
    if rest.lstrip().startswith(","):
        pos += len(rest) - len(rest.lstrip()) + 1
    indent = " " * key.col_offset if key.lineno != node.lineno or last.end_lineno != node.lineno else " "
    return text[:pos] + ("" if text[:pos].endswith(",") else ",") + f"\n{indent}{entry}," + text[pos:]


def _spec_fuses_qkv(target: Path, spec_fn: str) -> bool:
    """Whether the layer-spec function ``spec_fn`` gives its attention a real ``linear_qkv`` module (read by AST:
    its ``linear_qkv=`` keyword names something other than ``IdentityOp``)."""
    fn = _spec_functions(target).get(spec_fn)
    if fn is None:
        return False
    values = [k.value for node in ast.walk(fn) if isinstance(node, ast.Call) for k in node.keywords
              if k.arg == "linear_qkv"]
    return bool(values) and not any(isinstance(v, ast.Name) and v.id == "IdentityOp" for v in values)


def _spec_functions(target: Path) -> dict[str, ast.FunctionDef]:
    out = {}
    for path in sorted((Path(target) / MODELS_DIR / "common" / "module_spec").glob("*.py")):
        tree = _parse(path)
        out.update({n.name: n for n in (tree.body if tree else []) if isinstance(n, ast.FunctionDef)})
    return out


def _registry_edits(target: Path, registries: list, comp: Any, d: EncoderDesign,
                    source: EncoderStructure) -> dict[str, str] | str:
    """The registry (an import + an entry) and the vit layer-spec table (the closest's spec function)."""
    edits: dict[str, str] = {}
    structures = encoder_structures(target)
    reg = next(r for r in registries if comp in r.components)
    text = (Path(target) / reg.file).read_text(encoding="utf-8")
    rel_mod = _module_name(d.module_path)
    new = _insert_entry(text, reg.name, f'"{d.model_id}": {d.class_name}')
    if new is None:
        return f"registry {reg.name} not found as a dict literal in {reg.file}"
    # the import goes after the file's last top-level import, as the framework's registry files list them
    tree = ast.parse(new)
    last = max(n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))
    lines = new.splitlines(keepends=True)
    lines.insert(last, f"from {rel_mod} import {d.class_name}\n")
    edits[reg.file] = "".join(lines)
    d.tables["registry"] = f"{reg.file}:{reg.name}"
    spec_files = [p for p in (Path(target) / MODELS_DIR).rglob("*.py") if re.search(rf"^{SPEC_TABLE}\s*=",
                                                                                 p.read_text(encoding="utf-8",
                                                                                             errors="replace"), re.M)]
    if not spec_files:
        return f"no {SPEC_TABLE} table under {MODELS_DIR}"
    spec_text = spec_files[0].read_text(encoding="utf-8")
    tree = ast.parse(spec_text)
    table = next(n for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == SPEC_TABLE for t in n.targets))
    specs = {k.value: ast.unparse(v) for k, v in zip(table.value.keys, table.value.values)
             if isinstance(k, ast.Constant)}
    # the closest's own spec; when it has none (a class built outside this table), the spec of the registered
    # encoder whose structure is nearest the source's, among those whose layers build no per-layer mergers first
    # (this writer designs encoders only for towers without them: such a layer needs their config to build)
    taps = {i: bool(component_taps(target, i, None).attr) for i in specs if i != comp.model_id}
    # and whose attention holds the fused linear_qkv the converter fills (not an IdentityOp placeholder for a
    # class that builds its own projections under other names)
    fused = {i: _spec_fuses_qkv(target, specs[i]) for i in specs}
    order = sorted(specs, key=lambda i: (i != comp.model_id, taps.get(i, False), not fused[i],
                                         len(structure_diff(source, structures[i]))
                                         if i in structures and not structures[i].error else 99, i))
    if not order:
        return f"{SPEC_TABLE} is empty"
    if order[0] != comp.model_id:
        d.reuses["layer_spec"] = f"{order[0]}'s entry in {SPEC_TABLE} ({comp.model_id} has none)" + (
            f"; not {sorted(i for i, t in taps.items() if t)}: their layers build per-layer mergers"
            if any(taps.values()) else "")
    fn = specs[order[0]]
    edits[str(spec_files[0].relative_to(target))] = _insert_entry(spec_text, SPEC_TABLE, f"'{d.model_id}': {fn}")
    d.tables["specs"] = f"{spec_files[0].relative_to(target)}:{SPEC_TABLE}"
    return edits
