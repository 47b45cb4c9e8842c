"""finish_phase (the hand-off tool) and vendor_remote_code (copies remote code into the plugin dir and reports it),
plus the hand-off record's file list read from a phase conversation."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest
from langchain_core.messages import AIMessage, ToolMessage

from msmigrate.agent.handoff import files_written, new_ids
from msmigrate.core.run_context import RunContext
from msmigrate.tools.phase_tools import finish_phase, vendor_remote_code, vendored_text
from msmigrate.tools.worktree import attach


@pytest.fixture()
def ctx(tmp_path: Path) -> RunContext:
    target = tmp_path / "mm"
    (target / "mindspeed_mm/fsdp/models").mkdir(parents=True)
    (target / "mindspeed_mm/fsdp/models/modelhub.py").write_text("x = 1\n")
    repo = git.Repo.init(target, initial_branch="main")
    with repo.git.custom_environment(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                                     GIT_COMMITTER_EMAIL="t@t"):
        repo.git.add("-A")
        repo.git.commit("-m", "base")
    source = tmp_path / "src"
    source.mkdir()
    (source / "configuration_foo.py").write_text("class FooConfig:\n    pass\n")
    (source / "modeling_foo.py").write_text("from .configuration_foo import FooConfig\n\n\nclass Foo:\n    pass\n")
    (source / "config.json").write_text("{}")
    c = RunContext(run_id="r1", run_dir=tmp_path / "run", source=source, target=target, model_name="foo")
    attach(c)  # the run's own work tree of the checkout, where edits land
    return c


def test_vendor_copies_rewrites_relative_imports_and_reports(ctx: RunContext):
    res = vendor_remote_code(ctx, "mindspeed_mm/fsdp/models/foo")
    assert res.ok, res.error
    copied = {c["from"]: c for c in res.data["copied"]}
    assert set(copied) == {"configuration_foo.py", "modeling_foo.py"}  # .py files only, not config.json
    assert copied["modeling_foo.py"]["imports_rewritten"] == 1 and copied["configuration_foo.py"]["imports_rewritten"] == 0
    text = (ctx.target / "mindspeed_mm/fsdp/models/foo/upstream/modeling_foo.py").read_text()
    assert text.startswith("from mindspeed_mm.fsdp.models.foo.upstream.configuration_foo import FooConfig")
    assert (ctx.target / "mindspeed_mm/fsdp/models/foo/upstream/__init__.py").is_file()
    assert not git.Repo(ctx.target).is_dirty(untracked_files=True)  # committed through the file writer


def test_vendor_refuses_paths_outside_the_source_and_outside_editable_paths(ctx: RunContext):
    assert not vendor_remote_code(ctx, "mindspeed_mm/fsdp/models/foo", ["../../etc/passwd"]).ok
    res = vendor_remote_code(ctx, "mindspeed_mm/fsdp/train", ["modeling_foo.py"])  # framework core: refused
    assert not res.ok and "refused" in res.error


def test_vendored_text_keeps_absolute_imports():
    text, n = vendored_text("import torch\nfrom transformers import X\n    from .a import b\n", "p.upstream")
    assert n == 1 and "    from p.upstream.a import b" in text and "from transformers import X" in text


def test_finish_phase_and_handoff_files_from_the_conversation():
    done = finish_phase("built", ["model_id foo"], ["route T -> C"])
    assert done.ok and done.data["decisions_changed"] == ["route T -> C"]
    calls = [{"name": "write_file", "args": {"path": "a.py"}, "id": "1", "type": "tool_call"},
             {"name": "write_file", "args": {"path": "b.py"}, "id": "2", "type": "tool_call"},
             {"name": "vendor_remote_code", "args": {}, "id": "3", "type": "tool_call"}]
    msgs = [AIMessage(content="", tool_calls=calls),
            ToolMessage(json.dumps({"ok": True, "data": {"path": "a.py"}}), tool_call_id="1"),
            ToolMessage(json.dumps({"ok": False, "data": {"path": "b.py"}, "error": "refused"}), tool_call_id="2"),
            ToolMessage(json.dumps({"ok": True, "data": {"copied": [{"to": "up/m.py"}]}}), tool_call_id="3")]
    assert files_written(msgs) == ["a.py", "up/m.py"]  # the refused write is not a delivered file
    assert new_ids({"ids": {"model": ["x"]}}, {"ids": {"model": ["x", "foo"], "template": []}}) == {"model": ["foo"]}


def test_plan_revised_when_the_data_phase_delivered_another_branch():
    from msmigrate.agent.handoff import plan_revision

    plan = {"data_branch": "B", "dataset_type": "huggingface", "reasons": ["r"]}
    record = {"phase": "data", "files_written": ["mindspeed_mm/fsdp/data/datasets/foo/foo_dataset.py",
                                                  "examples/foo/foo_config.yaml"],
              "decisions_changed": ["AutoProcessor returns a bare tokenizer: a dataset plugin instead of B"]}
    revised = plan_revision(plan, record, "foo")
    assert revised["data_branch"] == "C" and revised["dataset_type"] == "foo" and revised["reasons"] == ["r"]
    assert [r["field"] for r in revised["revisions"]] == ["data_branch", "decision"]
    assert revised["revisions"][0]["from"] == "B" and "foo_dataset.py" in revised["revisions"][0]["why"]
    # delivered as planned (registry entries for B), nothing reported changed: no revision
    same = {"phase": "data", "files_written": ["mindspeed_mm/fsdp/data/data_utils/func_utils/template.py"],
            "decisions_changed": []}
    assert plan_revision(plan, same, "foo") is None
    # only a YAML written in this (maybe repeated) attempt: earlier attempts may hold the entries; kept as planned
    assert plan_revision(plan, {**same, "files_written": ["examples/foo/foo_config.yaml"]}, "foo") is None


def test_custom_code_plan_reads_the_checkpoint_facts(tmp_path):
    from msmigrate.agent.nodes.plan import custom_code_facts, signature_params

    (tmp_path / "config.json").write_text(json.dumps({
        "template": "internvl2_5", "auto_map": {"AutoConfig": "c.C", "AutoModel": "m.M"}}))
    src = {"forward": {"signature": "forward(self, pixel_values, input_ids, labels=None, **kwargs)"}, "tokens": {}}
    facts, path, why = custom_code_facts(tmp_path, src)
    assert facts["config_templates"] == {"template": "internvl2_5"} and "internvl2_5" in why
    assert facts["forward_parameters"] == ["input_ids", "labels", "pixel_values"]
    assert path == "transformers" and facts["declared_processor"] is None and "bare tokenizer" in facts["processor_note"]
    (tmp_path / "config.json").write_text(json.dumps({"auto_map": {"AutoConfig": "c.C"}}))
    assert custom_code_facts(tmp_path, src)[1] == "custom"
    assert signature_params("forward(self, x") is None
