"""run_settings: which of the run's files the classify prompt shows, and how long files are cut."""

from __future__ import annotations

from msmigrate.agent.run_settings import MAX_FILE_CHARS, MAX_TOTAL_CHARS, run_settings


def test_yaml_and_shell_files_sorted_by_path_others_left_out(tmp_path):
    folder = tmp_path / "examples" / "demo"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.sh").write_text("torchrun x\n")
    (folder / "a.yaml").write_text("k: 1\n")
    (folder / "sub" / "c.yml").write_text("j: 2\n")
    (folder / "data.json").write_text("[]")
    (folder / "notes.md").write_text("n")
    got = run_settings(tmp_path, "demo")
    assert [f["path"] for f in got] == ["examples/demo/a.yaml", "examples/demo/b.sh", "examples/demo/sub/c.yml"]
    assert got[0]["text"] == "k: 1\n"


def test_no_folder_yet_is_no_settings(tmp_path):
    assert run_settings(tmp_path, "demo") == []


def test_long_files_are_cut_and_the_section_has_a_total_limit(tmp_path):
    folder = tmp_path / "examples" / "demo"
    folder.mkdir(parents=True)
    for name in ("a", "b", "c", "d"):
        (folder / f"{name}.yaml").write_text(name * (MAX_FILE_CHARS + 10))
    got = run_settings(tmp_path, "demo")
    assert got[0]["text"].startswith("a" * MAX_FILE_CHARS) and "(10 more characters not shown)" in got[0]["text"]
    shown = sum(len(f["text"].split("\n...")[0]) for f in got if not f["text"].startswith("(not shown"))
    assert shown == MAX_TOTAL_CHARS
    assert got[-1] == {"path": "examples/demo/d.yaml", "text": "(not shown: the section's limit is reached)"}
