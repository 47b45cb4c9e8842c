"""A weight converter for a source the target has none for, written the framework's way: a ``Converter`` subclass
in a module under the target's ``checkpoint/vlm_model/converters`` (``hf_to_mm`` / ``mm_to_hf`` / ``resplit``
built from the framework's own operators and its TP / PP splitting), imported by ``checkpoint/__init__.py`` so
``mm-convert <Class>`` offers it. It is written when the plan reuses a registered text decoder and designed a new
vision encoder (new_component.py) for a source whose model_type no converter imports.

The rename table is derived, not tabled per model:
- the language model: the module that holds the numbered decoder layers (``…layers.N.self_attn.q_proj``), its
  embedding, final norm and output matrix, in transformers' decoder naming (q/k/v/o, gate/up/down,
  input / post-attention norm) -> the Megatron GPT names the framework's own converters write for its decoders
  (``text_decoder.embedding.word_embeddings``, ``…decoder.layers.N.self_attention.linear_qkv`` fused per query
  group, ``…mlp.linear_fc1`` = gate then up, ``…final_layernorm``, ``text_decoder.output_layer``);
- the new encoder: the HF tower (the module holding the patch convolution and the numbered layers) -> the written
  class's own modules, read from its code by AST (the patch conv, the position table, the norms outside the blocks
  it builds, the block's attribute), the in-layer roles by transformers' vision-tower naming (the same roles the
  encoder-converter probe pairs) -> Megatron's layer names; q/k/v fused per query group;
- the projector: its matrices in order -> ``image_encoder.projector.encoder.linear_fcN`` (the framework's MLP
  projector); other projector shapes are not written (the design says so).
HF tensors nothing maps (a post norm the class does not build) are dropped by the framework's PP partition and
listed in ``dropped``. TP: column-parallel layers (linear_qkv, linear_fc1, embedding, output) split by rows, row-
parallel ones (linear_proj, linear_fc2) by columns, gated fc1 by GLU halves: Megatron's own convention.
What proves it: the delivered conversion command runs it, and the real step loads its output strictly.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron.probes.megatron_encoder_converter import hf_role

CONVERTERS_DIR = "checkpoint/vlm_model/converters"
CONVERTER_INDEX = "checkpoint/__init__.py"
LAYER = r"(\d+)"  # the framework's layer-number placeholder in operator names
_LM_QPROJ = re.compile(r"^(?P<lm>(?:.*\.)?)layers\.\d+\.self_attn\.q_proj\.weight$")
# transformers' decoder-layer module names -> the framework's Megatron GPT layer names
_LM_LAYER = (("self_attn.o_proj", "self_attention.linear_proj"), ("mlp.down_proj", "mlp.linear_fc2"),
             ("input_layernorm", "input_layernorm"), ("post_attention_layernorm", "pre_mlp_layernorm"))
_ENC_ROLE = {"proj": "self_attention.linear_proj", "fc1": "mlp.linear_fc1", "fc2": "mlp.linear_fc2",
             "norm1": "input_layernorm", "norm2": "pre_mlp_layernorm"}


@dataclass
class ConverterDesign:
    class_name: str | None = None
    module_path: str | None = None
    code: str | None = None
    edits: dict[str, str] = field(default_factory=dict)  # checkpoint/__init__.py with the import added
    renames: list[tuple[str, str]] = field(default_factory=list)  # (HF regex, Megatron name) the ops carry
    dropped: list[str] = field(default_factory=list)  # HF tensors no op maps (the PP partition leaves them out)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def class_modules(code: str) -> dict[str, str]:
    """attribute -> the call that builds it, for every ``self.X = Call(...)`` in the class's ``__init__``."""
    out = {}
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for st in ast.walk(node):
                if (isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and len(st.targets) == 1
                        and isinstance(st.targets[0], ast.Attribute) and isinstance(st.targets[0].value, ast.Name)
                        and st.targets[0].value.id == "self"):
                    out[st.targets[0].attr] = ast.unparse(st.value.func)
    return out


def _layered(names: list[str], prefix: str) -> dict[str, set[str]]:
    """Under ``prefix``: the numbered-layer stacks (``<stack>.N.<rest>``) -> the ``rest`` names of layer 0."""
    out: dict[str, set[str]] = {}
    for n in names:
        m = re.match(re.escape(prefix) + r"(.*?)\.(\d+)\.(.+)$", n)
        if m and m.group(2) == "0":
            out.setdefault(m.group(1), set()).add(m.group(3))
    return out




def language_model_ops(names: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """The LM's renames / merges from the source's weight names, or why none can be derived."""
    # the decoder's stack is the one beside a token embedding (a vision tower's layers use the same q_proj names)
    lms = {m.group("lm") for n in names if (m := _LM_QPROJ.match(n)) and f"{m.group('lm')}embed_tokens.weight" in names}
    if len(lms) != 1:
        return None, (f"{len(lms)} language-model layer stacks (…layers.N.self_attn.q_proj beside embed_tokens) in "
                      "the weights, want one")
    lm = lms.pop()
    embed = [lm + "embed_tokens.weight"]
    norm = lm + "norm.weight"
    # the output matrix: beside the LM's base model (language_model.lm_head next to language_model.model.)
    base = lm.rstrip(".").rpartition(".")[0]
    heads = [n for n in names if n == (base + "." if base else "") + "lm_head.weight"]
    if len(embed) != 1 or norm not in names:
        return None, f"the language model under {lm!r} has no single embed_tokens / final norm"
    renames = [(embed[0][:-len(".weight")], "text_decoder.embedding.word_embeddings"),
               (f"{lm}norm.", "text_decoder.decoder.final_layernorm.")]
    if heads:
        renames.append((heads[0][:-len(".weight")], "text_decoder.output_layer"))
    renames += [(f"{lm}layers.{LAYER}.{h}.", f"text_decoder.decoder.layers.{LAYER}.{m}.") for h, m in _LM_LAYER]
    bias = any(n.startswith(lm) and n.endswith("self_attn.q_proj.bias") for n in names)
    return {"renames": renames, "prefix": lm, "qkv_bias": bias, "tied": not heads}, None


def encoder_ops(names: list[str], class_code: str, patch_name: str, outside_norms: list[dict[str, Any]]
                ) -> tuple[dict[str, Any] | None, str | None]:
    """The new encoder's renames / merges: the HF tower's tensors -> the written class's modules."""
    mods = class_modules(class_code)
    block = next((a for a, call in mods.items() if "TransformerBlock" in call), None)
    position = next((a for a, call in mods.items() if call.endswith("Embedding")), None)
    conv = next((a for a, call in mods.items() if "Conv" in call), None)
    if block is None or conv is None:
        return None, "the encoder class builds no transformer block or no patch convolution (read from its code)"
    tower = patch_name
    while tower and not _layered(names, tower + "."):
        tower = tower.rpartition(".")[0]
    if not tower:
        return None, f"no HF tower with numbered layers above {patch_name}"
    stacks = _layered(names, tower + ".")
    stack, rests = max(stacks.items(), key=lambda kv: len(kv[1]))
    enc = "image_encoder.encoder."
    renames = [(patch_name.rpartition(".")[0] + ".", f"{enc}{conv}.")]
    pos = [n for n in names if n.startswith(tower + ".") and re.search(r"pos(ition)?_?embed", n)
           and not re.search(r"\.\d+\.", n[len(tower):])]
    if position and len(pos) == 1:
        renames.append((pos[0].rpartition(".")[0] + ".", f"{enc}{position}."))
    for n in outside_norms:
        src = next((x.rpartition(".")[0] for x in names if x.startswith(tower + ".")
                    and x.rpartition(".")[0].endswith("." + n["name"])), None)
        if src and n["name"] in mods:
            renames.append((src + ".", f"{enc}{n['name']}."))
    roles: dict[str, str] = {}
    for rest in sorted(rests):
        module = rest.rpartition(".")[0]
        role = hf_role(module)
        if role:
            roles.setdefault(role, module)
    qkv = [roles.get(r) for r in "qkv"]
    if None in qkv or any(r not in roles for r in ("proj", "fc1", "fc2")):
        return None, f"the tower's layers show no separate q/k/v + output + two MLP linears: roles {sorted(roles)}"
    src_layer, dst_layer = f"{tower}.{stack}.{LAYER}.", f"{enc}{block}.layers.{LAYER}."
    renames += [(src_layer + roles[r] + ".", dst_layer + m + ".") for r, m in _ENC_ROLE.items() if r in roles]
    return {"renames": renames, "tower": tower, "stack": stack, "qkv": qkv, "block": block,
            "firsts": [f"{enc}{conv}."] + ([f"{enc}{position}."] if position else [])
            + [f"{enc}{n['name']}." for n in outside_norms if n["place"] == "pre"],
            "lasts": [f"{enc}{n['name']}." for n in outside_norms if n["place"] == "post"],
            "middle": f"{enc}{block}.layers."}, None


def projector_ops(names: list[str], root: str | None) -> tuple[list[tuple[str, str]] | None, str | None]:
    """The projector's matrices in order -> the framework's MLP projector (two linears)."""
    if not root:
        return None, "the source's projector was not read"
    mats = sorted({n.rpartition(".")[0] for n in names if n.startswith(root + ".") and n.endswith(".weight")},
                  key=lambda m: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", m)])
    if len(mats) != 2:
        return None, f"the projector {root} has {len(mats)} matrices: only the two-linear MLP projector is written"
    return [(m + ".", f"image_encoder.projector.encoder.linear_fc{i}.") for i, m in enumerate(mats, 1)], None


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[_\W]+", name) if p)


def design_converter(target: Path, model_type: str, shapes: dict[str, list[int]], new_encoder: dict[str, Any],
                     projector_root: str | None, text_cfg: dict[str, Any], vision_cfg: dict[str, Any]
                     ) -> ConverterDesign:
    """The converter module for ``model_type`` and the index edit that makes ``mm-convert`` offer it."""
    out = ConverterDesign(class_name=f"{_camel(model_type)}Converter",
                          module_path=f"{CONVERTERS_DIR}/{model_type}.py")
    index = Path(target) / CONVERTER_INDEX
    if not index.is_file() or not (Path(target) / CONVERTERS_DIR).is_dir():
        out.error = f"the target has no {CONVERTERS_DIR} with a {CONVERTER_INDEX} to register a converter in"
        return out
    if (Path(target) / out.module_path).exists():
        out.error = f"{out.module_path} exists already: not overwritten"
        return out
    names = sorted(shapes)
    lm, why = language_model_ops(names)
    patch = [n for n, s in shapes.items() if len(s) == 4 and n.startswith(new_encoder.get("tower_prefix", ""))]
    patch = [n for n in patch if any(w in n for w in ("vision", "visual", "vit"))] or patch
    enc, why_enc = (encoder_ops(names, new_encoder["code"], patch[0], new_encoder.get("outside_norms") or [])
                    if len(patch) == 1 else (None, f"{len(patch)} 4-D patch convolutions in the weights, want one"))
    proj, why_proj = projector_ops(names, projector_root)
    if lm is None or enc is None or proj is None:
        out.error = "; ".join(w for w in (why, why_enc, why_proj) if w)
        return out
    out.renames = lm["renames"] + enc["renames"] + proj
    heads = int(text_cfg["num_attention_heads"])
    groups = int(text_cfg.get("num_key_value_heads") or heads)
    head_dim = int(text_cfg.get("head_dim") or int(text_cfg["hidden_size"]) // heads)
    v_heads = int(vision_cfg.get("num_attention_heads") or vision_cfg.get("num_heads"))
    v_dim = int(new_encoder["json_fields"]["hidden_size"]) // v_heads
    covered = re.compile("|".join(re.escape(p).replace(re.escape(LAYER), r"\d+") for p, _ in out.renames))
    merged = [f"{lm['prefix']}layers.{LAYER}.{m}" for m in ("self_attn.q_proj", "self_attn.k_proj",
                                                          "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")]
    merged += [f"{enc['tower']}.{enc['stack']}.{LAYER}.{m}" for m in enc["qkv"]]
    merged_re = re.compile("|".join(re.escape(p).replace(re.escape(LAYER), r"\d+") for p in merged))
    out.dropped = [n for n in names if not covered.match(n) and not merged_re.match(n)]
    out.code = _render(out, model_type, lm, enc, groups, heads, head_dim, v_heads, v_dim)
    text = index.read_text(encoding="utf-8")
    line = f"from checkpoint.vlm_model.converters.{model_type} import {out.class_name}\n"
    anchor = text.find("\n# sora")
    out.edits[CONVERTER_INDEX] = (text[:anchor + 1] + line + text[anchor + 1:]) if anchor >= 0 else text + line
    return out


def _merge_ops(lm: dict[str, Any], enc: dict[str, Any], groups: int, heads: int, head_dim: int, v_heads: int,
               v_dim: int) -> list[str]:
    p, t = lm["prefix"], f"{enc['tower']}.{enc['stack']}"
    qkv_kinds = ("weight", "bias") if lm["qkv_bias"] else ("weight",)
    ops = [f"UpGateMergeOp(raw_names=[r'{p}layers.{LAYER}.mlp.gate_proj.weight', "
           f"r'{p}layers.{LAYER}.mlp.up_proj.weight'], new_name=r'text_decoder.decoder.layers.{LAYER}.mlp.linear_fc1.weight')"]
    ops += [f"QKVMergeOp(raw_names=(r'{p}layers.{LAYER}.self_attn.q_proj.{k}', r'{p}layers.{LAYER}.self_attn.k_proj.{k}', "
            f"r'{p}layers.{LAYER}.self_attn.v_proj.{k}'), new_name=r'text_decoder.decoder.layers.{LAYER}.self_attention."
            f"linear_qkv.{k}', group={groups}, q_size={heads // groups * head_dim}, k_size={head_dim}, v_size={head_dim})"
            for k in qkv_kinds]
    q, k, v = enc["qkv"]
    ops += [f"QKVMergeOp(raw_names=(r'{t}.{LAYER}.{q}.{kind}', r'{t}.{LAYER}.{k}.{kind}', r'{t}.{LAYER}.{v}.{kind}'), "
            f"new_name=r'image_encoder.encoder.{enc['block']}.layers.{LAYER}.self_attention.linear_qkv.{kind}', "
            f"group={v_heads}, q_size={v_dim}, k_size={v_dim}, v_size={v_dim})" for kind in ("weight", "bias")]
    return ops


def _render(d: ConverterDesign, model_type: str, lm: dict[str, Any], enc: dict[str, Any], groups: int, heads: int,
            head_dim: int, v_heads: int, v_dim: int) -> str:
    blk = f"image_encoder.encoder.{enc['block']}.layers.{LAYER}"
    renames = "\n".join(f"        (r'{a}', r'{b}')," for a, b in d.renames)
    merges = "\n".join(f"    {op}," for op in _merge_ops(lm, enc, groups, heads, head_dim, v_heads, v_dim))
    # tensors no module holds (dropped on the way in) come back from the HF folder as they were
    merge = ", merge_source=True" if d.dropped else ""
    return f'''"""{d.class_name}: HF {model_type} weights <-> the MindSpeed-MM Megatron layout (written by msmigrate from the
source's weight names and the new vision encoder's class; see the migration's report for the derivation)."""
from typing import List, cast

from tqdm import tqdm

from checkpoint.common.converter import Converter
from checkpoint.common.permissions import set_directory_permissions
from checkpoint.vlm_model import hf_to_mm, mm_to_hf
from checkpoint.vlm_model.config import ConvertVppMMConfig, ConvertHFConfig, ConvertResplitConfig
from checkpoint.vlm_model.hf_to_mm import PPStageSchema, text_schema, split_by_tp, merge_vpp_index, \\
    partition_state_dict_by_pp, save_by_vpp
from checkpoint.vlm_model.mm_to_hf import load_from_mm, merge_by_tp
from checkpoint.vlm_model.operator import Operator, RenameOp, QKVMergeOp, UpGateMergeOp, RowSplit, ColSplit, GLUSplit

# the new encoder's stages: patch conv / position table / pre norms first, its layers, post norms + projector last
{model_type}_vision_schema = PPStageSchema(
    firsts={enc["firsts"]!r},
    lasts={enc["lasts"] + ["image_encoder.projector."]!r},
    middle={enc["middle"]!r}
)

# Megatron's column-parallel layers split by rows, row-parallel ones by columns, the gated fc1 by GLU halves
{model_type}_tp_patterns = {{
    r"text_decoder.output_layer.weight": RowSplit,
    r"text_decoder.embedding.word_embeddings.weight": RowSplit,
    r"text_decoder.decoder.layers.{LAYER}.self_attention.linear_qkv.weight": RowSplit,
    r"text_decoder.decoder.layers.{LAYER}.self_attention.linear_qkv.bias": RowSplit,
    r"text_decoder.decoder.layers.{LAYER}.self_attention.linear_proj.weight": ColSplit,
    r"text_decoder.decoder.layers.{LAYER}.mlp.linear_fc1.weight": GLUSplit,
    r"text_decoder.decoder.layers.{LAYER}.mlp.linear_fc2.weight": ColSplit,
    r"{blk}.self_attention.linear_qkv.weight": RowSplit,
    r"{blk}.self_attention.linear_qkv.bias": RowSplit,
    r"{blk}.self_attention.linear_proj.weight": ColSplit,
    r"{blk}.mlp.linear_fc1.weight": RowSplit,
    r"{blk}.mlp.linear_fc1.bias": RowSplit,
    r"{blk}.mlp.linear_fc2.weight": ColSplit,
    r"image_encoder.projector.encoder.linear_fc1.weight": RowSplit,
    r"image_encoder.projector.encoder.linear_fc1.bias": RowSplit,
    r"image_encoder.projector.encoder.linear_fc2.weight": ColSplit,
}}


def create_{model_type}_ops() -> List[Operator]:
    return [RenameOp((
{renames}
    )),
{merges}
    ]


class ConvertVppMMConfig{_camel(model_type)}(ConvertVppMMConfig):
    def model_post_init(self, _context):
        from transformers.models.{model_type} import {_camel(model_type)}Config
        config = cast({_camel(model_type)}Config, self.hf_config.config)
        self.common_model_config.num_key_value_heads = config.text_config.num_key_value_heads
        self.common_model_config.llm_num_layers = config.text_config.num_hidden_layers
        self.common_model_config.vit_num_layers = config.vision_config.num_hidden_layers
        self.common_model_config.tie_word_embeddings = {lm["tied"]!r}


class {d.class_name}(Converter):
    """{model_type}: HF <-> MindSpeed-MM (Megatron) weights"""

    @staticmethod
    def hf_to_mm(cfg: ConvertVppMMConfig{_camel(model_type)}):
        """huggingface -> mindspeed-mm"""
        hf_to_mm.convert_hf_to_mm(cfg, create_{model_type}_ops(), {model_type}_tp_patterns,
                                  [{model_type}_vision_schema, text_schema])
        set_directory_permissions(cfg.mm_dir)

    @staticmethod
    def mm_to_hf(cfg: ConvertHFConfig):
        """mindspeed-mm -> huggingface{' (the HF tensors no module holds come back from hf_dir as they were)' if d.dropped else ''}"""
        mm_to_hf.convert_mm_to_hf(cfg, create_{model_type}_ops(), {model_type}_tp_patterns{merge})
        set_directory_permissions(cfg.save_hf_dir)

    @staticmethod
    def resplit(cfg: ConvertResplitConfig):
        """re-split mindspeed-mm weights to other TP / PP sizes"""
        source, target = cfg.source_parallel_config, cfg.target_parallel_config
        tp_state_dicts = load_from_mm(cfg.source_dir, source.vit_pp_layers, source.llm_pp_layers, source.tp_size)
        state_dict = merge_by_tp(tp_state_dicts=tp_state_dicts, patterns={model_type}_tp_patterns)
        tp_state_dicts = split_by_tp(state_dict=state_dict, patterns={model_type}_tp_patterns, tp_size=target.tp_size)
        pp_ranges = merge_vpp_index([target.vit_pp_layers], [target.llm_pp_layers], [[]])
        for tp_rank, tp_state_dict in enumerate(tqdm(tp_state_dicts, desc="tp step")):
            pp_state_dicts = partition_state_dict_by_pp(tp_state_dict, pp_ranges,
                                                        [{model_type}_vision_schema, text_schema])
            save_by_vpp(pp_state_dicts, cfg.target_dir, pp_and_vpp_size=(target.pp_size, 1), tp_rank=tp_rank)
        set_directory_permissions(cfg.target_dir)
'''
