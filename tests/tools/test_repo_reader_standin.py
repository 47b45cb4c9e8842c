"""repo_reader and file_writer on the generated stand-in target (same layout and idioms as the real checkout)."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from msmigrate.core.run_context import RunContext
from msmigrate.tools.file_writer import edit_file, rollback, tag_phase, write_file
from msmigrate.tools.repo_reader import outline, target_inventory, tree
from msmigrate.tools.worktree import attach

standin = pytest.importorskip("msmigrate.testbeds.standin")


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return standin.write_standin(tmp_path_factory.mktemp("standin") / "mm", with_assets=False)


def test_inventory_is_consistent_with_its_examples(target: Path):
    result = target_inventory(target)
    assert result.ok, result.error
    ids = result.data["ids"]
    assert ids["model"] and "huggingface" in ids["data"] and ids["template"] and ids["collator"]
    assert result.data["examples"], "the stand-in ships example YAMLs"
    for ex in result.data["examples"]:
        assert ex["route"] == "plugin", ex
        assert ex["model_id"] in ids["model"], ex
        assert ex["dataset_type"] in ids["data"], ex
        if ex["template"]:
            assert ex["template"] in ids["template"], ex
        collator = ex["collator_id"] or ex["collator_model_name"]
        assert collator in ids["collator"], ex
    # every template names a registered mm_plugin
    for tpl in result.data["templates"]:
        if "mm_plugin" in tpl["extra"]:
            assert tpl["extra"]["mm_plugin"] in ids["mm_plugin"], tpl


def test_tree_and_outline_on_standin(target: Path):
    assert "mindspeed_mm/" in tree(target, max_depth=1).data["tree"]
    reg = target_inventory(target).data["model_ids"][0]
    out = outline(target, reg["file"])
    assert out.ok and reg["id"] in [r["id"] for r in out.data["registrations"]]


def test_file_writer_on_standin(target: Path, tmp_path: Path):
    checkout = target
    ctx = RunContext(run_id="standin-1", run_dir=tmp_path, source=tmp_path / "src", target=checkout, model_name="tiny")
    attach(ctx)  # the run's own worktree, as the runner makes it
    target = ctx.target
    written = write_file(ctx, "mindspeed_mm/fsdp/models/tiny/__init__.py", "from . import modeling_tiny  # noqa\n")
    assert written.ok, written.error
    tag_phase(ctx, "model")
    template = "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py"
    text = (target / template).read_text()
    added = write_file(ctx, template, text + "\n# tiny: reuses an existing template\n")
    assert added.ok, added.error
    first = next(line for line in text.splitlines() if line.strip())
    changed = edit_file(ctx, template, first, first + "  # changed", replace_all=True)
    assert not changed.ok and "additive" in changed.error
    assert not write_file(ctx, "mindspeed_mm/fsdp/train/trainer.py", "x = 1\n").ok
    assert rollback(ctx, "model").ok
    assert (target / template).read_text() == text
    assert git.Repo(target).active_branch.name == "msmigrate/standin-1"
    assert git.Repo(checkout).active_branch.name != "msmigrate/standin-1"
