"""The LLM policy on the Megatron route, over a real HTTP round trip: a scripted model (fake_openai_server.py on
127.0.0.1) answers LangChain's ChatOpenAI for the tiny Qwen2.5-VL at tp=2 on a fresh Megatron stand-in, through the
same graph, tools and gates as every run (build_gates' Megatron slots). The script is what a capable model does with
the route's prompts: the converter step at the launch's sizes, the data JSON from the example's, the sizes checked,
the model JSON and launch script from the example's with the source's sizes, each phase closed by finish_phase. The
run must end ``needs_accelerator`` with G0-G3 green on their own evidence, and a tool's expected failure (sizes
that do not divide the model, a file that does not exist yet) must reach the model as an error observation in the
next request, not end the run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import git
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai_server import ScriptedChatServer  # noqa: E402

pytestmark = pytest.mark.integration
NAME = "tinyvl"
EXAMPLE = "examples/qwen2.5vl"
OUT = f"examples/{NAME}"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def finish(summary: str, delivered: list[str]) -> dict[str, Any]:
    return call("finish_phase", summary=summary, delivered=delivered, decisions_changed=[])


def data_json(target: Path, source: Path) -> str:
    """The example's data JSON pointed at the source's processor folder and samples (read_file showed both)."""
    doc = json.loads((target / EXAMPLE / "data_tiny.json").read_text())
    doc["dataset_param"]["preprocess_parameters"]["model_name_or_path"] = str(source)
    doc["dataset_param"]["basic_parameters"]["dataset"] = str(source / "data" / "train.json")
    doc["dataset_param"]["basic_parameters"]["dataset_dir"] = str(source / "data")
    return json.dumps(doc, indent=4) + "\n"


def model_json(target: Path, source: Path) -> str:
    """The example's model JSON, each sub-module's sizes set to the source's config.json (model_ids kept)."""
    doc = json.loads((target / EXAMPLE / "model_tiny.json").read_text())
    cfg = json.loads((source / "config.json").read_text())
    text, vision = cfg["text_config"], cfg["vision_config"]
    doc["img_context_token_id"], doc["vision_start_token_id"] = cfg["image_token_id"], cfg["vision_start_token_id"]
    dec = doc["text_decoder"]
    dec.update(num_layers=text["num_hidden_layers"], hidden_size=text["hidden_size"],
               ffn_hidden_size=text["intermediate_size"], num_attention_heads=text["num_attention_heads"],
               num_query_groups=text["num_key_value_heads"], vocab_size=text["vocab_size"],
               pipeline_num_layers=[text["num_hidden_layers"]])
    enc = doc["image_encoder"]["vision_encoder"]
    enc.update(num_layers=vision["depth"], hidden_size=vision["hidden_size"], num_attention_heads=vision["num_heads"],
               patch_size=vision["patch_size"], pipeline_num_layers=[vision["depth"]])
    return json.dumps(doc, indent=4) + "\n"


def launch_script(target: Path, vocab: int) -> str:
    text = (target / EXAMPLE / "finetune_qwen2_5_vl_tiny.sh").read_text()
    for old, new in ((f'MM_DATA="./{EXAMPLE}/data_tiny.json"', f'MM_DATA="./{OUT}/data_{NAME}.json"'),
                     (f'MM_MODEL="./{EXAMPLE}/model_tiny.json"', f'MM_MODEL="./{OUT}/model_{NAME}.json"'),
                     ('LOAD_PATH="ckpt/mm_path/tiny_qwen2_5_vl"', f'LOAD_PATH="ckpt/mm_path/{NAME}"'),
                     ("\nTP=1\n", "\nTP=2\n"), ("--vocab-size 128", f"--vocab-size {vocab}")):
        assert old in text, old
        text = text.replace(old, new)
    return text


def script(target: Path, source: Path) -> dict[str, list[dict[str, Any]]]:
    vocab = json.loads((source / "config.json").read_text())["text_config"]["vocab_size"]
    return {
        "model": [
            {"content": "The plan reuses qwen2vit, lnmlp and qwen2_5_lm; the converter step first.",
             "tool_calls": [call("convert_weights", tp=4, pp=1)]},  # 2 KV heads over 4 ranks: an error comes back
            {"content": "tp=4 cannot split 2 KV heads; the launch is tp=2.",
             "tool_calls": [call("convert_weights", tp=2, pp=1, output_dir=f"ckpt/mm_path/{NAME}")]},
            {"content": "Round trip lossless.", "tool_calls": [finish(
                "Reused the registered qwen2vit, lnmlp and qwen2_5_lm; convert_weights at tp=2 round-tripped "
                "every tensor identical.", [])]},
        ],
        "data": [
            {"content": "Check before the file exists (it does not yet).",
             "tool_calls": [call("check_megatron_data", data_json=f"{OUT}/data_{NAME}.json")]},
            {"content": "Read the example's data JSON.",
             "tool_calls": [call("read_file", where="target", path=f"{EXAMPLE}/data_tiny.json")]},
            {"content": "Write the data JSON from it.",
             "tool_calls": [call("write_file", path=f"{OUT}/data_{NAME}.json", content=data_json(target, source),
                                 reason="data JSON from the example, pointed at the source")]},
            {"content": "Check it as G2 will, then finish.",
             "tool_calls": [call("check_megatron_data", data_json=f"{OUT}/data_{NAME}.json"),
                            finish("Data JSON from the example's, pointed at the source's processor and samples.",
                                   [f"{OUT}/data_{NAME}.json"])]},
        ],
        "config": [
            {"content": "Sizes first.", "tool_calls": [
                call("check_parallel_sizes", tp=2, pp=1, cp=1, world_size=2, micro_batch_size=1,
                     global_batch_size=2)]},
            {"content": "Model JSON and launch script from the example's.", "tool_calls": [
                call("write_file", path=f"{OUT}/model_{NAME}.json", content=model_json(target, source),
                     reason="model JSON from the example with the source's sizes"),
                call("write_file", path=f"{OUT}/finetune_{NAME}.sh", content=launch_script(target, vocab),
                     reason="launch script from the example at tp=2")]},
            {"content": "Check as G3 will, then finish.", "tool_calls": [
                call("check_megatron_config", model_json=f"{OUT}/model_{NAME}.json",
                     script=f"{OUT}/finetune_{NAME}.sh"),
                finish("Model JSON and launch script at tp=2.", [f"{OUT}/model_{NAME}.json",
                                                                 f"{OUT}/finetune_{NAME}.sh"])]},
        ],
    }


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory) -> dict[str, Any]:
    from msmigrate.agent.config import LLMSettings, RunSpec, Settings
    from msmigrate.agent.runner import Run
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.megatron_standin import write_megatron_standin

    work = tmp_path_factory.mktemp("megatron_llm")
    source = build_source("qwen2_5_vl", work / "source")
    target = write_megatron_standin(work / "MindSpeed-MM", with_assets=False)
    with ScriptedChatServer(script(target, source), classify_reply="config") as server:
        spec = RunSpec(source=source, target=target, model_name=NAME, policy="llm", parallelism={"tp": 2},
                       llm=LLMSettings(base_url=server.base_url, model="scripted", timeout_s=60))
        run = Run(spec, f"{NAME}-llm", Settings(runs_dir=work / "runs", llm_api_key="sk-test",
                                                runtime_python=sys.executable))
        try:
            final = run.drive()
        finally:
            run.close()
    records = [json.loads(x) for x in (run.run_dir / "trajectory.jsonl").read_text().splitlines()]
    return {"final": final, "server": server, "run": run, "target": target, "records": records}


def test_llm_policy_migrates_qwen2_5_vl_at_tp2_to_needs_accelerator(scripted_run):
    final, server, records = scripted_run["final"], scripted_run["server"], scripted_run["records"]
    assert final["exit_status"] == "needs_accelerator", final.get("exit_detail")
    assert set(server.statuses) == {200}  # every request well-formed: each tool call answered
    # one request per scripted turn (3 + 4 + 3): finish_phase runs the gate without asking again, no classify
    assert len(server.requests) == 10 and server.classify_requests == 0
    plan = final["plan"]
    assert plan["backend"] == "megatron" and plan["similar_case"] == EXAMPLE
    for slot in ("G0", "G1", "G2", "G3"):  # passed on their own evidence, not on the model's say-so
        rec = final["gates"][slot]
        assert rec["passed"] and rec.get("evidence"), (slot, rec.get("summary"))
    assert final["gates"]["G1"]["converter_used"] == "target" and "tp=2" in final["gates"]["G1"]["summary"]
    assert "tp 2" in final["gates"]["G4"]["needs_accelerator"]
    # each phase ended with finish_phase and handed off; the policy recorded is the LLM's
    assert [h["phase"] for h in final["handoff"]] == ["model", "data", "config"]
    assert {r["policy"] for r in records if r["kind"] == "decision"} == {"llm"}
    # the route's prompts and tools went over the wire, never the plugin route's
    first = {}
    for body in server.requests:
        prompt = next(str(m["content"]) for m in body["messages"] if m["role"] == "user")
        phase = prompt.split("# Phase: ", 1)[1].split()[0]
        first.setdefault(phase, (body["messages"][0]["content"], {t["function"]["name"] for t in body["tools"]}))
    for phase, (system, tools) in first.items():
        assert "Megatron backend" in system and not tools & {"check_forward", "check_config", "vendor_remote_code"}
    assert "convert_weights" in first["model"][1] and "check_megatron_config" in first["config"][1]
    # what the model wrote is on the run's branch, and G3 checked that file
    repo = git.Repo(scripted_run["target"])
    branch = scripted_run["run"].ctx.work_branch
    model = json.loads(repo.git.show(f"{branch}:{OUT}/model_{NAME}.json"))
    assert model["text_decoder"]["vocab_size"] == 512 and "TP=2" in repo.git.show(f"{branch}:{OUT}/finetune_{NAME}.sh")
    from msmigrate.faces.eval.scorers import score_run_dir

    score = score_run_dir(scripted_run["run"].run_dir, {
        "backend": "megatron", "exit_status": "needs_accelerator",
        "components": "vision_encoder=qwen2vit,vision_projector=lnmlp,text_decoder=qwen2_5_lm"})
    assert score.passed, [(c.name, c.detail) for c in score.checks if not c.passed]


def test_expected_tool_failures_reach_the_model_as_error_observations(scripted_run):
    server, records = scripted_run["server"], scripted_run["records"]
    tools = [r for r in records if r["kind"] == "tool"]
    conv = [json.loads(r["result"]) for r in tools if r["name"] == "convert_weights"]
    assert [c["ok"] for c in conv] == [False, True]
    assert "num_key_value_heads 2 is not divisible by tp 4" in conv[0]["error"]
    early = json.loads(next(r["result"] for r in tools if r["name"] == "check_megatron_data"))
    assert early["ok"] is False and "cannot read" in early["error"]

    def tool_messages(body):
        return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]

    # the request after each failed call carries its error, fenced as data, and the run went on
    after = [b for b in server.requests if any("not divisible by tp 4" in t for t in tool_messages(b))]
    assert after and '"ok": false' in tool_messages(after[0])[-1] and "DATA" in tool_messages(after[0])[-1]
    assert any(any("cannot read examples/tinyvl/data_tinyvl.json" in t for t in tool_messages(b))
               for b in server.requests)
    assert scripted_run["final"]["exit_status"] == "needs_accelerator"
