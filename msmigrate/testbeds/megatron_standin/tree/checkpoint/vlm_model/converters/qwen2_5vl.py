"""Qwen2.5-VL: HF safetensors <-> Megatron-layout checkpoint (``<mm_dir>/release/mp_rank_{tp:02d}[_{pp:03d}]/
model_optim_rng.pt``, one file per tensor-parallel rank and pipeline stage). Tensor parallelism as the framework
splits: column-parallel linears (the fused qkv, whole KV groups per rank; linear_fc1, gate and up blocks per rank) by
output rows, row-parallel ones (linear_proj, linear_fc2) by input columns, the embedding and output layer by
vocabulary rows. Pipeline stages by the per-stage layer counts (``llm_pp_layers`` / ``vit_pp_layers``, one
virtual stage): each stage its layer range, the embeddings on the first stage of their stack, the final norm,
output layer and projector on the last."""
import json
from pathlib import Path
from typing import TYPE_CHECKING

from safetensors.torch import load_file, save_file

from checkpoint.common.converter import Converter
from checkpoint.vlm_model.hf_to_mm import save_by_tp, split_by_pp, split_by_tp
from checkpoint.vlm_model.mm_to_hf import load_from_mm, merge_by_pp, merge_by_tp
from checkpoint.vlm_model.operator import ColSplit, GLUSplit, QKVMergeOp, RelocateOp, RenameOp, RowSplit, UpGateMergeOp

if TYPE_CHECKING:  # the HF config this converter reads (the real one casts to it); not imported at run time
    from transformers.models.qwen2_5_vl import Qwen2_5_VLConfig  # noqa: F401

VIT = r'image_encoder.encoder.blocks.layers.(\d+)'
LLM = r'text_decoder.decoder.layers.(\d+)'
VIT_RE, LLM_RE = (p.replace('.', r'\.') for p in (VIT, LLM))

qwen2_5_vl_tp_patterns = {
    r'text_decoder\.embedding\.word_embeddings\.weight': RowSplit,
    r'text_decoder\.output_layer\.weight': RowSplit,
    LLM_RE + r'\.self_attention\.linear_qkv\.(weight|bias)': RowSplit,
    LLM_RE + r'\.self_attention\.linear_proj\.weight': ColSplit,
    LLM_RE + r'\.mlp\.linear_fc1\.weight': GLUSplit,
    LLM_RE + r'\.mlp\.linear_fc2\.weight': ColSplit,
    VIT_RE + r'\.self_attention\.linear_qkv\.(weight|bias)': RowSplit,
    VIT_RE + r'\.self_attention\.linear_proj\.weight': ColSplit,
    VIT_RE + r'\.mlp\.linear_fc1\.(weight|bias)': GLUSplit,
    VIT_RE + r'\.mlp\.linear_fc2\.weight': ColSplit,
    r'image_encoder\.projector\.encoder\.linear_fc1\.(weight|bias)': RowSplit,
    r'image_encoder\.projector\.encoder\.linear_fc2\.weight': ColSplit,
}


def create_qwen2_5_vl_ops(vit_embed_dim, vit_num_heads, llm_num_query_groups, llm_q_size, llm_kv_size):
    renames = RenameOp((
        (r'visual.blocks.(\d+).attn.proj', VIT + '.self_attention.linear_proj'),
        (r'visual.blocks.(\d+).attn.qkv', VIT + '.self_attention.linear_qkv'),
        (r'visual.blocks.(\d+).mlp.down_proj', VIT + '.mlp.linear_fc2'),
        (r'visual.blocks.(\d+).norm1', VIT + '.input_layernorm'),
        (r'visual.blocks.(\d+).norm2', VIT + '.pre_mlp_layernorm'),
        (r'visual.merger.ln_q', r'image_encoder.projector.layernorm'),
        (r'visual.merger.mlp.0', r'image_encoder.projector.encoder.linear_fc1'),
        (r'visual.merger.mlp.2', r'image_encoder.projector.encoder.linear_fc2'),
        (r'visual.patch_embed.proj', r'image_encoder.encoder.patch_embed.proj'),
        (r'model.embed_tokens', r'text_decoder.embedding.word_embeddings'),
        (r'model.layers.(\d+).input_layernorm', LLM + '.input_layernorm'),
        (r'model.layers.(\d+).mlp.down_proj', LLM + '.mlp.linear_fc2'),
        (r'model.layers.(\d+).post_attention_layernorm', LLM + '.pre_mlp_layernorm'),
        (r'model.layers.(\d+).self_attn.o_proj', LLM + '.self_attention.linear_proj'),
        (r'lm_head', r'text_decoder.output_layer'),
        (r'model.norm', r'text_decoder.decoder.final_layernorm'),
    ))
    ops = [UpGateMergeOp([r'visual.blocks.(\d+).mlp.gate_proj.' + k, r'visual.blocks.(\d+).mlp.up_proj.' + k],
                         VIT + '.mlp.linear_fc1.' + k) for k in ("weight", "bias")]
    ops.append(renames)
    ops.append(UpGateMergeOp([r'model.layers.(\d+).mlp.gate_proj.weight', r'model.layers.(\d+).mlp.up_proj.weight'],
                             LLM + '.mlp.linear_fc1.weight'))
    ops += [QKVMergeOp(tuple(fr'model.layers.(\d+).self_attn.{x}_proj.{k}' for x in "qkv"),
                       LLM + '.self_attention.linear_qkv.' + k, group=llm_num_query_groups, q_size=llm_q_size,
                       k_size=llm_kv_size, v_size=llm_kv_size) for k in ("weight", "bias")]
    ops += [RelocateOp(VIT + '.self_attention.linear_qkv.' + k, VIT + '.self_attention.linear_qkv.' + k,
                       group=vit_num_heads, split_size=[vit_embed_dim] * 3) for k in ("weight", "bias")]
    return ops


def _parallel(cfg, nested, config):
    """(tp, {"text": [layers per stage], "vit": [...]}, vpp): hf_to_mm takes per-VPP lists of per-stage counts
    ([[n, m], [k, l]]: virtual stage v of pipeline rank p is flat stage v * pp + p), mm_to_hf per-stage counts
    ([n, m]), as the real converter does."""
    par = cfg.parallel_config
    counts = {"text": list(par.llm_pp_layers), "vit": list(par.vit_pp_layers)}
    vpp = 1
    if nested:
        vpp = len(counts["text"])
        if len(counts["vit"]) != vpp:
            raise ValueError(f"llm_pp_layers {counts['text']} and vit_pp_layers {counts['vit']} need the same "
                             "number of virtual stages")
        for stack, c in counts.items():
            if len({len(stage) for stage in c}) != 1:
                raise ValueError(f"{stack}: every virtual stage needs one count per pipeline stage, got {c}")
        counts = {k: [n for stage in c for n in stage] for k, c in counts.items()}
    layers = {"text": (config.get("text_config") or config)["num_hidden_layers"],
              "vit": config["vision_config"]["depth"]}
    for stack, c in counts.items():
        if sum(c) != layers[stack]:
            raise ValueError(f"{stack} pipeline layers {c} sum to {sum(c)}, the model has {layers[stack]}")
    if len(counts["text"]) != len(counts["vit"]):
        raise ValueError(f"llm_pp_layers {counts['text']} and vit_pp_layers {counts['vit']} need one count per stage")
    tp = int(getattr(par, "tp_size", 1) or 1)
    if tp < 1:
        raise ValueError(f"tp_size must be >= 1, got {tp}")
    return tp, counts, vpp


def _check_tp(config, tp):
    """Whole KV groups (text) and whole heads (ViT) per rank: the fused qkv rows are ordered by them."""
    text = config.get("text_config") or config
    groups = text.get("num_key_value_heads") or text["num_attention_heads"]
    for what, n in (("text KV groups", groups), ("text attention heads", text["num_attention_heads"]),
                    ("ViT heads", config["vision_config"]["num_heads"])):
        if n % tp:
            raise ValueError(f"{what} ({n}) do not divide by tp_size {tp}")


class Qwen2_5_VLConverter(Converter):
    """Qwen2.5-VL weight converter."""

    @staticmethod
    def _create_ops(config):
        text = config.get("text_config") or config
        vision = config["vision_config"]
        head_dim = text["hidden_size"] // text["num_attention_heads"]
        groups = text.get("num_key_value_heads") or text["num_attention_heads"]
        return create_qwen2_5_vl_ops(vision["hidden_size"], vision["num_heads"], groups,
                                     head_dim * text["num_attention_heads"] // groups, head_dim)

    @staticmethod
    def hf_to_mm(cfg):
        """HF -> Megatron layout."""
        hf_dir, mm_dir = Path(cfg.hf_config.hf_dir), Path(cfg.mm_dir)
        config = json.loads((hf_dir / "config.json").read_text())
        tp, counts, vpp = _parallel(cfg, True, config)
        _check_tp(config, tp)
        state = {}
        for f in sorted(hf_dir.glob("*.safetensors")):
            state.update(load_file(str(f)))
        for op in Qwen2_5_VLConverter._create_ops(config):
            op.apply(state)
        stages = split_by_pp(state, counts)  # one per flat stage: virtual stage v of rank p is v * pp + p
        pp = len(stages) // vpp
        for pp_rank in range(pp):
            save_by_tp([split_by_tp(stages[v * pp + pp_rank], qwen2_5_vl_tp_patterns, tp) for v in range(vpp)],
                       mm_dir, pp_rank=pp_rank, pp_size=pp)

    @staticmethod
    def mm_to_hf(cfg):
        """Megatron layout -> HF (config and tokenizer files copied from hf_dir)."""
        hf_dir, mm_dir, save = Path(cfg.hf_config.hf_dir), Path(cfg.mm_dir), Path(cfg.save_hf_dir)
        config = json.loads((hf_dir / "config.json").read_text())
        tp, counts, _ = _parallel(cfg, False, config)
        stages = load_from_mm(mm_dir, tp, len(counts["text"]))
        state = merge_by_pp([merge_by_tp(ranks, qwen2_5_vl_tp_patterns) for ranks in stages], counts)
        for op in reversed(Qwen2_5_VLConverter._create_ops(config)):
            op.revert(state)
        save.mkdir(parents=True, exist_ok=True)
        for f in hf_dir.iterdir():
            if f.is_file() and f.suffix != ".safetensors" and f.name != "model.safetensors.index.json":
                (save / f.name).write_bytes(f.read_bytes())
        save_file({k: v.contiguous() for k, v in state.items()}, str(save / "model.safetensors"))

    @staticmethod
    def resplit(cfg):
        """Pipeline re-split: not in the stand-in."""
        raise NotImplementedError("resplit is not part of the stand-in converter")
