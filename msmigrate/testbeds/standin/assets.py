"""Tiny offline assets for the stand-in's examples.

Builds, without any download: a random-weight tiny Qwen3-VL HF folder (config, safetensors, a word-level
tokenizer wrapped as PreTrainedTokenizerFast with a Qwen-style chat template, a slow PIL image processor and a
Qwen3VLProcessor), plus a small ShareGPT-style JSON data set with generated PNG images, and a text-only data set
for the custom-path example. Everything lands under ``<dest>/assets/``.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|image_pad|>", "<|video_pad|>", "<think>", "</think>",
]
WORDS = ("a the cat dog red blue green square circle picture image shows what is in this describe color shape "
         "there are two one small big on left right top bottom yes no user assistant system you helpful").split()
COLORS = {"red": (220, 30, 30), "blue": (30, 60, 220), "green": (30, 180, 60)}

QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for c in message['content'] %}{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tokenizer():
    """A word-level tokenizer trained offline, wrapped as a PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordLevelTrainer(special_tokens=["<unk>"] + SPECIAL_TOKENS + ["\n"])
    corpus = [" ".join(WORDS), "user assistant system \n ? . , : !"] + [str(i) for i in range(10)]
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS,
    )
    fast.chat_template = QWEN_CHAT_TEMPLATE
    return fast


def build_tiny_qwen3vl(model_dir: Path, seed: int = 0) -> None:
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration
    from transformers import Qwen2VLImageProcessorPil

    tokenizer = build_tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    vocab = ((len(tokenizer) + 15) // 16) * 16
    config = Qwen3VLConfig(
        text_config=dict(
            vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3],
                             "mrope_interleaved": True},
            tie_word_embeddings=False, pad_token_id=ids["<|endoftext|>"],
        ),
        vision_config=dict(
            depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16, spatial_merge_size=2,
            temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=64, deepstack_visual_indexes=[0],
        ),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    config.architectures = ["Qwen3VLForConditionalGeneration"]
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config)
    model.save_pretrained(model_dir)
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=16, merge_size=2, temporal_patch_size=2,
        size={"shortest_edge": 32 * 32, "longest_edge": 64 * 64},
    )
    # No torchvision here, so no Qwen3VL video processor and hence no full Qwen3VLProcessor can be built or
    # loaded; the folder carries tokenizer + image processor + chat template (the stand-in's load_tokenizer
    # assembles the processor from these when AutoProcessor cannot).
    image_processor.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    (model_dir / "chat_template.jinja").write_text(QWEN_CHAT_TEMPLATE, encoding="utf-8")


def build_sharegpt_data(data_dir: Path, n: int = 16, seed: int = 0, with_images: bool = True) -> Path:
    """~n ShareGPT samples ({"messages": [...], "images": [...]}); images are 64x64 PNGs (relative paths)."""
    from PIL import Image

    rng = random.Random(seed)
    data_dir.mkdir(parents=True, exist_ok=True)
    samples = []
    for i in range(n):
        color = rng.choice(sorted(COLORS))
        if with_images:
            img_rel = f"images/img_{i:03d}.png"
            (data_dir / "images").mkdir(exist_ok=True)
            Image.new("RGB", (64, 64), COLORS[color]).save(data_dir / img_rel)
            user = "<image>what color is in this picture ?"
            samples.append({"messages": [{"role": "user", "content": user},
                                         {"role": "assistant", "content": f"the picture is {color} ."}],
                            "images": [img_rel]})
        else:
            shape = rng.choice(["square", "circle"])
            samples.append({"messages": [{"role": "user", "content": f"describe a {color} {shape} ."},
                                         {"role": "assistant", "content": f"a small {color} {shape} ."}]})
    name = "sharegpt_images.json" if with_images else "sharegpt_text.json"
    path = data_dir / name
    path.write_text(json.dumps(samples, indent=1), encoding="utf-8")
    return path


def build_assets(dest: Path) -> Path:
    """Build everything under ``dest/assets`` and return that folder."""
    root = Path(dest) / "assets"
    build_tiny_qwen3vl(root / "tiny_qwen3vl")
    build_sharegpt_data(root / "data", with_images=True)
    build_sharegpt_data(root / "data", with_images=False)
    # The custom-path example points model_name_or_path at a local folder without config.json, so AutoConfig
    # fails locally (no Hub lookup) and ModelHub takes the custom path; with meta init no weights are read.
    custom = root / "tiny_custom_lm"
    custom.mkdir(parents=True, exist_ok=True)
    (custom / "README.md").write_text("Weights for tiny_custom_lm (model.pt) go here; absent = random init.\n",
                                      encoding="utf-8")
    return root
