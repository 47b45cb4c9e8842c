"""Component matching of the Megatron route: a registered component is chosen by the fields the target's own
examples configure it with against the source's config, never by its name."""

from __future__ import annotations

import json
from pathlib import Path

from msmigrate.agent.routes.megatron.components import match_components, source_fields

SIZES = {"num_layers": 2, "hidden_size": 32, "num_attention_heads": 2, "patch_size": 14}


def example(root: Path, folder: str, enc: dict, dec: dict, proj: str = "mlp") -> None:
    doc = {"image_encoder": {"vision_encoder": {**SIZES, **enc}, "vision_projector": {"model_id": proj,
                                                                                       "input_size": 32}},
           "text_decoder": {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, **dec}}
    (root / "examples" / folder).mkdir(parents=True, exist_ok=True)
    (root / "examples" / folder / "model.json").write_text(json.dumps(doc))


def target(tmp_path: Path) -> Path:
    # ids chosen so that neither name says which source they fit
    example(tmp_path, "a", {"model_id": "enc_a", "window_attn_size": 8, "fullatt_block_indexes": [1]},
            {"model_id": "dec_a", "mrope_section": [1, 1, 2], "add_qkv_bias": True}, "proj_a")
    example(tmp_path, "b", {"model_id": "enc_b", "deepstack_visual_indexes": [0]},
            {"model_id": "dec_b", "mrope_section": [1, 1, 2], "qk_layernorm": True}, "proj_b")
    example(tmp_path, "c", {"model_id": "enc_c"}, {"model_id": "dec_c"}, "proj_c")
    return tmp_path


def src(vision: dict, text: dict | None = None) -> dict:
    return {"vision_config": {"depth": 2, "hidden_size": 32, "num_heads": 2, "patch_size": 14, **vision},
            "text_config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, **(text or {})}}


def test_window_attention_source_gets_the_window_encoder(tmp_path):
    m = match_components(src({"window_size": 56, "fullatt_block_indexes": [0]},
                             {"rope_scaling": {"mrope_section": [2, 3, 3]}, "attention_bias": True}), target(tmp_path))
    assert m["vision_encoder"].model_id == "enc_a"
    assert m["vision_encoder"].distinctive_in_source == ["fullatt_block_indexes", "window_attn_size"]
    assert m["text_decoder"].model_id == "dec_a"
    assert m["vision_projector"].model_id == "proj_a" and "pairs with encoder enc_a" in m["vision_projector"].why


def test_plain_source_prefers_the_component_expecting_least(tmp_path):
    m = match_components(src({}), target(tmp_path))
    assert m["vision_encoder"].model_id == "enc_c" and m["text_decoder"].model_id == "dec_c"


def test_empty_feature_is_not_a_feature(tmp_path):
    # fullatt_block_indexes: [] (no full-attention blocks listed) does not make the source a windowed one
    m = match_components(src({"deepstack_visual_indexes": [1], "fullatt_block_indexes": []}), target(tmp_path))
    assert m["vision_encoder"].model_id == "enc_b"


def test_feature_no_component_takes_needs_a_new_one(tmp_path):
    m = match_components(src({"deepstack_visual_indexes": [1], "window_size": 4}), target(tmp_path))
    enc = m["vision_encoder"]
    assert enc.model_id is None and "new vision_encoder component is needed" in enc.why
    assert enc.missing  # names what the closest one lacks
    assert m["vision_projector"].model_id is None


def test_registered_filter_drops_examples_of_unregistered_ids(tmp_path):
    m = match_components(src({"window_size": 56, "fullatt_block_indexes": [0]}), target(tmp_path),
                         {"vision_encoder": {"enc_b", "enc_c"}, "text_decoder": {"dec_c"},
                          "vision_projector": {"proj_c"}})
    assert m["vision_encoder"].candidates == ["enc_b", "enc_c"] and m["vision_encoder"].model_id is None


def test_source_fields_translate_to_framework_names():
    # untied output (tie_word_embeddings False) is the framework's untie_embeddings_and_output_weights
    f = source_fields(src({}, {"num_key_value_heads": 2, "tie_word_embeddings": False,
                                "rope_scaling": {"mrope_section": [1, 2, 3]}}), "text_decoder")
    assert {"num_layers", "num_query_groups", "untie_embeddings_and_output_weights", "mrope_section"} <= f
    assert source_fields({"num_attention_heads": 2}, "vision_encoder") is None


def test_encoder_structure_decides_before_fields(tmp_path):
    """On the stand-in (only a Qwen2-VL-style tower registered): a CLIP-like source shares every configured field
    the examples know, yet its weights show a 2-D patch conv, a learned position table and a class token, which the
    registered class does not build: a new component, with the differing facts named."""
    from msmigrate.testbeds.megatron_standin import write_megatron_standin
    from msmigrate.tools.megatron.registry import registered_ids

    mm = write_megatron_standin(tmp_path / "mm", git_init=False, with_assets=False)
    clip = {"vision_tower.emb.patch_embedding.weight": [32, 3, 14, 14], "vision_tower.emb.class_embedding": [32],
            "vision_tower.emb.position_embedding.weight": [17, 32], "vision_tower.layers.0.ln.weight": [32],
            "vision_tower.layers.0.ln.bias": [32], "model.layers.0.self_attn.q_proj.weight": [64, 64]}
    m = match_components(src({}), mm, registered_ids(mm), shapes=clip)
    enc = m["vision_encoder"]
    assert enc.model_id is None and enc.closest in ("qwen2vit", "qwen2_5_vit")
    assert "patch_embed: source 'conv2d', component 'conv3d'" in enc.missing
    assert {"learned_position", "class_token"} <= {d.split(":")[0] for d in enc.missing}
    assert enc.structure["class_token"] and enc.component_structure["patch_embed"] == "conv3d"
    qwen = {"visual.patch_embed.proj.weight": [32, 3, 2, 14, 14], "visual.blocks.0.norm1.weight": [32]}
    m = match_components(src({"window_size": 56, "fullatt_block_indexes": [0]}), mm, registered_ids(mm), shapes=qwen)
    assert m["vision_encoder"].model_id in ("qwen2vit", "qwen2_5_vit") and not m["vision_encoder"].missing


def test_untied_output_comes_from_the_weights_not_a_renamed_config_flag():
    """``tie_word_embeddings`` is the negation of the framework's ``untie_embeddings_and_output_weights``: a tied
    model (no lm_head saved) has no untie feature, an untied one (lm_head saved) has it, whatever the config says
    or omits; without weights the config's value is negated."""
    from msmigrate.agent.routes.megatron.components import source_fields

    text = {"num_attention_heads": 4, "hidden_size": 64}
    tied = {"text_config": {**text, "tie_word_embeddings": True}}
    untied_names = ["model.layers.0.self_attn.q_proj.weight", "lm_head.weight"]
    assert "untie_embeddings_and_output_weights" not in source_fields(tied, "text_decoder", untied_names[:1])
    assert "untie_embeddings_and_output_weights" in source_fields(tied, "text_decoder", untied_names)
    assert "untie_embeddings_and_output_weights" not in source_fields(tied, "text_decoder")
    untied = {"text_config": {**text, "tie_word_embeddings": False}}
    assert "untie_embeddings_and_output_weights" in source_fields(untied, "text_decoder")


def _decoder_shapes(qkv_bias: bool) -> dict:
    block = {f"model.language_model.layers.0.{m}.weight": [64, 64] for m in
             ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
              "mlp.up_proj", "mlp.down_proj")}
    block.update({f"model.language_model.layers.0.{n}.weight": [64] for n in
                  ("input_layernorm", "post_attention_layernorm")})
    if qkv_bias:
        block.update({f"model.language_model.layers.0.self_attn.{x}_proj.bias": [64] for x in "qkv"})
    return block


def test_decoder_is_reused_only_when_it_computes_what_the_source_computes(tmp_path):
    """A llama language model (no q/k/v bias, 1-D rotary) against the stand-in's qwen2_5_lm, whose example fixes
    add_qkv_bias true and mrope: no reuse, the differing facts named; the Qwen2.5-shaped one reuses it."""
    from msmigrate.testbeds.megatron_standin import write_megatron_standin
    from msmigrate.tools.megatron.registry import registered_ids

    mm = write_megatron_standin(tmp_path / "mm", git_init=False, with_assets=False)
    text = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
            "hidden_act": "silu"}
    llama = {"text_config": {**text, "model_type": "llama"}}
    m = match_components(llama, mm, registered_ids(mm), shapes=_decoder_shapes(False))["text_decoder"]
    assert m.model_id is None and m.closest == "qwen2_5_lm", m.why
    assert any(d.startswith("add_qkv_bias: source False") for d in m.missing), m.missing
    # 1-D rotary against mrope is no difference by itself (mrope with one position on every axis is rope)
    assert not any(d.startswith("position_embedding_type") for d in m.missing), m.missing
    qwen = {"text_config": {**text, "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1]}}}
    ok = match_components(qwen, mm, registered_ids(mm), shapes=_decoder_shapes(True))["text_decoder"]
    assert ok.model_id == "qwen2_5_lm", ok.why
    assert "mrope with one position on every axis is rope" not in ok.why  # an mrope source needs no condition


def test_rope_language_model_reuses_an_mrope_decoder_on_a_stated_condition(tmp_path):
    """A Qwen2 language model (q/k/v bias, 1-D rotary: LLaVA on Qwen2) computes what the mrope decoder computes when
    every rotary axis carries the token index: reused, and the condition is said; the reverse (an mrope source
    on a 1-D rotary component) stays a difference."""
    from msmigrate.agent.routes.megatron.components import architecture_diff, reuse_conditions
    from msmigrate.testbeds.megatron_standin import write_megatron_standin
    from msmigrate.tools.megatron.registry import registered_ids

    mm = write_megatron_standin(tmp_path / "mm", git_init=False, with_assets=False)
    text = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
            "hidden_act": "silu", "model_type": "qwen2"}
    m = match_components({"text_config": text}, mm, registered_ids(mm), shapes=_decoder_shapes(True))["text_decoder"]
    assert m.model_id == "qwen2_5_lm", m.why
    assert "position_embedding_type: source 'rope', component 'mrope'" in m.why
    assert "the batch carries no image grid" in m.why
    src = {"position_embedding_type": ("mrope", "config")}
    assert architecture_diff(src, {"position_embedding_type": "rope"}) != []
    assert reuse_conditions(src, {"position_embedding_type": "rope"}) == []
