"""A new vision projector for the Megatron route, registered the framework's way: a class in a module under the
target's ``models/vision/projectors``, an entry in the projector registry (``VISION_PROJECTION_MAPPINGS``, with its
import), keyed by a new ``model_id``; the model JSON's vision_projector section then selects it. No layer-spec
entry: the class builds plain torch modules and takes no submodules, as the framework's own GlmMLP and
InternVLMLP are registered.

What the class builds comes from the source's projector tensors (tools/megatron/projector_structure.py: the parts
in forward order, their widths and biases, a pooling step where the config states the tokens per image, a width
change as neighbouring patch rows concatenated). A bare matrix used as ``x @ W`` (stored [in, out]) becomes a
``Linear`` whose weight is its transpose (the converter says so). Nothing is written when the parts do not form one
chain (parallel gate / up matrices) or their order is not decided by the shapes.

Not carried over (named in ``not_built``): the activation between matrices when the config names none (GELU is
written), where the pooling sits relative to the norm (the pool is written first), a norm's parametrisation (the
weight is applied as ``x_hat * weight``; a source that stores ``weight - 1`` computes differently), and which
patches the merge concatenates (the encoder's row order decides).
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.agent.routes.megatron.new_component import _camel, _insert_entry, _module_name
from msmigrate.tools.megatron.projector_structure import ProjectorStructure, projector_diff, projector_from_code
from msmigrate.tools.megatron.registry import MODELS_DIR, read_registry

PROJECTORS_DIR = f"{MODELS_DIR}/vision/projectors"
# transformers' activation names -> the torch.nn.functional call (the ones a projector config names)
ACTIVATIONS = {"gelu": "F.gelu(x)", "gelu_pytorch_tanh": "F.gelu(x, approximate='tanh')", "relu": "F.relu(x)",
               "silu": "F.silu(x)", "quick_gelu": "x * torch.sigmoid(1.702 * x)"}


@dataclass
class ProjectorDesign:
    model_id: str | None = None
    class_name: str | None = None
    module_path: str | None = None
    code: str | None = None
    edits: dict[str, str] = field(default_factory=dict)  # target file -> its new text (the registry)
    tables: dict[str, str] = field(default_factory=dict)  # "registry" -> "file:dict name"
    json_fields: dict[str, Any] = field(default_factory=dict)  # the model JSON section the class reads
    # class tensor -> {"hf": source tensor, "op": copy | transpose}: what the converter maps, checked in the target
    layout: dict[str, dict[str, str]] = field(default_factory=dict)
    root: str | None = None  # the source projector's module (its tensors are the converter's input)
    not_built: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def design_projector(target: Path, match: dict[str, Any], cfg: dict[str, Any], model_type: str,
                     text_hidden: int | None, base_texts: dict[str, str] | None = None) -> ProjectorDesign:
    """The new projector for a source whose projector no registered class builds (``match``: the plan's
    vision_projector entry, with the source's ``structure``). ``base_texts``: target files another new component
    of this run already edits (the registry the new encoder is added to): the entry is added on top of them."""
    struct = match.get("structure") or {}
    chain = struct.get("chain")
    if not chain:
        return ProjectorDesign(error=f"the source projector's parts are not in one order: "
                                     f"{struct.get('chain_error') or 'no structure read'}")
    reg = read_registry(target)
    registries = [r for r in reg.for_role("vision_projector") if r.components and r.components[0].defined_in
                  and "spec" not in r.name.lower()]
    if not registries:
        return ProjectorDesign(error="no projector registry of classes found in the target")
    model_id = f"{model_type}_projector"
    if model_id in reg.ids_for("vision_projector"):
        return ProjectorDesign(error=f"model_id {model_id} is already registered")
    mats = [c for c in chain if c["kind"] == "matrix"]
    if text_hidden and mats[-1]["out"] != text_hidden:
        return ProjectorDesign(error=f"the last matrix gives {mats[-1]['out']}, the text decoder takes {text_hidden}")
    merge = int(struct.get("merge") or 1)
    encoder_width = mats[0]["in"] // merge
    act_name = cfg.get("projector_hidden_act")
    out = ProjectorDesign(model_id=model_id, class_name=f"{_camel(model_type)}Projector",
                         module_path=f"{PROJECTORS_DIR}/{model_type}_projector.py", root=struct.get("root"))
    vision = next((cfg[k] for k in ("vision_config", "vision_tower_config") if isinstance(cfg.get(k), dict)), {})
    patches = ((vision.get("image_size") or 0) // (vision.get("patch_size") or 1)) ** 2
    out.json_fields = {"model_id": model_id, "input_size": encoder_width, "hidden_size": mats[-1]["out"],
                       "ffn_hidden_size": mats[0]["out"], "merge": merge, "pool": int(struct.get("pool") or 1),
                       "patches_per_image": patches,
                       "layernorm_epsilon": vision.get("layer_norm_eps") or cfg.get("rms_norm_eps") or 1e-6,
                       "activation_func": act_name or "gelu"}
    if len(mats) > 1 and act_name not in ACTIVATIONS:
        out.not_built.append(f"the activation between the matrices: the config names {act_name!r}; GELU is written")
    if struct.get("pooling") and not struct.get("pool"):
        return ProjectorDesign(error="the source pools, by a factor its config does not give as a whole number")
    if struct.get("pool"):
        out.not_built.append("where the pooling sits: written before the norms and matrices (not in the weights)")
    if any(c["kind"] == "norm" for c in chain):
        out.not_built.append("the norms' parametrisation: applied as x_hat * weight (a source storing weight - 1 "
                             "computes differently)")
    if merge > 1:
        out.not_built.append(f"which {merge} patches are concatenated: consecutive encoder rows (its row order)")
    out.code, out.layout = _render(out, chain, act_name)
    # read back by the same AST reader the match used: the written class must build what the weights show
    built = projector_from_code(out.code, out.class_name, model_id)
    source = ProjectorStructure(**{k: v for k, v in struct.items() if k in ProjectorStructure.__dataclass_fields__})
    diff = projector_diff(source, built) if not built.error else [built.error]
    if diff:
        out.error = f"the written {out.class_name} does not build the source's projector: {diff}"
        return out
    reg0 = registries[0]
    text = (base_texts or {}).get(reg0.file) or (Path(target) / reg0.file).read_text(encoding="utf-8")
    new = _insert_entry(text, reg0.name, f'"{model_id}": {out.class_name}')
    if new is None:
        out.error = f"registry {reg0.name} not found as a dict literal in {reg0.file}"
        return out
    tree = ast.parse(new)
    last = max(n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))
    lines = new.splitlines(keepends=True)
    lines.insert(last, f"from {_module_name(out.module_path)} import {out.class_name}\n")
    out.edits = {reg0.file: "".join(lines)}
    out.tables = {"registry": f"{reg0.file}:{reg0.name}"}
    return out


def _render(d: ProjectorDesign, chain: list[dict[str, Any]], act_name: str | None) -> tuple[str, dict]:
    f = d.json_fields
    layout: dict[str, dict[str, str]] = {}
    init: list[str] = []
    body: list[str] = []
    n_mat = n_norm = 0
    act = ACTIVATIONS.get(act_name or "gelu", ACTIVATIONS["gelu"])
    if f["pool"] > 1:
        body += ["        # average-pool each image's patch grid: pool patches per output token",
                 "        side, k = int(self.config.patches_per_image ** 0.5), int(self.config.pool ** 0.5)",
                 "        grid = x.reshape(-1, side, side, x.shape[-1]).permute(0, 3, 1, 2)",
                 "        x = F.avg_pool2d(grid, k, k).flatten(2).transpose(1, 2).reshape(-1, x.shape[-1])"]
    merged = f["merge"] == 1
    mats = [c for c in chain if c["kind"] == "matrix"]
    # widths as the model-JSON fields the class reads: the first matrix takes input_size x merge, the last gives
    # hidden_size, the ones between ffn_hidden_size (the first matrix's output) when they are that wide
    first_in = "config.input_size * config.merge" if f["merge"] > 1 else "config.input_size"

    def out_expr(i: int) -> str:
        w = mats[i]["out"]
        return ("config.hidden_size" if i == len(mats) - 1 else "config.ffn_hidden_size"
                if w == f["ffn_hidden_size"] else str(w))
    prev = first_in
    for part in chain:
        if not merged and not part.get("before_merge"):
            merged_width = first_in.replace("config.", "self.config.")
            body.append(f"        x = x.reshape(-1, {merged_width})  # {f['merge']} neighbouring rows side by side")
            merged = True
        if part["kind"] == "norm":
            n_norm += 1
            name = f"norm{n_norm}" if n_norm > 1 else "norm"
            cls = "LayerNorm" if part["bias"] else "RMSNorm"
            width = "config.input_size" if part.get("before_merge") else prev
            init.append(f"        self.{name} = torch.nn.{cls}({width}, eps=config.layernorm_epsilon)")
            layout[f"{name}.weight"] = {"hf": part["module"] + ".weight", "op": "copy"}
            if part["bias"]:
                layout[f"{name}.bias"] = {"hf": part["module"] + ".bias", "op": "copy"}
            body.append(f"        x = self.{name}(x)")
            continue
        if n_mat:
            body.append(f"        x = {act}")
        name, width_out = f"linear_fc{n_mat + 1}", out_expr(n_mat)
        n_mat += 1
        init.append(f"        self.{name} = torch.nn.Linear({prev}, {width_out}, bias={bool(part['bias'])})")
        prev = width_out
        layout[f"{name}.weight"] = {"hf": part["tensor"], "op": "transpose" if part["bare"] else "copy"}
        if part["bias"]:
            layout[f"{name}.bias"] = {"hf": part["bias"], "op": "copy"}
        body.append(f"        x = self.{name}(x)")
    lines = [f'"""{d.class_name}: the vision projector for model_id {d.model_id!r} (written by msmigrate from the '
             "source's", f"projector weights): {_describe(chain, f)}.\"\"\"",
             "import torch", "import torch.nn.functional as F", "",
             "from mindspeed_mm.models.common.module import MultiModalModule", "", "",
             f"class {d.class_name}(MultiModalModule):",
             "    def __init__(self, config, submodules=None, *args, **kwargs):",
             "        super().__init__(config=config)", *init, "",
             "    def forward(self, x):",
             "        # [images * patches, encoder width] -> [images * tokens, text width]", *body,
             "        return x", ""]
    return "\n".join(lines), layout


def _describe(chain: list[dict[str, Any]], f: dict[str, Any]) -> str:
    parts = [f"average pool x{f['pool']}"] if f["pool"] > 1 else []
    for c in chain:
        parts.append(("LayerNorm" if c["bias"] else "RMSNorm") + f" {c['width']}" if c["kind"] == "norm"
                     else f"matrix {c['in']} -> {c['out']}")
    return ", ".join(parts)


def projector_module_files(design: dict[str, Any] | None) -> list[str]:
    """The paths registering the design edits (its module, the registry): the run's editable additions."""
    return [design["module_path"], *design["edits"]] if design else []

