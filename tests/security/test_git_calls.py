"""Every git call goes through ``msmigrate/core/git.py``: no hook, fsmonitor, external diff, textconv driver or pager
the target configures runs, and nothing git starts sees the agent's secrets.

- A scan of the source (AST) fails when any module runs git another way (``subprocess`` with a ``"git"`` argv,
  a ``"git …"`` shell string, GitPython).
- A canary target: hooks in ``.git/hooks`` and in a configured ``core.hooksPath`` (as git-lfs, husky and the
  pre-commit framework install them), a ``core.fsmonitor`` script, an external diff and a textconv driver, each
  writing the environment it receives to a file; a clean filter that passes content through and records its
  environment (filters do run — they decide what is committed — but must get the scrubbed environment). With canary
  secrets in the agent's environment, the real code paths run: worktree attach/release, file_writer commit, edit,
  tag, rollback and undo, G0's dirty check, the report's and chat's diff, the launcher's target state, the
  validator's schema cache key, the repo reader's file list, changed_since/target_commit, the eval scorer's git.
"""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from attack_kit import GIT_ENV, canaries, make_checkout

import msmigrate
from msmigrate.core.run_context import RunContext

REPO = Path(msmigrate.__file__).resolve().parent.parent
HELPER = REPO / "msmigrate" / "core" / "git.py"
SCANNED = [REPO / "msmigrate", REPO / "scripts", REPO / "benchmarks"]


def _python_files() -> list[Path]:
    return sorted(p for root in SCANNED if root.is_dir() for p in root.rglob("*.py")
                  if ".venv" not in p.parts and "__pycache__" not in p.parts)


def _is_git_word(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and \
        node.value.strip().split(" ", 1)[0] in ("git", "/usr/bin/git")


def git_calls_elsewhere(path: Path) -> list[str]:
    """Places in ``path`` that run git without the helper: an argv list/tuple starting with "git", a shell string
    "git …" handed to a call, GitPython imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts and _is_git_word(node.elts[0]):
            found.append(f"{path}:{node.lineno}: argv starting with 'git'")
        elif isinstance(node, ast.Call) and node.args and _is_git_word(node.args[0]) and \
                " " in node.args[0].value.strip():
            found.append(f"{path}:{node.lineno}: shell string 'git …'")
        elif isinstance(node, ast.Import) and any(a.name == "git" or a.name.startswith("git.") for a in node.names):
            found.append(f"{path}:{node.lineno}: import of GitPython")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "git":
            found.append(f"{path}:{node.lineno}: import from GitPython")
    return found


def test_no_module_runs_git_but_the_helper():
    files = _python_files()
    assert len(files) > 100 and HELPER in files
    offenders = [hit for p in files if p != HELPER for hit in git_calls_elsewhere(p)]
    assert not offenders, "git must go through msmigrate/core/git.py:\n" + "\n".join(offenders)


def test_the_scan_sees_each_way_of_calling_git(tmp_path):
    """The scan itself can fail: each forbidden shape in a scratch module is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("import subprocess, os\nimport git\nfrom git import Repo\n"
                   "subprocess.run(['git', 'status'])\nsubprocess.Popen(('git', '-C', 'x', 'log'))\n"
                   "os.system('git commit -am x')\nsubprocess.run(['/usr/bin/git', 'add'])\n")
    assert len(git_calls_elsewhere(bad)) == 6


# ------------------------------------------------------------------------------------------------- the canary

HOOKS = ("pre-commit", "commit-msg", "post-commit", "post-checkout", "post-merge", "post-rewrite",
         "reference-transaction", "post-index-change", "pre-auto-gc", "prepare-commit-msg")


def _recorder(path: Path, kind: str, out_dir: Path, tail: str = "") -> None:
    """A script that writes the environment it received to ``out_dir/<kind>.<pid>``."""
    path.write_text(f"#!/bin/sh\nenv > '{out_dir}/{kind}.'$$\n{tail}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def make_canary_target(root: Path, out_dir: Path) -> Path:
    """A checkout whose git configuration would run a recorder on every occasion git offers."""
    checkout = make_checkout(root)
    hooks_dir, tools = root.parent / "custom-hooks", root.parent / "canary-tools"
    hooks_dir.mkdir()
    tools.mkdir()
    for name in HOOKS:
        _recorder(checkout / ".git" / "hooks" / name, f"hook-{name}", out_dir)
        _recorder(hooks_dir / name, f"hookspath-{name}", out_dir)
    _recorder(tools / "fsmonitor", "fsmonitor", out_dir)
    _recorder(tools / "extdiff", "extdiff", out_dir)
    _recorder(tools / "textconv", "textconv", out_dir, 'cat "$1"\n')
    _recorder(tools / "clean", "filter", out_dir, "cat\n")
    _recorder(tools / "pager", "pager", out_dir, "cat\n")
    for key, value in (("core.hooksPath", str(hooks_dir)), ("core.fsmonitor", str(tools / "fsmonitor")),
                       ("diff.external", str(tools / "extdiff")), ("diff.canary.textconv", str(tools / "textconv")),
                       ("filter.canary.clean", str(tools / "clean")), ("core.pager", str(tools / "pager")),
                       ("pager.diff", str(tools / "pager")), ("pager.log", str(tools / "pager"))):
        subprocess.run(["git", "-C", str(checkout), "config", key, value], check=True)
    (checkout / ".gitattributes").write_text("*.py diff=canary filter=canary\n*.yaml diff=canary\n")
    subprocess.run(["git", "-C", str(checkout), "add", ".gitattributes"], check=True,
                   env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), **GIT_ENV,
                        "GIT_CONFIG_PARAMETERS": "'core.hooksPath'='/dev/null' 'core.fsmonitor'='false'"})
    subprocess.run(["git", "-C", str(checkout), "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
                    "commit", "-qm", "attributes"], check=True, env={**os.environ, **GIT_ENV})
    for f in out_dir.iterdir():  # what setting up the target itself triggered (the filter on add) is not counted
        f.unlink()
    return checkout


def _records(out_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text(errors="replace") for p in sorted(out_dir.iterdir())}


def test_the_canary_target_fires_for_plain_git(tmp_path):
    """Control: the same target with git called the ordinary way runs hooks, fsmonitor and drivers, and they see
    the secrets — so the test below can fail."""
    out = tmp_path / "seen"
    out.mkdir()
    checkout = make_canary_target(tmp_path / "mm", out)
    values = canaries()
    env = {**os.environ, **GIT_ENV, **values}
    (checkout / "README.md").write_text("changed\n")
    (checkout / "mindspeed_mm" / "fsdp" / "train" / "trainer.py").write_text("print('x')\n")
    subprocess.run(["git", "-C", str(checkout), "commit", "-qam", "plain"], env=env, check=True,
                   capture_output=True)
    subprocess.run(["git", "-C", str(checkout), "diff", "HEAD~1"], env=env, check=True, capture_output=True)
    seen = _records(out)
    kinds = {name.split(".")[0] for name in seen}
    assert {"hookspath-post-commit", "hookspath-reference-transaction", "fsmonitor", "extdiff",
            "filter"} <= kinds, kinds
    assert all(values["OPENAI_API_KEY"] in text for text in seen.values())


def test_no_hook_or_fsmonitor_runs_and_no_secret_leaks_on_any_git_path(tmp_path, monkeypatch):
    from msmigrate.agent.nodes.prepare import precheck
    from msmigrate.agent.report import diff_summary
    from msmigrate.faces.chat.commands import diff_text
    from msmigrate.faces.eval.scorers import _git as scorer_git
    from msmigrate.tools import file_writer
    from msmigrate.tools.launcher.run import target_state
    from msmigrate.tools.repo_reader.files import list_files
    from msmigrate.tools.worktree import attach, checkout_state, commit_uncommitted, release_worktree
    from msmigrate.tools.yaml_validator.schema import schema_from_target

    out = tmp_path / "seen"
    out.mkdir()
    checkout = make_canary_target(tmp_path / "mm", out)
    values = canaries()
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='/tmp/elsewhere'")  # the agent's own git settings
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "not-a-repo"))  # must not redirect msmigrate's git
    source = tmp_path / "src"
    source.mkdir()
    (source / "config.json").write_text("{}")
    ctx = RunContext(run_id="canary", run_dir=tmp_path / "run", source=source, target=checkout, model_name="tiny")
    attach(ctx)  # worktree add: post-checkout, reference-transaction
    plugin = "mindspeed_mm/fsdp/models/tiny/modeling_tiny.py"
    assert file_writer.write_file(ctx, plugin, "x = 1\n", reason="first").ok
    file_writer.tag_phase(ctx, "model")
    assert file_writer.edit_file(ctx, plugin, "x = 1", "x = 2", reason="second").ok
    yaml_rel = "examples/tiny/tiny_config.yaml"
    assert file_writer.write_file(ctx, yaml_rel, "a: 1\n").ok
    assert file_writer.undo_last(ctx).ok
    assert file_writer.rollback(ctx, "model").ok
    assert file_writer.write_file(ctx, plugin, "x = 3\n").ok
    base = file_writer.target_commit(ctx)
    assert base and file_writer.changed_since(ctx, base, ["mindspeed_mm"]) == []
    deps = SimpleNamespace(ctx=ctx, spec=None, worktree_error=None)
    problems, facts = precheck(deps)  # G0: HEAD and the user's checkout's dirty state
    assert facts.get("target_dirty") is False, problems
    assert "modeling_tiny.py" in diff_summary(ctx.target, f"{ctx.work_branch}/base", ctx.work_branch)
    assert "x = 3" in diff_text(SimpleNamespace(ctx=ctx))
    assert target_state(ctx.target) == file_writer.target_commit(ctx)
    cache = tmp_path / "schema-cache"
    cache.mkdir()
    (cache / f"config_schema_{base}.json").write_text(json.dumps({"kind": "model", "fields": {}}))
    assert schema_from_target(ctx.target, "/nonexistent/python", cache_dir=cache).data["cached"] is True
    assert plugin in list_files(ctx.target)
    assert scorer_git(ctx.target, "rev-parse", "HEAD").stdout.strip() == base
    # a dead writer's file on disk, committed when the gates settle the work tree (resume after kill -9)
    (ctx.target / "mindspeed_mm/fsdp/models/tiny/extra.py").write_text("y = 1\n")
    settled, kept, _ = commit_uncommitted(ctx.target, "settle", file_writer.AUTHOR, ["mindspeed_mm/fsdp/models/tiny"])
    assert settled and kept == ["mindspeed_mm/fsdp/models/tiny/extra.py"]
    assert checkout_state(checkout)["head"]
    assert release_worktree(checkout, ctx.target) is None and not ctx.target.exists()

    seen = _records(out)
    ran = sorted({name.split(".")[0] for name in seen})
    assert ran in ([], ["filter"]), f"ran from the target's config: {ran}"
    leaks = [f"{name}: {k}" for name, text in seen.items() for k, v in values.items() if v in text]
    assert not leaks, leaks
    if seen:  # the content filter did run (it decides the committed blob) with the scrubbed environment only
        assert all("not-a-repo" not in text and "/tmp/elsewhere" not in text for text in seen.values())


def test_the_helper_environment_is_an_allow_list(monkeypatch):
    from msmigrate.core.git import git_argv, git_env

    values = canaries()
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("GIT_INDEX_FILE", "/tmp/elsewhere")
    env = git_env()
    assert not set(values) & set(env) and "GIT_INDEX_FILE" not in env
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_CONFIG_NOSYSTEM"] == "1" and env["PATH"]
    argv = git_argv("/x", "diff", "--stat")
    assert argv[:2] == ["git", "--no-pager"] and argv[-4:] == ["diff", "--no-ext-diff", "--no-textconv", "--stat"]
    for setting in ("core.hooksPath=/dev/null", "core.fsmonitor=false", "credential.helper=", "protocol.allow=never"):
        assert setting in argv
