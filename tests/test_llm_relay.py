"""The file relay (scripts/llm_relay.py) end to end, offline: the relay process runs a child that talks to it over
real HTTP with LangChain's ChatOpenAI (as the LLM policy does), while this test plays the player through the relay
dir: READY, req-NNNN.json/.md, a malformed answer refused with err-NNNN.txt, the corrected answer relayed back as a
chat.completion with tool-call ids and usage, and DONE with the child's exit status and counts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import json, os
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

@tool
def read_file(path: str) -> str:
    """Read a file of the source."""
    return "x"

llm = ChatOpenAI(base_url=os.environ["MSMIGRATE_LLM_BASE_URL"], model="relay", api_key="sk-test", max_retries=0,
                 timeout=60).bind_tools([read_file])
first = llm.invoke([HumanMessage("read config.json")])
call = first.tool_calls[0]
second = llm.invoke([HumanMessage("read config.json"), first,
                     ToolMessage(content="{\"ok\": true}", tool_call_id=call["id"])])
print(json.dumps({"call": call, "usage": first.usage_metadata, "second": second.content}))
raise SystemExit(3)
'''


def wait_for(path: Path, timeout: float = 60.0) -> Path:
    deadline = time.time() + timeout
    while not path.exists():
        assert time.time() < deadline, f"{path.name} did not appear"
        time.sleep(0.1)
    return path


def answer(folder: Path, n: int, payload: object) -> None:
    tmp = folder / f"resp-{n:04d}.json.tmp"
    tmp.write_text(payload if isinstance(payload, str) else json.dumps(payload), encoding="utf-8")
    tmp.rename(folder / f"resp-{n:04d}.json")


def test_relay_round_trip_through_files(tmp_path):
    relay_dir = tmp_path / "relay"
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "llm_relay.py"), "--dir", str(relay_dir),
                             "--poll", "0.05", "--label", "unit test", "--", sys.executable, "-c", CHILD],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(relay_dir / "READY").read_text().startswith("unit test")
        body = json.loads(wait_for(relay_dir / "req-0001.json").read_text())
        assert body["messages"][0]["content"] == "read config.json"
        md = wait_for(relay_dir / "req-0001.md").read_text()
        assert "### read_file" in md and '"path"' in md and "## [1] user" in md

        answer(relay_dir, 1, {"tool_calls": [{"name": "write_file", "arguments": {"path": "a"}}]})  # not offered
        err = wait_for(relay_dir / "err-0001.txt").read_text()
        assert "'write_file' is not an offered tool" in err
        assert (relay_dir / "resp-0001.rejected-1.json").is_file()
        answer(relay_dir, 1, {"content": "reading", "tool_calls": [{"name": "read_file",
                                                                    "arguments": {"path": "config.json"}}]})

        md2 = wait_for(relay_dir / "req-0002.md").read_text()
        assert "Tools (unchanged since the previous request): read_file" in md2 and "### read_file" not in md2
        assert "-> tool call call_0001_0: read_file" in md2 and "(answer to call_0001_0)" in md2
        answer(relay_dir, 2, "{not json")
        assert "not valid JSON" in wait_for(relay_dir / "err-0002.txt").read_text()
        answer(relay_dir, 2, {"content": "done", "tool_calls": []})
        out, errs = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, errs  # the child's exit status is the relay's
    child = json.loads(out.strip().splitlines()[-1])
    assert child["call"]["name"] == "read_file" and child["call"]["args"] == {"path": "config.json"}
    assert child["call"]["id"] == "call_0001_0" and child["second"] == "done"
    assert child["usage"]["input_tokens"] > 0
    done = json.loads((relay_dir / "DONE").read_text())
    assert done["exit_status"] == 3 and done["requests"] == 2 and done["prompt_chars"] > 0
    assert abs(done["prompt_tokens"] - done["prompt_chars"] / 4) <= 2  # 4 characters a token, per request


def test_relay_refuses_a_used_dir(tmp_path):
    (tmp_path / "req-0001.json").write_text("{}")
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "llm_relay.py"), "--dir", str(tmp_path), "--",
                          sys.executable, "-c", "pass"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "not empty" in res.stderr
