"""What both stand-in targets do to become a checkout: copy a source tree verbatim and commit it as the baseline."""
from __future__ import annotations

import shutil
from pathlib import Path

from msmigrate.core.git import git


def copy_tree(tree: Path, dest: Path) -> None:
    """Copy ``tree`` into ``dest`` (bytecode caches left out)."""
    for src in sorted(tree.rglob("*")):
        if "__pycache__" in src.parts or src.suffix == ".pyc":
            continue
        target = dest / src.relative_to(tree)
        if src.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)


def commit_baseline(dest: Path, message: str) -> None:
    """``git init`` on branch master and commit everything in ``dest``."""
    for args in (("init", "-q", "-b", "master"), ("add", "-A"),
                 ("-c", "user.name=msmigrate-standin", "-c", "user.email=standin@msmigrate.invalid",
                  "commit", "-q", "-m", message)):
        git(dest, *args)
