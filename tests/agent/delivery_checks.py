"""The maintainer's review asserted on a real end-to-end run's delivery (shared by the e2e test files): the run's own
review (evidence.json ``delivery_review``) found nothing, and the points it is about hold when read straight off the
work branch here."""

from __future__ import annotations

from pathlib import Path

import git
import yaml

from msmigrate.agent.launch_size import script_size


def assert_mergeable(evidence: dict, target: Path, run_id: str, source: Path, size: tuple[int, int] = (2, 1)) -> None:
    review = evidence.get("delivery_review") or {}
    assert review.get("problems") == [], review
    plan = evidence["plan"]
    assert {plan["config_path"], plan["script_path"]} <= set(review["files"])
    assert plan["config_path"] in review["diffs"], "no diff against the similar example for the reviewer"
    branch = f"msmigrate/{run_id}"
    repo = git.Repo(target)
    config = yaml.safe_load(repo.git.show(f"{branch}:{plan['config_path']}"))
    assert config["training"]["load"] == str(source) and config["training"]["init_model_with_meta_device"] is True
    assert script_size(repo.git.show(f"{branch}:{plan['script_path']}")) == size
    readme = repo.git.show(f"{branch}:{Path(plan['config_path']).parent / 'README.md'}")
    assert "training.load" in readme and plan["script_path"] in readme
    for rel in review["files"]:
        assert run_id not in repo.git.show(f"{branch}:{rel}"), rel
