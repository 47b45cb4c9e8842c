"""The maintainer's review asserted on a real end-to-end run's delivery (shared by the e2e test files): the run's own
review (evidence.json ``delivery_review``) found nothing, and the points it is about hold when read straight off the
work branch here, by checks written independently of the product's (agent/routes/fsdp2/delivery_review.py): no
absolute path outside the spec's source (its samples included) other than those the branch's base already held, no
run id, no fact measured on the samples written into generated code, the launch size the spec asked, ``load`` set to
the source, and the report showing the reviewer a diff against the similar example."""

from __future__ import annotations

import re
from pathlib import Path

import git
import yaml

from msmigrate.agent.launch_size import script_size


_ABSOLUTE = re.compile(r"(?<![\w$}.~:/\-])/(?:[\w.+\-]+/)+[\w.+\-]*")


def _base_paths(repo: git.Repo, branch: str) -> set[str]:
    """Absolute paths the branch's base already held in its examples and scripts (a toolkit's set_env.sh)."""
    base = repo.git.merge_base(branch, "HEAD")
    found: set[str] = set()
    for name in repo.git.ls_tree("-r", "--name-only", base).splitlines():
        if name.startswith("examples/") and name.endswith((".sh", ".yaml", ".yml")):
            found |= set(_ABSOLUTE.findall(repo.git.show(f"{base}:{name}")))
    return found


def _measured(evidence: dict) -> tuple[list[str], dict]:
    """The samples' expanded placeholder texts (more than one media token) and the processor's numeric settings."""
    expansion = (evidence.get("plan") or {}).get("media_expansion") or {}
    texts = [i["text"] for i in expansion.get("per_image") or [] if (i.get("count") or 0) > 1 and i.get("text")]
    numbers = {k: v for k, v in (expansion.get("processor_kwargs") or {}).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return texts, numbers


def assert_mergeable(evidence: dict, target: Path, run_id: str, source: Path, *, run_dir: Path,
                     size: tuple[int, int] = (2, 1)) -> None:
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
    inherited = _base_paths(repo, branch)
    texts, numbers = _measured(evidence)
    for rel in review["files"]:
        text = repo.git.show(f"{branch}:{rel}")
        stray = [p for p in _ABSOLUTE.findall(text) if p not in inherited
                 and not (p == str(source) or p.startswith(str(source).rstrip("/") + "/"))]
        assert not stray, (rel, stray)
        if rel.endswith(".py"):
            assert not [t for t in texts if t in text], (rel, "holds a sample's expanded placeholder text")
            assert not [k for k, v in numbers.items() if re.search(rf"\b{re.escape(k)}\b\W{{0,4}}\s*[=:]\s*"
                                                                      rf"{re.escape(repr(v))}\b", text)], \
                (rel, "assigns a processor setting measured on the source")
    report = (Path(run_dir) / "verification_report.md").read_text()
    section = report.split("## Delivery review", 1)[1]
    assert f"`{plan['config_path']}` against `{plan['similar_case']}`" in section
    diff = section.split("```diff", 1)[1].split("```", 1)[0]
    assert "--- similar example" in diff and re.search(r"^[+-](?![+-])", diff, re.M), "no readable diff lines"
