"""file_writer: escape attempts are refused, accepted edits are validated commits, rollback/undo work."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest

from msmigrate.core.run_context import RunContext
from msmigrate.tools.worktree import attach
from msmigrate.tools.file_writer import (
    additive_violation, check_path, edit_file, file_writer_tools, rollback, tag_phase, undo_last, write_file,
)

TEMPLATE_PY = "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py"
TEMPLATE_TEXT = (
    "TEMPLATES = {}\n\n\n"
    "def _register_template(name, params=None, mm_plugin=None):\n    TEMPLATES[name] = params\n\n\n"
    '_register_template(name="qwen2vl", params=1)\n'
)


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """The user's checkout (on main); the run works in a git worktree of it."""
    root = tmp_path / "mm"
    files = {
        "mindspeed_mm/fsdp/train/trainer.py": "print('trainer')\n",
        "mindspeed_mm/fsdp/utils/register.py": "class Register: ...\n",
        "mindspeed_mm/fsdp/models/modelhub.py": "x = 1\n",
        "mindspeed_mm/fsdp/models/qwen3vl/modeling.py": "y = 2\n",
        TEMPLATE_PY: TEMPLATE_TEXT,
        "examples/qwen3vl/qwen3vl_config.yaml": "model:\n  model_id: qwen3_vl\n",
        ".gitignore": "*.log\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    repo = git.Repo.init(root, initial_branch="main")
    with repo.git.custom_environment(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                                     GIT_COMMITTER_EMAIL="t@t"):
        repo.git.add("-A")
        repo.git.commit("-m", "base")
    return root


@pytest.fixture()
def ctx(checkout: Path, tmp_path: Path) -> RunContext:
    source = tmp_path / "src_model"
    source.mkdir()
    (source / "config.json").write_text("{}")
    c = RunContext(run_id="r1", run_dir=tmp_path / "run", source=source, target=checkout, model_name="tiny")
    attach(c)
    return c


@pytest.fixture()
def target(ctx: RunContext) -> Path:
    """The run's work tree (where every edit lands)."""
    return ctx.target


GOOD_PY = "mindspeed_mm/fsdp/models/tiny/modeling_tiny.py"

ESCAPES = [
    ("../outside.py", "'..'"),
    ("examples/tiny/../../mindspeed_mm/fsdp/train/trainer.py", "'..'"),
    ("EXAMPLES/../..", "'..'"),
    ("/etc/passwd", "absolute"),
    ("~/x.py", "absolute"),
    ("C:/x.py", "absolute"),
    ("examples\\tiny\\x.yaml", "backslash"),
    ("examples/tiny/a\x00.yaml", "NUL"),
    ("examples/tiny/" + "a" * 300 + ".yaml", "too long"),
    ("examples/tiny/" + "/".join(["d"] * 130) + "/x.yaml", "too long"),
    ("Examples/tiny/x.yaml", "letter case"),
    ("examples/TINY/x.yaml", "letter case"),
    (".git/config", ".git"),
    ("examples/tiny/.git/hooks/pre-commit", ".git"),
    ("examples/tiny/.GIT/config", ".git"),
    ("mindspeed_mm/fsdp/train/trainer.py", "framework core"),
    ("mindspeed_mm/fsdp/utils/register.py", "framework core"),
    ("mindspeed_mm/fsdp/models/modelhub.py", "framework core"),
    ("mindspeed_mm/fsdp/models/qwen3vl/modeling.py", "outside the run's editable"),
    ("examples/qwen3vl/qwen3vl_config.yaml", "outside the run's editable"),
    ("README.md", "outside the run's editable"),
    ("examples/tiny", "outside the run's editable"),
    ("examples/tiny/", "directory"),
    ("", "empty"),
    ("examples/tiny/x\n.yaml", "control"),
]


@pytest.mark.parametrize(("path", "why"), ESCAPES, ids=[repr(p)[:40] for p, _ in ESCAPES])
def test_escape_attempts_are_refused(ctx: RunContext, target: Path, path: str, why: str):
    head = git.Repo(target).head.commit.hexsha
    result = write_file(ctx, path, "x = 1\n")
    assert not result.ok
    assert why in result.error
    assert git.Repo(target).head.commit.hexsha == head  # nothing committed


def test_symlinked_editable_dir_escape_is_refused(ctx: RunContext, target: Path):
    (target / "examples").mkdir(exist_ok=True)
    os.symlink(target / "mindspeed_mm/fsdp/train", target / "examples/tiny")
    result = write_file(ctx, "examples/tiny/trainer.py", "x = 1\n")
    assert not result.ok and "symlink" in result.error
    assert (target / "mindspeed_mm/fsdp/train/trainer.py").read_text() == "print('trainer')\n"


def test_symlinked_file_escape_is_refused(ctx: RunContext, target: Path, tmp_path: Path):
    (target / "examples/tiny").mkdir(parents=True)
    outside = tmp_path / "victim.yaml"
    outside.write_text("a: 1\n")
    os.symlink(outside, target / "examples/tiny/cfg.yaml")
    result = write_file(ctx, "examples/tiny/cfg.yaml", "a: 2\n")
    assert not result.ok and "symlink" in result.error
    assert outside.read_text() == "a: 1\n"


def test_source_folder_inside_target_is_read_only(target: Path, tmp_path: Path):
    source = target / "examples/tiny/hf"
    source.mkdir(parents=True)
    c = RunContext(run_id="r1", run_dir=tmp_path / "run", source=source, target=target, model_name="tiny")
    result = write_file(c, "examples/tiny/hf/config.json", "{}")
    assert not result.ok and "source model folder" in result.error


def test_core_stays_protected_even_if_configured_editable(target: Path, tmp_path: Path):
    c = RunContext(run_id="r1", run_dir=tmp_path / "run", source=tmp_path, target=target, model_name="tiny",
                   extra_editable=["mindspeed_mm/fsdp/train/", "mindspeed_mm/fsdp/utils/register.py"])
    for path in ("mindspeed_mm/fsdp/train/trainer.py", "mindspeed_mm/fsdp/utils/register.py",
                 "mindspeed_mm/fsdp/train/Trainer.py"):
        result = write_file(c, path, "x = 1\n")
        assert not result.ok and "framework core" in result.error, path


def test_unsafe_model_name_is_refused(target: Path, tmp_path: Path):
    c = RunContext(run_id="r1", run_dir=tmp_path / "run", source=tmp_path / "s", target=target, model_name="..")
    assert "model_name" in check_path(c, "examples/x.yaml")
    result = write_file(c, "mindspeed_mm/fsdp/models/x.py", "x = 1\n")
    assert not result.ok and "model_name" in result.error


def test_accepted_write_commits_on_work_branch_and_answers_a_digest(ctx: RunContext, target: Path):
    text = "class Tiny:\n    pass\n" + "".join(f"X{i} = {i}\n" for i in range(400))
    result = write_file(ctx, GOOD_PY, text, reason="model plugin")
    assert result.ok, result.error
    repo = git.Repo(target)
    assert repo.active_branch.name == "msmigrate/r1"
    assert repo.head.commit.hexsha == result.data["commit"]
    # a new file is answered with size + hash + head, not the diff of the text the model just sent
    assert "diff" not in result.data and result.data["created"] is True
    assert result.data["bytes"] == len(text) and result.data["lines"] == 402
    assert result.data["head"].startswith("class Tiny:\n    pass") and "X399" not in result.data["head"]
    assert len(result.to_json()) < 600
    import hashlib
    assert result.data["sha256"] == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert "Msmigrate-Run: r1" in repo.head.commit.message
    assert repo.head.commit.parents[0].hexsha == repo.heads["main"].commit.hexsha
    assert not repo.is_dirty(untracked_files=True)
    user = git.Repo(ctx.checkout)  # the user's checkout stays on main, without the edit
    assert user.active_branch.name == "main" and not (ctx.checkout / GOOD_PY).exists()


def test_edit_replaces_unique_text_and_commits(ctx: RunContext, target: Path):
    assert write_file(ctx, "examples/tiny/tiny_config.yaml", "training:\n  train_iters: 5\n").ok
    result = edit_file(ctx, "examples/tiny/tiny_config.yaml", "train_iters: 5", "train_iters: 20")
    assert result.ok, result.error
    assert "-  train_iters: 5" in result.data["diff"] and "+  train_iters: 20" in result.data["diff"]
    missing = edit_file(ctx, "examples/tiny/tiny_config.yaml", "train_iters: 5", "train_iters: 7")
    assert not missing.ok and "not found" in missing.error


def test_ambiguous_edit_is_refused(ctx: RunContext):
    assert write_file(ctx, GOOD_PY, "a = 1\na = 1\n").ok
    result = edit_file(ctx, GOOD_PY, "a = 1", "a = 2")
    assert not result.ok and "2 times" in result.error
    assert edit_file(ctx, GOOD_PY, "a = 1", "a = 2", replace_all=True).ok


def test_invalid_python_is_refused(ctx: RunContext, target: Path):
    result = write_file(ctx, GOOD_PY, "def broken(:\n")
    assert not result.ok and "parse as Python" in result.error
    assert not (target / GOOD_PY).exists()


@pytest.mark.parametrize("text,why", [
    ("a: [1, 2\n", "load as YAML"),
    ("a: &X 1\nb: &X 2\n", "anchor(s) more than once: X"),  # the moss_tts failure of the real repo
    ("a: !!python/object:os.system x\n", "load as YAML"),
])
def test_invalid_yaml_is_refused(ctx: RunContext, text: str, why: str):
    result = write_file(ctx, "examples/tiny/tiny_config.yaml", text)
    assert not result.ok and why in result.error


def test_additive_registry_edit_accepted(ctx: RunContext, target: Path):
    addition = '\n_register_template(name="tiny", params=2)\n'
    result = edit_file(ctx, TEMPLATE_PY, '_register_template(name="qwen2vl", params=1)\n',
                       '_register_template(name="qwen2vl", params=1)\n' + addition)
    assert result.ok, result.error
    assert '+_register_template(name="tiny", params=2)' in result.data["diff"]


@pytest.mark.parametrize("old,new", [
    ('_register_template(name="qwen2vl", params=1)', '_register_template(name="qwen2vl", params=9)'),
    ('_register_template(name="qwen2vl", params=1)\n', ""),
])
def test_non_additive_registry_edit_refused(ctx: RunContext, target: Path, old: str, new: str):
    result = edit_file(ctx, TEMPLATE_PY, old, new)
    assert not result.ok and "additive" in result.error
    assert (target / TEMPLATE_PY).read_text() == TEMPLATE_TEXT


def test_a_registry_entry_this_run_added_may_be_changed_but_not_the_framework_s(ctx: RunContext, target: Path):
    # a blind LLM-policy run had to roll back a whole phase to fix one line of its own template entry
    entry = '_register_template(name="tiny", params=2)\n'
    assert edit_file(ctx, TEMPLATE_PY, '_register_template(name="qwen2vl", params=1)\n',
                     '_register_template(name="qwen2vl", params=1)\n' + entry).ok
    fixed = edit_file(ctx, TEMPLATE_PY, entry, '_register_template(name="tiny", params=3)\n')
    assert fixed.ok, fixed.error
    refused = edit_file(ctx, TEMPLATE_PY, '_register_template(name="qwen2vl", params=1)\n', "")
    assert not refused.ok and "additive" in refused.error


def test_registry_files_not_editable_without_branch_b(target: Path, tmp_path: Path):
    c = RunContext(run_id="r1", run_dir=tmp_path / "run", source=tmp_path / "s", target=target, model_name="tiny",
                   allow_branch_b=False)
    result = write_file(c, TEMPLATE_PY, TEMPLATE_TEXT + "\nX = 1\n")
    assert not result.ok and "editable" in result.error


def test_additive_violation_rules():
    assert additive_violation("a\n\nb\n", "a\nnew\nb\nmore\n") is None  # blank lines may go, inserts allowed
    assert "line 3" in additive_violation("a\n\nb\n", "a\nB\n")
    assert additive_violation("a\nb\n", "b\na\n") is not None  # reordering is a change


def test_tag_rollback_and_undo(ctx: RunContext, target: Path):
    repo = git.Repo(target)
    assert write_file(ctx, GOOD_PY, "a = 1\n").ok
    tagged = tag_phase(ctx, "model")
    assert tagged.ok and tagged.data["tag"] == "msmigrate/r1/model"
    assert write_file(ctx, "examples/tiny/tiny_config.yaml", "a: 1\n").ok
    assert edit_file(ctx, GOOD_PY, "a = 1", "a = 2").ok

    undone = undo_last(ctx)
    assert undone.ok
    assert (target / GOOD_PY).read_text() == "a = 1\n"

    back = rollback(ctx, "model")
    assert back.ok and len(back.data["commits_undone"]) == 1
    assert not (target / "examples/tiny/tiny_config.yaml").exists()
    assert repo.head.commit.hexsha == tagged.data["commit"]

    assert rollback(ctx, "base").ok
    assert not (target / GOOD_PY).exists()
    assert not undo_last(ctx).ok  # head is the base commit, not an edit of this run


def test_rollback_refuses_unknown_phase_and_foreign_commit(ctx: RunContext, target: Path):
    base_parent = git.Repo(target).head.commit.hexsha
    assert write_file(ctx, GOOD_PY, "a = 1\n").ok
    assert not rollback(ctx, "nonexistent").ok
    assert not rollback(ctx, "deadbeef").ok
    assert rollback(ctx, base_parent).ok  # the run's base itself is allowed


def test_langchain_tools_return_json(ctx: RunContext):
    tools = {t.name: t for t in file_writer_tools(ctx)}
    assert set(tools) == {"write_file", "edit_file", "rollback", "undo_last_edit"}
    out = tools["write_file"].invoke({"path": "../x.py", "content": "x = 1\n"})
    assert '"ok": false' in out and "'..'" in out
    out = tools["write_file"].invoke({"path": GOOD_PY, "content": "x = 1\n", "reason": "t"})
    assert '"ok": true' in out
    for t in tools.values():
        for name, field in t.args_schema.model_fields.items():
            assert field.description, (t.name, name)


def test_overbroad_extra_editable_entries_are_ignored(target: Path, tmp_path: Path):
    c = RunContext(run_id="r1", run_dir=tmp_path / "run", source=tmp_path / "s", target=target, model_name="tiny",
                   extra_editable=[".", "", "/", "../", "examples/../"])
    result = write_file(c, "README.md", "hi\n")
    assert not result.ok and "outside the run's editable" in result.error


def test_gitignored_editable_file_is_still_committed(ctx: RunContext, target: Path):
    result = write_file(ctx, "examples/tiny/notes.log", "kept\n")  # *.log is in the target's .gitignore
    assert result.ok, result.error
    assert "examples/tiny/notes.log" in git.Repo(target).git.show("--name-only", "--format=", "HEAD")
