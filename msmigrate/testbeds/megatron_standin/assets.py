"""Tiny offline assets for the Megatron stand-in: a random Qwen2.5-VL-shaped HF folder (config.json +
model.safetensors under HF's legacy key names, the names MindSpeed-MM's converters read by default) and tokenized
rows with image patches. The sizes match examples/qwen2.5vl/model_tiny.json. Torch + safetensors only."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

VISION = {"depth": 2, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "in_chans": 3, "patch_size": 2,
          "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 64}
TEXT = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
        "intermediate_size": 128, "vocab_size": 128, "tie_word_embeddings": False}
IMAGE_TOKEN, VISION_START, VISION_END = 120, 118, 119


def hf_config() -> dict:
    return {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
            "image_token_id": IMAGE_TOKEN, "vision_start_token_id": VISION_START, "vision_end_token_id": VISION_END,
            **TEXT, "text_config": {"model_type": "qwen2_5_vl_text", **TEXT},
            "vision_config": {"model_type": "qwen2_5_vl", **VISION}}


def hf_state(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    v, t = VISION, TEXT
    vh, th = v["hidden_size"], t["hidden_size"]
    kv = t["num_key_value_heads"] * th // t["num_attention_heads"]
    merged = vh * v["spatial_merge_size"] ** 2
    shapes = {"visual.patch_embed.proj.weight": (vh, v["in_chans"], v["temporal_patch_size"], v["patch_size"],
                                                 v["patch_size"]),
              "visual.merger.ln_q.weight": (vh,), "visual.merger.mlp.0.weight": (merged, merged),
              "visual.merger.mlp.0.bias": (merged,), "visual.merger.mlp.2.weight": (v["out_hidden_size"], merged),
              "visual.merger.mlp.2.bias": (v["out_hidden_size"],),
              "model.embed_tokens.weight": (t["vocab_size"], th), "model.norm.weight": (th,),
              "lm_head.weight": (t["vocab_size"], th)}
    for i in range(v["depth"]):
        p = f"visual.blocks.{i}."
        shapes.update({p + "norm1.weight": (vh,), p + "norm2.weight": (vh,), p + "attn.qkv.weight": (3 * vh, vh),
                       p + "attn.qkv.bias": (3 * vh,), p + "attn.proj.weight": (vh, vh), p + "attn.proj.bias": (vh,)})
        for n in ("gate_proj", "up_proj"):
            shapes.update({p + f"mlp.{n}.weight": (v["intermediate_size"], vh), p + f"mlp.{n}.bias":
                           (v["intermediate_size"],)})
        shapes.update({p + "mlp.down_proj.weight": (vh, v["intermediate_size"]), p + "mlp.down_proj.bias": (vh,)})
    for i in range(t["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (th,), p + "post_attention_layernorm.weight": (th,),
                       p + "self_attn.q_proj.weight": (th, th), p + "self_attn.q_proj.bias": (th,),
                       p + "self_attn.k_proj.weight": (kv, th), p + "self_attn.k_proj.bias": (kv,),
                       p + "self_attn.v_proj.weight": (kv, th), p + "self_attn.v_proj.bias": (kv,),
                       p + "self_attn.o_proj.weight": (th, th),
                       p + "mlp.gate_proj.weight": (t["intermediate_size"], th),
                       p + "mlp.up_proj.weight": (t["intermediate_size"], th),
                       p + "mlp.down_proj.weight": (th, t["intermediate_size"])})
    return {k: (torch.randn(s, generator=g) * 0.05 if len(s) > 1 else 1.0 + 0.01 * torch.randn(s, generator=g))
            for k, s in shapes.items()}


def tokenized_rows(n: int = 16, seed: int = 0) -> list[dict]:
    """Rows of [prompt with one 4x4-patch image (4 image tokens after the 2x2 merge)] + answer; labels mask the
    prompt. Token ids stay below the special ids."""
    g = torch.Generator().manual_seed(seed)
    v = VISION
    patch_dim = v["in_chans"] * v["temporal_patch_size"] * v["patch_size"] ** 2
    grid = [1, 4, 4]
    image_tokens = grid[0] * grid[1] * grid[2] // v["spatial_merge_size"] ** 2
    rows = []
    for _ in range(n):
        prompt = torch.randint(1, 100, (6,), generator=g).tolist()
        answer = torch.randint(1, 100, (8,), generator=g).tolist()
        ids = prompt[:3] + [VISION_START] + [IMAGE_TOKEN] * image_tokens + [VISION_END] + prompt[3:] + answer
        labels = [-100] * (len(ids) - len(answer)) + answer
        pixels = torch.randn(grid[0] * grid[1] * grid[2], patch_dim, generator=g)
        rows.append({"input_ids": ids, "labels": labels, "pixel_values": [[round(x, 5) for x in r]
                                                                          for r in pixels.tolist()],
                     "image_grid_thw": [grid]})
    return rows


def build_assets(dest: Path) -> None:
    model_dir = Path(dest) / "assets" / "tiny_qwen2_5_vl"
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(hf_config(), indent=2), encoding="utf-8")
    save_file(hf_state(), str(model_dir / "model.safetensors"))
    data_dir = Path(dest) / "assets" / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "tokenized_images.json").write_text(json.dumps(tokenized_rows()), encoding="utf-8")
