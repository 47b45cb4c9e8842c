"""The weight converter a Megatron-route migration writes when the target has none for the source's model_type
(agent/routes/megatron/new_converter.py): the renames and merges derived from the source's weight names and the new
encoder class's code, the framework's Converter shape, the index edit that makes mm-convert offer it."""

from __future__ import annotations

import ast

from msmigrate.agent.routes.megatron.new_converter import (class_modules, design_converter, encoder_ops,
                                                           language_model_ops, projector_ops)

LM = "language_model.model."
TOWER = "vision_tower.vision_model."
CLASS = '''
class LlavaViT(MultiModalModule):
    def __init__(self, config, transformer_layer_spec, pre_process=True, post_process=True):
        super().__init__(config=config)
        self.patch_embed = torch.nn.Conv2d(3, 32, kernel_size=7, stride=7, bias=True)
        self.position_embedding = torch.nn.Embedding(16, 32)
        self.decoder = VisionTransformerBlock(config=config, spec=transformer_layer_spec)
'''


def _shapes(tied: bool = False) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {f"{LM}embed_tokens.weight": [512, 64], f"{LM}norm.weight": [64]}
    if not tied:
        out["language_model.lm_head.weight"] = [512, 64]
    for i in range(2):
        for m in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out[f"{LM}layers.{i}.self_attn.{m}.weight"] = [64, 64]
            out[f"{TOWER}encoder.layers.{i}.self_attn.{m.replace('o_proj', 'out_proj')}.weight"] = [32, 32]
            out[f"{TOWER}encoder.layers.{i}.self_attn.{m.replace('o_proj', 'out_proj')}.bias"] = [32]
        for m in ("gate_proj", "up_proj", "down_proj"):
            out[f"{LM}layers.{i}.mlp.{m}.weight"] = [64, 64]
        for n in ("input_layernorm", "post_attention_layernorm"):
            out[f"{LM}layers.{i}.{n}.weight"] = [64]
        for m in ("fc1", "fc2", "layer_norm1", "layer_norm2"):
            out[f"{TOWER}encoder.layers.{i}.mlp.{m}.weight" if m.startswith("fc") else
                f"{TOWER}encoder.layers.{i}.{m}.weight"] = [32]
    out.update({f"{TOWER}embeddings.patch_embedding.weight": [32, 3, 7, 7],
                f"{TOWER}embeddings.patch_embedding.bias": [32],
                f"{TOWER}embeddings.position_embedding.weight": [16, 32],
                f"{TOWER}post_layernorm.weight": [32], f"{TOWER}post_layernorm.bias": [32],
                "multi_modal_projector.linear_1.weight": [64, 32], "multi_modal_projector.linear_2.weight": [64, 64]})
    return out


def test_language_model_is_the_stack_beside_the_token_embedding():
    """The vision tower's layers carry q_proj names too: the decoder is the stack next to embed_tokens; its output
    matrix sits beside the base model; no saved lm_head means tied embeddings."""
    lm, why = language_model_ops(sorted(_shapes()))
    assert why is None and lm["prefix"] == LM and not lm["tied"]
    pairs = dict(lm["renames"])
    assert pairs["language_model.lm_head"] == "text_decoder.output_layer"
    assert pairs[f"{LM}layers.(\\d+).post_attention_layernorm."] == "text_decoder.decoder.layers.(\\d+).pre_mlp_layernorm."
    tied, _ = language_model_ops(sorted(_shapes(tied=True)))
    assert tied["tied"] and "text_decoder.output_layer" not in dict(tied["renames"]).values()
    none, why = language_model_ops([f"{TOWER}encoder.layers.0.self_attn.q_proj.weight"])
    assert none is None and "want one" in why


def test_encoder_renames_go_to_the_written_class_modules():
    """The HF tower's modules land on the attributes the written class builds (read from its code): patch conv,
    position table, the block's numbered layers; q/k/v stay for the per-group merge."""
    assert class_modules(CLASS) == {"patch_embed": "torch.nn.Conv2d", "position_embedding": "torch.nn.Embedding",
                                    "decoder": "VisionTransformerBlock"}
    enc, why = encoder_ops(sorted(_shapes()), CLASS, f"{TOWER}embeddings.patch_embedding.weight", [])
    assert why is None, why
    pairs = dict(enc["renames"])
    assert pairs[f"{TOWER}embeddings.patch_embedding."] == "image_encoder.encoder.patch_embed."
    assert pairs[f"{TOWER}embeddings.position_embedding."] == "image_encoder.encoder.position_embedding."
    assert pairs[f"{TOWER}encoder.layers.(\\d+).self_attn.out_proj."] == \
        "image_encoder.encoder.decoder.layers.(\\d+).self_attention.linear_proj."
    assert enc["qkv"] == ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"]
    assert enc["middle"] == "image_encoder.encoder.decoder.layers."
    no_block, why = encoder_ops(sorted(_shapes()), CLASS.replace("VisionTransformerBlock", "Identity"),
                                f"{TOWER}embeddings.patch_embedding.weight", [])
    assert no_block is None and "no transformer block" in why


def test_projector_of_two_linears_only():
    pairs, why = projector_ops(sorted(_shapes()), "multi_modal_projector")
    assert why is None and [b for _, b in pairs] == ["image_encoder.projector.encoder.linear_fc1.",
                                                     "image_encoder.projector.encoder.linear_fc2."]
    none, why = projector_ops(sorted(_shapes()) + ["multi_modal_projector.linear_3.weight"], "multi_modal_projector")
    assert none is None and "3 matrices" in why


def _target(tmp_path):
    (tmp_path / "checkpoint/vlm_model/converters").mkdir(parents=True)
    (tmp_path / "checkpoint/__init__.py").write_text(
        "from checkpoint.common.converter import Converter\n\n# vlm model converter\n"
        "from checkpoint.vlm_model.converters.qwen2vl import Qwen2VLConverter\n\n# sora model converter\n"
        "from checkpoint.sora_model.wan_converter import WanConverter\n")
    return tmp_path


def test_design_writes_a_framework_converter_and_offers_it(tmp_path):
    """The module parses, subclasses the framework's Converter with hf_to_mm / mm_to_hf / resplit, merges q/k/v
    per query group with the source's head sizes, and its import joins the VLM converters in the index; the post
    norm the class does not build is listed as dropped."""
    text = {"num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64}
    new = {"code": CLASS, "outside_norms": [], "json_fields": {"hidden_size": 32}}
    d = design_converter(_target(tmp_path), "llava", _shapes(), new, "multi_modal_projector", text,
                         {"num_attention_heads": 2})
    assert d.error is None, d.error
    assert d.class_name == "LlavaConverter" and d.module_path == "checkpoint/vlm_model/converters/llava.py"
    tree = ast.parse(d.code)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LlavaConverter")
    assert {f.name for f in cls.body if isinstance(f, ast.FunctionDef)} == {"hf_to_mm", "mm_to_hf", "resplit"}
    assert "from transformers.models.llava import LlavaConfig" in d.code  # what converter_candidates reads
    assert "group=2, q_size=32, k_size=16, v_size=16" in d.code  # 4 query heads in 2 groups of head_dim 16
    assert "group=2, q_size=16, k_size=16, v_size=16" in d.code  # the tower: 2 heads, no grouping
    index = d.edits["checkpoint/__init__.py"]
    assert index.index("import LlavaConverter") < index.index("# sora model converter")
    assert d.dropped == [f"{TOWER}post_layernorm.bias", f"{TOWER}post_layernorm.weight"]
    assert "merge_source=True" in d.code  # the export takes the dropped tensors back from the HF folder
    again = design_converter(tmp_path, "llava", _shapes(), new, "multi_modal_projector", text, {"num_heads": 2})
    assert again.error is None
    (tmp_path / d.module_path).write_text(d.code)
    exists = design_converter(tmp_path, "llava", _shapes(), new, "multi_modal_projector", text, {"num_heads": 2})
    assert exists.error and "not overwritten" in exists.error
