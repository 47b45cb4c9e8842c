"""trajectory.jsonl: append-only records, secrets masked wherever they appear."""

from __future__ import annotations

import json

from msmigrate.agent.trajectory import Trajectory, mask

KEY = "sk-proj-AbCdEf0123456789xyz"


def test_mask_secret_keys_and_secret_looking_values():
    rec = {
        "api_key": KEY, "OPENAI_API_KEY": "anything", "llm": {"Api-Key": "k", "base_url": "http://h/v1"},
        "headers": {"Authorization": "Bearer abc.def-123456789"},
        "text": f"calling with {KEY} and header Bearer eyJhbGciOi.J9abc and more",
        "list": [f"key={KEY}", {"password": "hunter22"}],
        "tokens": 1234, "empty_secret": "", "n": 3, "ok": True, "token": "t0k", "HF_TOKEN": "hf_x",
        "access_token": "a", "eos_token": "<|im_end|>", "media_tokens": {"<|image_pad|>": 5},
    }
    out = mask(rec)
    assert out["api_key"] == "***" and out["OPENAI_API_KEY"] == "***" and out["llm"]["Api-Key"] == "***"
    assert out["llm"]["base_url"] == "http://h/v1"
    assert out["headers"]["Authorization"] == "***"
    assert out["text"] == "calling with *** and header *** and more"
    assert out["list"] == ["key=***", {"password": "***"}]
    assert out["empty_secret"] == "" and out["n"] == 3 and out["ok"] is True
    assert out["token"] == out["HF_TOKEN"] == out["access_token"] == "***"
    # token counts and tokenizer facts are data, not credentials
    assert out["tokens"] == 1234 and out["eos_token"] == "<|im_end|>" and out["media_tokens"] == {"<|image_pad|>": 5}
    assert KEY not in json.dumps(out)


def test_mask_leaves_ordinary_text_alone():
    for text in ("sk-short", "the task-sk-level", "Bearer", "bearer of news", "skeleton-key-words"):
        assert mask(text) == text


def test_trajectory_appends_masked_records_and_reads_them_back(tmp_path):
    traj = Trajectory(tmp_path / "deep" / "trajectory.jsonl")
    assert traj.records() == []
    traj.append("decision", phase="model", content=f"use {KEY}", tool_calls=[{"name": "x", "args": {"token": "t"}}],
                tokens=42)
    traj.append("tool", name="x", result="ok", path=tmp_path)  # non-JSON values are stringified
    raw = (tmp_path / "deep" / "trajectory.jsonl").read_text()
    assert KEY not in raw and raw.count("\n") == 2
    first, second = traj.records()
    assert first["kind"] == "decision" and first["content"] == "use ***" and "t" in first and first["tokens"] == 42
    assert first["tool_calls"][0]["args"]["token"] == "***"
    assert second["path"] == str(tmp_path)
    assert [r["kind"] for r in traj.records("tool")] == ["tool"]


def test_a_run_never_writes_the_api_key(fast_prepare, tmp_path, monkeypatch):
    from agent_fakes import ScriptedPolicy, echo, make_run

    policy = ScriptedPolicy({"model": [[echo(f"my key is {KEY}")]]})
    run = make_run(fast_prepare, tmp_path, policy, instructions=f"use Bearer {KEY}")
    out = run.drive()
    run.close()
    assert out["exit_status"] == "success"
    for f in run.run_dir.iterdir():
        if f.suffix in (".jsonl", ".md", ".json", ".txt"):
            assert KEY not in f.read_text(errors="replace"), f.name
