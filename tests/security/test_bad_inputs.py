"""Malformed inputs: each is one line naming the input (exit 2 where it is a spec mistake), found before anything
touches the target — no work tree, no branch, no tag, no run folder left behind — or at G0 with the record index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attack_kit import make_checkout

from msmigrate.agent.input_checks import data_record_problems, spec_problem
from msmigrate.agent.user_yaml import MAX_USER_YAML_BYTES, load_user_yaml


def target_refs(checkout: Path) -> tuple[str, str, list[str]]:
    """Everything a run could leave in the user's repository: refs, registered work trees, files."""
    refs = subprocess.run(["git", "-C", str(checkout), "for-each-ref"], capture_output=True, text=True).stdout
    trees = subprocess.run(["git", "-C", str(checkout), "worktree", "list", "--porcelain"], capture_output=True,
                           text=True).stdout
    files = sorted(str(p.relative_to(checkout)) for p in checkout.rglob("*") if ".git" not in p.parts)
    return refs, trees, files


@pytest.fixture()
def inputs(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "config.json").write_text("{}")
    checkout = make_checkout(tmp_path / "mm")
    return source, checkout


def cli(tmp_path: Path, spec_text: str, timeout: int = 120):
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "msmigrate.faces.cli", "run", str(spec), "--runs-dir",
                          str(tmp_path / "runs")], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=timeout, stdin=subprocess.DEVNULL)
    return out, time.monotonic() - started


def one_line(out) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr
    return lines[0]


@pytest.mark.parametrize("extra, words", [
    ("policy: rules\npolicy: none\n", ["duplicate key 'policy'", "line 5", "first at line 4"]),
    ("budgets:\n  tokens: 5\n  tokens: 6\n", ["duplicate key 'tokens'", "line 6"]),
    ("policy: replay\n", ["replay_trajectory"]),
    ("policy: replay\nreplay_trajectory: missing.jsonl\n", ["replay_trajectory", "missing.jsonl", "no such file"]),
    ("policy: replay\nreplay_trajectory: empty.jsonl\n", ["records no policy decisions"]),
    ("policy: replay\nreplay_trajectory: broken.jsonl\n", ["line 1 is not JSON"]),
    ("runtime_python: /nonexistent/python\n", ["no such interpreter: /nonexistent/python"]),
    ("runtime_python: /\n", ["runtime_python / is not an executable file"]),
])
def test_a_malformed_spec_is_one_line_and_leaves_nothing(tmp_path, inputs, extra, words):
    source, checkout = inputs
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    before = target_refs(checkout)
    out, _ = cli(tmp_path, f"source: {source}\ntarget: {checkout}\nmodel_name: tiny\n{extra}")
    line = one_line(out)
    assert all(w in line for w in words), line
    assert target_refs(checkout) == before  # no msmigrate/<run> branch, base tag or work tree
    assert not any((tmp_path / "runs").glob("*")) if (tmp_path / "runs").exists() else True


def test_a_huge_spec_is_refused_at_once(tmp_path, inputs):
    source, checkout = inputs
    filler = "# " + "x" * 1000 + "\n"
    text = f"source: {source}\ntarget: {checkout}\nmodel_name: tiny\n" + filler * (MAX_USER_YAML_BYTES // 900)
    out, seconds = cli(tmp_path, text)
    assert "larger than 1,000,000 bytes" in one_line(out) and seconds < 60


def test_duplicate_keys_are_refused_at_any_depth_and_merge_keys_still_work():
    with pytest.raises(ValueError, match="duplicate key 'b' at line 3"):
        load_user_yaml("a:\n  b: 1\n  b: 2\n")
    assert load_user_yaml("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n") == {"base": {"x": 1}, "other": {"x": 1,
                                                                                                       "y": 2}}
    with pytest.raises(ValueError, match="not valid YAML"):
        load_user_yaml("a: [")


def test_a_replay_spec_is_checked_before_the_run_exists(tmp_path, inputs):
    """The same checks through the library (chat, batch and eval open runs this way)."""
    from msmigrate.agent.config import RunSpec, Settings
    from msmigrate.agent.input_checks import InputError
    from msmigrate.agent.runner import Run

    source, checkout = inputs
    before = target_refs(checkout)
    spec = RunSpec(source=source, target=checkout, model_name="tiny", policy="replay")
    with pytest.raises(InputError, match="replay_trajectory"):
        Run(spec, "r1", Settings(runs_dir=tmp_path / "runs"))
    assert target_refs(checkout) == before and not (tmp_path / "runs" / "r1").exists()


def test_an_opening_that_fails_after_the_work_tree_takes_it_back(tmp_path, inputs, monkeypatch):
    """Any failure while a run is being opened (here: building its tools) removes the new work tree, branch, base
    tag and run folder."""
    from msmigrate.agent import runner
    from msmigrate.agent.config import RunSpec, Settings

    source, checkout = inputs
    before = target_refs(checkout)

    def broken_tools(ctx):
        assert (Path(ctx.target) / ".git").exists()  # the work tree existed at this point
        raise RuntimeError("tools could not be built")

    monkeypatch.setattr(runner, "build_tools", broken_tools)
    spec = RunSpec(source=source, target=checkout, model_name="tiny", policy="none")
    with pytest.raises(RuntimeError, match="tools could not be built"):
        runner.Run(spec, "r2", Settings(runs_dir=tmp_path / "runs"))
    assert target_refs(checkout) == before and not (tmp_path / "runs" / "r2").exists()


def test_spec_problem_accepts_a_good_replay_spec(tmp_path, inputs):
    from msmigrate.agent.config import RunSpec

    source, checkout = inputs
    traj = tmp_path / "t.jsonl"
    traj.write_text(json.dumps({"kind": "decision", "phase": "model", "tool_calls": []}) + "\n")
    spec = RunSpec(source=source, target=checkout, model_name="tiny", policy="replay", replay_trajectory=traj)
    assert spec_problem(spec, sys.executable) is None
    assert "no such interpreter" in spec_problem(spec, "no-such-python-here")


# ------------------------------------------------------------------------------------------------ G0: data

def conv(text: str = "<image>hi") -> list[dict]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "yo"}]


@pytest.mark.parametrize("records, words", [
    ([{"messages": conv(), "images": ["img.png"]}, {"foo": 1}], ["record 1 has no text", "1 of 2"]),
    ([{"messages": conv()}, {"image": "img.png"}], ["record 1 has no text"]),
    ([{"question": "q", "answer": "a", "image": "gone.png"}], ["record 0 image path 'gone.png' does not resolve"]),
    ([{"messages": conv()}, 7], ["record 1 is a int"]),
    ([{"messages": "hello"}], ["record 0 messages is not a non-empty list"]),
    ([{"messages": [{"role": "user"}]}], ["record 0 messages[0] has no content"]),
    ([{"messages": [{"role": 3, "content": "x"}]}], ["messages[0].role is not a string"]),
    ([{"messages": conv(), "images": ["img.png"]}, {"messages": conv(), "images": ["gone.png"]}],
     ["record 1 images path 'gone.png' does not resolve"]),
    ([{"conversations": [{"from": "human", "value": "x"}], "image": "nope/x.jpg"}], ["record 0 image path"]),
    ([{"messages": conv(), "images": "img.png"}, {"messages": conv(), "images": [1]}],
     ["record 1 images is not a list of paths"]),
])
def test_g0_names_the_record_that_is_not_a_sample(tmp_path, records, words):
    (tmp_path / "img.png").write_bytes(b"png")
    data = tmp_path / "train.json"
    data.write_text(json.dumps(records))
    problems = data_record_problems(data)
    assert len(problems) == 1 and all(w in problems[0] for w in words), problems


def test_g0_accepts_real_samples_and_counts_many_bad_records(tmp_path):
    (tmp_path / "img.png").write_bytes(b"png")
    good = {"messages": conv(), "images": ["img.png", str(tmp_path / "img.png")]}
    data = tmp_path / "train.jsonl"
    vqa = {"id": "v0", "image": "img.png", "question": "what?", "answer": "a square"}  # the source's own format
    data.write_text("\n".join(json.dumps(r) for r in [good, {"dialog": [{"speaker": "a", "text": "b"}]}, vqa]))
    assert data_record_problems(data) == []  # a conversation under a key of the user's own (attr maps it)
    data.write_text(json.dumps([good] + [{"x": i} for i in range(12)]))  # no text at all
    (problem,) = data_record_problems(data)
    assert "12 of 13 records" in problem and "record 1 " in problem and "(+7 more records)" in problem


def test_g0_fails_on_bad_records_and_on_a_runtime_that_is_not_python(tmp_path, inputs):
    from types import SimpleNamespace

    from msmigrate.agent.nodes.prepare import precheck
    from msmigrate.core.run_context import RunContext
    from msmigrate.tools.worktree import attach

    source, checkout = inputs
    data = tmp_path / "train.json"
    data.write_text(json.dumps([{"messages": conv(), "images": ["missing.png"]}]))
    ctx = RunContext(run_id="g0", run_dir=tmp_path / "run", source=source, target=checkout, model_name="tiny",
                     data_path=data, runtime_python="/bin/echo")
    attach(ctx)
    problems, _ = precheck(SimpleNamespace(ctx=ctx, spec=None, worktree_error=None))
    assert any("record 0 images path 'missing.png' does not resolve" in p for p in problems), problems
    assert any("runtime_python /bin/echo is not a Python 3 interpreter" in p for p in problems), problems
