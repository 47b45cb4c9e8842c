"""Generator of the Megatron-route stand-in target (MindSpeed-MM's pretrain_vlm.py contract, CPU-runnable).

`write_megatron_standin(dest)` copies ``tree/`` into ``dest``, optionally builds tiny assets (a random
Qwen2.5-VL-shaped HF folder and tokenized image rows) and commits the baseline in a fresh git repository. The
contract it imitates is checked against the real snapshot by tests/realmm/test_megatron_conformance.py; see
README.md next to this file for what it covers and what it leaves out.
"""
from __future__ import annotations

from pathlib import Path

from msmigrate.testbeds.checkout import commit_baseline, copy_tree

TREE = Path(__file__).parent / "tree"
GITIGNORE = "__pycache__/\n*.pyc\nlogs/\nckpt/\nsave_dir/\n"
EXAMPLE = {"model_json": "examples/qwen2.5vl/model_tiny.json", "data_json": "examples/qwen2.5vl/data_tiny.json",
           "script": "examples/qwen2.5vl/finetune_qwen2_5_vl_tiny.sh", "hf_dir": "assets/tiny_qwen2_5_vl",
           "converter": "Qwen2_5_VLConverter", "mm_dir": "ckpt/mm_path/tiny_qwen2_5_vl"}


def write_megatron_standin(dest: Path, *, git_init: bool = True, with_assets: bool = True) -> Path:
    """Write the stand-in checkout into ``dest`` (created if missing); return its resolved path.

    with_assets: build ``assets/`` (tiny HF model + tokenized rows; torch + safetensors, < 1 s, ~0.3 MB).
    git_init: ``git init`` and commit everything as the baseline on branch master.
    """
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    copy_tree(TREE, dest)
    (dest / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    if with_assets:
        from msmigrate.testbeds.megatron_standin.assets import build_assets
        build_assets(dest)
    if git_init:
        commit_baseline(dest, "MindSpeed-MM Megatron-route stand-in baseline")
    return dest
