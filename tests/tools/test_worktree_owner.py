"""A run reopens only the branch it created: another run with the same id (a second batch on the same target, a
run folder elsewhere) is refused instead of adopting the first run's commits."""

from __future__ import annotations

import pytest

from msmigrate.tools.worktree import WorktreeError, open_worktree, release_worktree


def test_a_new_run_never_adopts_a_branch_it_did_not_create(tmp_path, standin):
    first = open_worktree(standin, "same-id", tmp_path / "runs1" / "same-id")
    assert first.created
    assert release_worktree(standin, first.path)  # the run ended: its branch stays
    with pytest.raises(WorktreeError, match="not created by this run"):
        open_worktree(standin, "same-id", tmp_path / "runs2" / "same-id")
    resumed = open_worktree(standin, "same-id", tmp_path / "runs1" / "same-id")  # the resume, by its own folder
    assert not resumed.created and resumed.base_commit == first.base_commit and resumed.branch == "msmigrate/same-id"
