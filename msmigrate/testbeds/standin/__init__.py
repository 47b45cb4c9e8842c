"""Generator of the stand-in MindSpeed-MM target (plugin-style FSDP2 route contract, CPU-runnable).

`write_standin(dest)` copies the stand-in source tree (``tree/``) verbatim into ``dest``, optionally builds tiny
offline assets under ``dest/assets`` (random tiny Qwen3-VL HF folder + tokenizer + image processor + ShareGPT
samples with PNGs), and commits the baseline in a fresh git repository. See README.md next to this file.
"""
from __future__ import annotations

from pathlib import Path

from msmigrate.testbeds.checkout import commit_baseline, copy_tree

TREE = Path(__file__).parent / "tree"
GITIGNORE = "__pycache__/\n*.pyc\nlogs/\ncache_dir/\nckpt/\n"


def write_standin(dest: Path, *, git_init: bool = True, with_assets: bool = True) -> Path:
    """Write the stand-in checkout into `dest` (created if missing) and return its resolved path.

    with_assets: also build ``assets/`` (tiny model + data) that the example YAMLs reference (needs torch,
    transformers, tokenizers, pillow; ~1 s, < 1 MB). git_init: `git init` + commit everything as the baseline.
    """
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    copy_tree(TREE, dest)
    (dest / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    if with_assets:
        from msmigrate.testbeds.standin.assets import build_assets
        build_assets(dest)
    if git_init:
        commit_baseline(dest, "MindSpeed-MM stand-in baseline")
    return dest
