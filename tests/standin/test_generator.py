import subprocess

from msmigrate.testbeds.standin import write_standin

EXPECTED = [
    "mindspeed_mm/__init__.py", "mindspeed/fsdp/utils/str_match.py", "mindspeed/fsdp/utils/log.py",
    "mindspeed_mm/config/config_manager.py", "mindspeed_mm/fsdp/params/argument.py",
    "mindspeed_mm/fsdp/utils/register.py", "mindspeed_mm/fsdp/utils/device.py",
    "mindspeed_mm/fsdp/models/modelhub.py", "mindspeed_mm/fsdp/models/base_model.py",
    "mindspeed_mm/fsdp/models/qwen3vl/modeling_qwen3vl.py", "mindspeed_mm/fsdp/data/__init__.py",
    "mindspeed_mm/fsdp/data/datasets/huggingface/qwen2vl_dataset.py",
    "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py",
    "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py",
    "mindspeed_mm/fsdp/data/data_utils/func_utils/convert.py",
    "mindspeed_mm/fsdp/data/data_utils/func_utils/collator.py",
    "mindspeed_mm/fsdp/data/dataloader/data_collator.py", "mindspeed_mm/fsdp/train/trainer.py",
    "mindspeed_mm/fsdp/train/train_engine.py", "examples/qwen3vl/qwen3vl_config.yaml",
    "examples/qwen3vl/finetune_qwen3vl.sh", "examples/tiny_custom_lm/tiny_custom_lm_config.yaml",
    "assets/tiny_qwen3vl/config.json", "assets/tiny_qwen3vl/model.safetensors",
    "assets/tiny_qwen3vl/tokenizer.json", "assets/tiny_qwen3vl/preprocessor_config.json",
    "assets/data/sharegpt_images.json", "assets/data/images/img_000.png", "assets/data/sharegpt_text.json",
]


def test_generated_tree_is_committed(standin):
    for rel in EXPECTED:
        assert (standin / rel).is_file(), rel
    log = subprocess.run(["git", "-C", str(standin), "log", "--oneline"], capture_output=True, text=True, check=True)
    assert len(log.stdout.strip().splitlines()) == 1
    status = subprocess.run(["git", "-C", str(standin), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout.strip() == ""


def test_without_git_or_assets(tmp_path):
    dest = write_standin(tmp_path / "plain", git_init=False, with_assets=False)
    assert (dest / "mindspeed_mm/fsdp/train/trainer.py").is_file()
    assert not (dest / ".git").exists() and not (dest / "assets").exists()
    assert not list(dest.rglob("__pycache__"))
