"""End to end through the LLM policy: LangChain's ChatOpenAI talks HTTP to a scripted OpenAI-compatible server on
127.0.0.1, whose tool calls migrate the custom-code fixture ``patchlm`` into a fresh stand-in through the same graph
and gates as every run (G0–G6, the last a 2-rank torchrun). Also exercised: transport retry on 503, the
format-error observation for a malformed tool call, and token counting from the endpoint's usage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai_server import ScriptedChatServer  # noqa: E402
from patchlm_script import build_script  # noqa: E402

from msmigrate.agent.config import LaunchSettings, LLMSettings, RunSpec, Settings  # noqa: E402
from msmigrate.agent.runner import Run  # noqa: E402

ALL_GATES = ("G0", "G1", "G2", "G3", "G4", "G5", "G6")


PLUGIN = "mindspeed_mm/fsdp/models/patchlm"


def first_user(request: dict) -> str:
    return next((str(m["content"]) for m in request["messages"] if m["role"] == "user"), "")


def tool_names(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


@pytest.mark.integration
def test_llm_policy_migrates_custom_code_fixture_over_http(tmp_path):
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    source = build_source("patchlm", tmp_path / "sources" / "patchlm")
    target = write_standin(tmp_path / "target")
    script = build_script(source, target, source / "data" / "train.json")

    with ScriptedChatServer(script, fail_first=2) as server:
        spec = RunSpec(source=source, target=target, model_name="patchlm", policy="llm",
                       llm=LLMSettings(base_url=server.base_url, model="scripted", timeout_s=30),
                       launch=LaunchSettings(gate_train_iters=5))
        run = Run(spec, "patchlm-http", Settings(runs_dir=tmp_path / "runs", llm_api_key="sk-test"))
        try:
            final = run.drive()
        finally:
            run.close()

    run_dir = tmp_path / "runs" / "patchlm-http"
    assert final["exit_status"] == "success", (final.get("exit_detail"), (run_dir / "error.txt").read_text()
                                               if (run_dir / "error.txt").is_file() else "")
    assert final["plan"]["route"] == "custom" and final["plan"]["data_branch"] == "B"

    # every gate passed on evidence it collected itself, and the evidence file says so
    evidence = json.loads((run_dir / "evidence.json").read_text())
    assert evidence["exit_status"] == "success"
    for gate in ALL_GATES:
        assert evidence["gates"][gate]["passed"], (gate, evidence["gates"][gate].get("summary"))
        assert evidence["gates"][gate]["evidence"], gate
        assert all(item["exit_code"] == 0 for item in evidence["gates"][gate]["evidence"]), gate
    assert final["gates"]["G6"]["evidence"][0]["exit_code"] == 0
    # data parity on a tokenizer-only source: its ids hold one <|image|> per image, the target's pipeline writes
    # the patch run there (16 = (28/7)^2), compared as that one placeholder; the run length is the model's check
    data = evidence["gates"]["G2"]["parity"]["data"]
    assert data["status"] == "pass" and data["media_expanded_by"].startswith("not the source processor")
    assert all(s["media_runs"] and set(s["media_runs"]) == {16} for s in data["per_sample"])
    assert final["gates"]["G6"]["evidence"][0]["metrics"]["steps"] >= 5

    # the migration really is on the run's work branch of the target: plugin + additive registry edits + example
    def on_branch(rel: str) -> str:
        return subprocess.run(["git", "-C", str(target), "show", f"msmigrate/patchlm-http:{rel}"], check=True,
                              capture_output=True, text=True).stdout

    assert "class PatchLMForCausalLM" in on_branch(f"{PLUGIN}/upstream/modeling_patchlm.py")
    assert '"patchlm": PatchLMPlugin,' in on_branch("mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py")
    assert 'name="patchlm"' in on_branch("mindspeed_mm/fsdp/data/data_utils/func_utils/template.py")
    assert "examples/patchlm/patchlm_config.yaml" in on_branch("examples/patchlm/finetune_patchlm.sh")
    assert not (target / "examples/patchlm").exists()  # the user's checkout itself is untouched

    # transport: two 503s, then retried; every later request was well-formed (no 400 for a bad message sequence)
    assert server.statuses[:2] == [503, 503]
    assert set(server.statuses[2:]) == {200}

    # the endpoint was offered the graph's tools (each phase those its work can use) and got their results back
    offered = set().union(*(tool_names(r) for r in server.requests))
    assert {"write_file", "edit_file", "read_file", "inspect_model", "check_forward", "check_data",
            "check_config", "finish_phase", "vendor_remote_code"} <= offered
    assert "vendor_remote_code" in tool_names(server.requests[0])  # the model phase
    assert "vendor_remote_code" not in tool_names(server.requests[-1])  # the config phase
    tool_results = [m for r in server.requests for m in r["messages"] if m["role"] == "tool"]
    assert any('"ok": true' in m["content"] for m in tool_results)
    assert any("class PatchLMForCausalLM" in m["content"] for m in tool_results)  # read_file of the remote code

    # the malformed call was answered with the format-error observation, then the turn was retried
    assert server.malformed_sent == [("model", 1, 1)]
    follow_ups = [r for r in server.requests
                  if any(m["role"] == "user" and "could not be executed" in str(m["content"]) for m in r["messages"])]
    assert follow_ups and "write_file" in str(follow_ups[0]["messages"][-1]["content"])
    assert final["counters"]["format_errors"] == 1

    # tokens come from the endpoint's usage
    assert final["counters"]["tokens"] > 1000 and evidence["counters"]["tokens"] == final["counters"]["tokens"]
    assert final["counters"]["launches"] >= 3  # G4, G5 (save, load, repeat — reused runs not counted), G6
    records = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    assert all(r["policy"] == "llm" for r in records if r["kind"] == "decision")
    # a correct script: every tool call succeeded (the checks it ran before each gate were green too)
    tools = [r for r in records if r["kind"] == "tool"]
    assert {r["name"] for r in tools} >= {"read_file", "write_file", "edit_file", "check_forward", "check_data",
                                          "check_config"}
    assert [r for r in tools if not r["result"].startswith('{"ok": true')] == []
    assert [r["gate"] for r in records if r["kind"] == "gate" and not r["passed"]] == []

    # each phase ended with the explicit hand-off tool, and the next phase's prompt opened with the hand-off record
    assert [r["phase"] for r in records if r["kind"] == "tool" and r["name"] == "finish_phase"] == \
        ["model", "data", "config"]
    assert [h["phase"] for h in final["handoff"]] == ["model", "data", "config", "verify"]
    model_handoff = final["handoff"][0]
    assert f"{PLUGIN}/upstream/modeling_patchlm.py" in model_handoff["files_written"]
    assert model_handoff["ids_registered"] == {"model": ["patchlm"]} and model_handoff["gates_proved"]["G1"]
    data_prompts = [first_user(r) for r in server.requests if "# Phase: data" in first_user(r)]
    config_prompts = [first_user(r) for r in server.requests if "# Phase: config" in first_user(r)]
    assert data_prompts and all("## Hand-off from earlier phases" in p and "new model ids: patchlm" in p
                                for p in data_prompts)
    assert all("examples/patchlm/patchlm_config.yaml" in p and "new template ids: patchlm" in p
               and "G2 proved:" in p for p in config_prompts)
    # the inventory the config phase saw was re-read after G2: it lists the template the data phase registered
    assert "'patchlm'" in config_prompts[0].split("## Target checkout")[1]
    # the vendoring tool reported what it copied; new files were answered with a digest, not an echo
    vendor = next(r for r in tools if r["name"] == "vendor_remote_code")
    assert '"imports_rewritten": 1' in vendor["result"] and "upstream/configuration_patchlm.py" in vendor["result"]
    # check_data shows correctness, not only shapes: a decoded row with the trained span marked, and counts
    data_check = next(r for r in tools if r["name"] == "check_data")["result"]
    assert "⟦" in data_check and '"labels_match_inputs": true' in data_check
    assert '"trained_tokens": 0,' not in data_check and '"media_items": {"images": ' in data_check
    assert "<|image|>×" in data_check  # the expanded placeholder, shown once with its count
    assert '"forward_receives": ["attention_mask", "image_patches", "input_ids", "labels"' in data_check
    writes = [r for r in tools if r["name"] == "write_file"]
    assert writes and all('"sha256"' in r["result"] and '"diff"' not in r["result"] for r in writes)
