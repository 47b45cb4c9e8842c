"""repo_reader.hf_summary: HF folder facts read statically, forward signature statically or via the runtime probe."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from msmigrate.tools.repo_reader import hf_summary


def _write(folder: Path, files: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (folder / name).write_text(textwrap.dedent(text).lstrip("\n") if isinstance(content, str) else text)
    return folder


@pytest.fixture()
def native(tmp_path: Path) -> Path:
    return _write(tmp_path / "qwen2vl_tiny", {
        "config.json": {
            "architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl",
            "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
            "text_config": {"model_type": "qwen2_vl_text", "hidden_size": 64, "num_hidden_layers": 2,
                            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 151936,
                            "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1]}},
            "vision_config": {"model_type": "qwen2_vl", "depth": 2, "embed_dim": 32, "patch_size": 14,
                              "spatial_merge_size": 2},
        },
        "tokenizer_config.json": {
            "tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
            "added_tokens_decoder": {
                "151643": {"content": "<|endoftext|>", "special": True},
                "151652": {"content": "<|vision_start|>", "special": True},
                "151655": {"content": "<|image_pad|>", "special": True},
                "151656": {"content": "<|video_pad|>", "special": True},
            },
            "chat_template": "{{ 'from tokenizer_config' }}",
        },
        "chat_template.jinja": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                               "{% endfor %}",
        "preprocessor_config.json": {"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 14,
                                     "merge_size": 2, "min_pixels": 3136, "max_pixels": 12845056},
        "tokenizer.json": {"added_tokens": [{"id": 151653, "content": "<|vision_end|>", "special": True}]},
        "model.safetensors": "not really weights",
    })


@pytest.fixture()
def custom(tmp_path: Path) -> Path:
    return _write(tmp_path / "tiny_custom", {
        "config.json": {
            "architectures": ["TinyCustomForCausalLM"], "model_type": "tiny_custom",
            "auto_map": {"AutoConfig": "configuration_tiny.TinyConfig",
                         "AutoModelForCausalLM": "org/tiny--modeling_tiny.TinyCustomForCausalLM",
                         "AutoTokenizer": ["tokenization_tiny.TinyTokenizer", None]},
            "hidden_size": 32, "num_hidden_layers": 2, "vision_config": {"hidden_size": 16, "image_size": 28},
        },
        "modeling_tiny.py": """
            class TinyBase:
                def forward(self, tokens, images=None, *, target=None):
                    raise NotImplementedError


            class TinyCustomForCausalLM(TinyBase):
                def generate(self):
                    pass
        """,
        "tokenizer_config.json": {"chat_template": [{"name": "default", "template": "T-default"},
                                                   {"name": "tool_use", "template": "T-tool"}],
                                  "extra_special_tokens": {"image_token": "<img>"}},
        "special_tokens_map.json": {"eos_token": {"content": "</s>"}},
        "added_tokens.json": {"<img>": 5, "<box>": 6, "<other>": 7},
    })


def test_native_folder_summary(native: Path):
    result = hf_summary(native)
    assert result.ok, result.error
    d = result.data
    assert d["architectures"] == ["Qwen2VLForConditionalGeneration"] and d["model_type"] == "qwen2_vl"
    assert d["sizes"]["image_token_id"] == 151655
    assert d["sub_configs"]["vision_config"]["depth"] == 2
    assert d["sub_configs"]["text_config"]["hidden_size"] == 64
    assert d["needs_trust_remote_code"] is False and d["custom_code_files"] == []
    assert d["tokens"]["media_tokens"] == {"<|image_pad|>": 151655, "<|video_pad|>": 151656,
                                           "<|vision_start|>": 151652, "<|vision_end|>": 151653}
    assert d["tokens"]["special_tokens"]["eos_token"] == "<|im_end|>"
    assert d["chat_template"]["source"] == "chat_template.jinja"  # the .jinja file wins over tokenizer_config
    assert d["processor_configs"]["preprocessor_config.json"]["merge_size"] == 2
    assert d["weight_files"] == ["model.safetensors"]
    assert d["forward"] is None  # native class and no runtime given: no probe


def test_custom_code_forward_found_statically_through_base(custom: Path):
    d = hf_summary(custom, runtime_python=sys.executable).data  # static wins: no probe for custom code
    assert d["needs_trust_remote_code"] is True
    assert d["auto_map_files_missing"] == ["configuration_tiny.py", "tokenization_tiny.py"]
    assert d["forward"] == {"source": "static", "file": "modeling_tiny.py", "class": "TinyCustomForCausalLM",
                            "defined_in": "TinyBase", "line": 2,
                            "signature": "forward(self, tokens, images=None, *, target=None)"}
    assert d["chat_template"]["text"] == "T-default" and d["chat_template"]["source"] == "tokenizer_config.json"
    assert d["tokens"]["media_tokens"] == {"<box>": 6, "<img>": 5}
    assert d["tokens"]["special_tokens"]["eos_token"] == "</s>"


def test_not_a_model_folder(tmp_path: Path):
    assert "config.json" in hf_summary(tmp_path).error
    (tmp_path / "config.json").write_text("{broken")
    assert "invalid JSON" in hf_summary(tmp_path).error


def test_native_forward_signature_via_probe(native: Path):
    forward = hf_summary(native, runtime_python=sys.executable).data["forward"]
    assert forward["source"] == "probe", forward
    names = [p["name"] for p in forward["parameters"]]
    assert {"input_ids", "labels", "pixel_values", "image_grid_thw"} <= set(names)
    assert forward["class"] == "Qwen2VLForConditionalGeneration"


def test_probe_failure_is_reported(tmp_path: Path):
    folder = _write(tmp_path / "m", {"config.json": {"architectures": ["NoSuchModelForCausalLM"]}})
    forward = hf_summary(folder, runtime_python=sys.executable).data["forward"]
    assert forward["source"] == "probe" and "NoSuchModelForCausalLM" in forward["error"]


def test_sub_configs_the_common_names_miss_show_their_own_entries(tmp_path: Path):
    """Held-out DeepSeek-VL2-style config: nested vision / projector / language dicts whose sizes are named
    ``width``/``layers``/``heads`` and ``n_embed``/``input_dim``. The summary showed ``projector_config:
    {'model_type': ...}`` alone, as if it held nothing; now a sub-config the common names barely describe lists its
    own scalar entries (bookkeeping defaults left out), and a well-described one stays as it was."""
    folder = _write(tmp_path / "tiler", {"config.json": {
        "architectures": ["TilerForCausalLM"], "model_type": "tiler",
        "vision_config": {"model_type": "vit", "width": 32, "layers": 1, "heads": 2, "patch_size": 7,
                          "return_dict": True, "temperature": 1.0},
        "projector_config": {"projector_type": "downsample_mlp", "n_embed": 64, "input_dim": 32, "depth": 2,
                             "downsample_ratio": 2, "layers_list": [1, 2]},
        "language_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 99,
                            "rope_theta": 10000.0}}})
    subs = hf_summary(folder).data["sub_configs"]
    assert subs["vision_config"] == {"model_type": "vit", "patch_size": 7, "width": 32, "layers": 1, "heads": 2}
    assert subs["projector_config"] == {"model_type": None, "depth": 2, "projector_type": "downsample_mlp",
                                        "n_embed": 64, "input_dim": 32, "downsample_ratio": 2}
    assert subs["language_config"] == {"model_type": None, "hidden_size": 64, "num_hidden_layers": 2,
                                       "num_attention_heads": 4, "vocab_size": 99}


def test_a_flat_config_with_its_own_size_names_shows_them(tmp_path: Path):
    """Held-out Molmo-style flat config: ``d_model`` / ``n_layers`` / ``embedding_size`` (the logits' width, larger
    than ``vocab_size``). The sizes showed vocab_size and dtype only; token ids and dtype do not count as sizes."""
    folder = _write(tmp_path / "flat", {"config.json": {
        "architectures": ["FlatForCausalLM"], "model_type": "flat", "vocab_size": 468, "embedding_size": 512,
        "d_model": 64, "n_layers": 2, "n_heads": 4, "dtype": "float32", "eos_token_id": 0, "use_cache": True,
        "auto_map": {"AutoModelForCausalLM": "modeling_flat.FlatForCausalLM"}}})
    sizes = hf_summary(folder).data["sizes"]
    assert sizes["embedding_size"] == 512 and sizes["d_model"] == 64 and sizes["n_layers"] == 2
    assert sizes["vocab_size"] == 468 and "auto_map" not in sizes and "architectures" not in sizes
