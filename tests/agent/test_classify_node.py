"""The classify node on the compiled graph: catalog verdicts, the LLM verdict over a real HTTP round trip (a local
OpenAI-compatible server on 127.0.0.1), and the no-LLM fallback to the phase whose gate failed, said in the report."""

from __future__ import annotations

import json

from agent_fakes import FakeGates, ScriptedPolicy, make_run
from fake_openai_server import ScriptedChatServer

from msmigrate.agent.config import LLMSettings, Settings
from msmigrate.agent.policies.llm import LLMPolicy, build_chat_model, parse_classify_answer

# A failure inside the data stack's mm_plugin that no catalog case names (a None where an image size belongs).
UNKNOWN = ("[INFO] Loading dataset mllm_demo.json...\n"
           "[rank0]: Traceback (most recent call last):\n"
           "[rank0]:   File \"/opt/LLaMA-Factory/src/llamafactory/data/mm_plugin.py\", line 412, in _regularize_images\n"
           "[rank0]: TypeError: unsupported operand type(s) for //: 'NoneType' and 'int'\n"
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n")


def drive(run, **kw):
    try:
        return run.drive(**kw)
    finally:
        run.close()


def llm_policy(server: ScriptedChatServer) -> LLMPolicy:
    llm = LLMSettings(base_url=server.base_url, model="scripted", timeout_s=10, max_transport_retries=0)
    return LLMPolicy(build_chat_model(llm, Settings(llm_api_key="sk-test")), llm)


def test_llm_verdict_is_asked_with_root_cause_and_recorded(fast_prepare, tmp_path):
    answer = json.dumps({"case_id": "unknown", "owner": "data",
                         "reason": "the mm_plugin divides an image size that is None: the data plugin reads a "
                                   "sample without its image size; fix the plugin in the data path."})
    gates = FakeGates({"G2": [UNKNOWN, None]})
    with ScriptedChatServer({}, classify_reply=answer) as server:
        run = make_run(fast_prepare, tmp_path, llm_policy(server), gates)
        out = drive(run)
        classify_requests = [r for r in server.requests if not r.get("tools")]
    assert out["exit_status"] == "success", out.get("exit_detail")
    (record,) = run.trajectory.records("classify")
    assert (record["method"], record["owner"], record["route"]) == ("llm", "data", "data")
    assert record["case_id"] is None  # "unknown" is not a case id
    assert "data plugin" in record["diagnosis"] and json.loads(record["llm_answer"])["owner"] == "data"
    assert gates.calls.count("G2") == 2  # routed back to data, which passed its gate the second time
    (request,) = classify_requests
    prompt = request["messages"][0]["content"]
    assert "decisive signal (exception): TypeError: unsupported operand type(s) for //: 'NoneType'" in prompt
    assert "## Candidate cases" in prompt and "(owner " in prompt
    assert "the phase whose artifact must change to fix it" in prompt  # owner semantics
    assert "- failed gate: G2" in prompt
    # the verdict's request is counted: in the run's tokens (the server's usage) and in the classify record
    assert record["requests"] == 1 and record["prompt_chars"] == len(prompt) and record["tokens"] > 0
    decisions = sum(d.get("tokens", 0) for d in run.trajectory.records("decision"))
    assert out["counters"]["tokens"] == decisions + record["tokens"]


def test_without_llm_unknown_goes_back_to_the_gate_phase_and_the_report_says_so(fast_prepare, tmp_path):
    gates = FakeGates({"G2": [UNKNOWN] * 5})
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates, budgets={"phase_attempts": 1})
    out = drive(run)
    assert out["exit_status"] == "gates_failed"
    records = run.trajectory.records("classify")
    assert {r["method"] for r in records} == {"gate-default"} and {r["route"] for r in records} == {"data"}
    assert records[0]["owner"] is None and "unsupported operand type(s)" in records[0]["root_cause"]
    report = (run.run_dir / "verification_report.md").read_text()
    assert "Unknown failure" in report and "returning to data, the phase whose gate (G2) failed" in report


def test_llm_is_shown_the_runs_own_settings_files(fast_prepare, tmp_path):
    """Inside a run the fact that decides config is often on disk, not in the log: the YAML and launch script the
    migration wrote go into the classify prompt (fenced, secrets masked); the dataset JSON beside them does not."""
    answer = json.dumps({"case_id": "unknown", "owner": "config", "fits": ["config"],
                         "reason": "cutoff_len: 8 in the run's YAML cuts every sample: raise it."})
    gates = FakeGates({"G2": [UNKNOWN, None]})
    with ScriptedChatServer({}, classify_reply=answer) as server:
        run = make_run(fast_prepare, tmp_path, llm_policy(server), gates)
        examples = run.ctx.target / "examples" / run.ctx.model_name
        examples.mkdir(parents=True, exist_ok=True)
        (examples / "train.yaml").write_text("data:\n  dataset_param:\n    cutoff_len: 8\n")
        (examples / "train.sh").write_text("torchrun --nproc_per_node 2 train.py --api sk-abcdefghijklmnop\n")
        (examples / "data.json").write_text('[{"messages": "a sample, not a setting"}]')
        drive(run)
        (request,) = [r for r in server.requests if not r.get("tools")]
    prompt = request["messages"][0]["content"]
    assert "## The run's own settings (files this migration wrote)" in prompt
    section = prompt.split("## The run's own settings", 1)[1]
    # each file in a fence labelled with its path (a name the run's files were given: inside the fence's line)
    assert f"<<<DATA examples/{run.ctx.model_name}/train.yaml id=" in section and "cutoff_len: 8" in section
    assert "torchrun --nproc_per_node 2" in section and "sk-abcdefghijklmnop" not in prompt
    assert "a sample, not a setting" not in prompt
    (record,) = run.trajectory.records("classify")
    assert (record["owner"], record["route"]) == ("config", "config")


def test_without_settings_files_the_prompt_has_no_settings_section(fast_prepare, tmp_path):
    gates = FakeGates({"G2": [UNKNOWN, None]})
    with ScriptedChatServer({}, classify_reply='{"owner": "data", "reason": "r"}') as server:
        run = make_run(fast_prepare, tmp_path, llm_policy(server), gates)
        drive(run)
        (request,) = [r for r in server.requests if not r.get("tools")]
    assert "## The run's own settings" not in request["messages"][0]["content"]


def test_llm_abstention_goes_back_to_the_gate_phase_with_its_reason(fast_prepare, tmp_path):
    answer = json.dumps({"case_id": "unknown", "owner": "unknown", "fits": ["data", "model"],
                         "reason": "the excerpt ends at the TypeError; it does not show which sample or plugin "
                                   "produced the None, so either the data or the model side could own it."})
    gates = FakeGates({"G2": [UNKNOWN, None]})
    with ScriptedChatServer({}, classify_reply=answer) as server:
        run = make_run(fast_prepare, tmp_path, llm_policy(server), gates)
        out = drive(run)
        asked = [r for r in server.requests if not r.get("tools")]
    assert out["exit_status"] == "success", out.get("exit_detail")
    assert len(asked) == 1
    (record,) = run.trajectory.records("classify")
    # an abstention routes like the deterministic one (the failed gate's phase), and says the LLM's reason
    assert (record["method"], record["owner"], record["case_id"], record["route"]) == ("llm-abstain", None, None,
                                                                                       "data")
    assert "returning to data, the phase whose gate (G2) failed" in record["diagnosis"]
    assert "does not show which sample" in record["diagnosis"]
    assert record["fits"] == ["data", "model"] and "possible owners: data, model" in record["diagnosis"]
    assert record["requests"] == 1 and record["tokens"] > 0


def test_llm_abstention_that_rules_out_the_gate_phase_goes_to_the_first_phase_it_left_possible(fast_prepare,
                                                                                                  tmp_path):
    answer = json.dumps({"case_id": "unknown", "owner": "unknown", "fits": ["model", "config"],
                         "reason": "the forward got a None: the model's forward signature or a launch flag; the "
                                   "dataset is not involved, but the excerpt does not show which of the two."})
    gates = FakeGates({"G2": [UNKNOWN, None]})
    with ScriptedChatServer({}, classify_reply=answer) as server:
        run = make_run(fast_prepare, tmp_path, llm_policy(server), gates)
        drive(run)
    record = run.trajectory.records("classify")[0]
    assert (record["method"], record["owner"], record["route"]) == ("llm-abstain", None, "model")
    assert "the first phase the LLM left possible" in record["diagnosis"] and "data, is not among them" in \
        record["diagnosis"]


def test_catalog_verdict_skips_the_llm(fast_prepare, tmp_path):
    gates = FakeGates({"G3": ["RuntimeError: Error(s) in loading state_dict for Qwen2VLForConditionalGeneration:\n"
                              "\tMissing key(s) in state_dict: \"visual.merger.mlp.0.weight\"\n"
                              "OSError: [Errno 28] No space left on device: '/out/ckpt/model.safetensors'",
                              None]})
    with ScriptedChatServer({}, classify_reply="environment") as server:
        run = make_run(fast_prepare, tmp_path, llm_policy(server), gates)
        out = drive(run)
        asked = [r for r in server.requests if not r.get("tools")]
    assert out["exit_status"] == "success"
    (record,) = run.trajectory.records("classify")
    assert (record["case_id"], record["method"], record["route"]) == ("host-storage-error", "regex", "config")
    assert asked == []


def test_answer_parsing_keeps_only_candidate_case_ids():
    evidence = {"candidates": [{"case_id": "collator-unknown"}]}
    got = parse_classify_answer('Sure: {"case_id": "collator-unknown", "owner": "Data", "reason": "r"}', evidence)
    assert (got["owner"], got["case_id"], got["diagnosis"]) == ("data", "collator-unknown", "r")
    invented = parse_classify_answer('{"case_id": "made-up", "owner": "model", "reason": "r"}', evidence)
    assert invented["case_id"] is None and invented["owner"] == "model"
    assert parse_classify_answer("config, not the model", evidence)["owner"] == "config"
    assert parse_classify_answer('{"owner": "nobody"} no idea', evidence) is None
    abstain = parse_classify_answer('{"case_id": "collator-unknown", "owner": "Unknown", "reason": "cut off"}',
                                    evidence)
    assert (abstain["owner"], abstain["case_id"], abstain["method"], abstain["diagnosis"]) == (
        None, None, "llm-abstain", "cut off")
    # "fits": the owners the model leaves possible; unknown words and repeats dropped, a named owner fits itself
    two = parse_classify_answer('{"owner": "unknown", "fits": ["Config", "data", "config", "cluster"], "reason": "r"}')
    assert (two["owner"], two["fits"]) == (None, ["config", "data"])
    assert parse_classify_answer('{"owner": "model", "reason": "r"}')["fits"] == ["model"]


# Two ranks failing with two known messages of equal priority and different owners (a collator id the data path
# does not know, an allocation size read from corrupted memory): the catalog answers the longer match, tentatively,
# and the LLM may review it.
TENTATIVE = ("[rank0]: ValueError: No data collator is registered as internvl. Available collators: llm_pretrain, "
             "qwen3asr, qwen3omni, qwen3vl, step3_vl.\n"
             "[rank1]: RuntimeError: NPU out of memory. Tried to allocate more than 1EB memory.\n")


def test_a_tentative_catalog_answer_is_not_reviewed_by_default(fast_prepare, tmp_path):
    gates = FakeGates({"G2": [TENTATIVE, None]})
    with ScriptedChatServer({}, classify_reply="environment") as server:
        run = make_run(fast_prepare, tmp_path, llm_policy(server), gates)
        out = drive(run)
        asked = [r for r in server.requests if not r.get("tools")]
    assert out["exit_status"] == "success", out.get("exit_detail")
    (record,) = run.trajectory.records("classify")
    assert (record["case_id"], record["method"], record["route"]) == ("collator-unknown", "regex", "data")
    assert asked == [] and "overrode" not in record


def test_llm_overrides_a_tentative_catalog_answer_and_the_record_says_which(fast_prepare, tmp_path, monkeypatch):
    monkeypatch.setattr("msmigrate.agent.nodes.classify.REVIEW_TENTATIVE", True)
    answer = json.dumps({"case_id": "allocation-size-corrupt", "owner": "environment",
                         "reason": "rank 1 asked for more than 1EB: a size read from corrupted memory, a kernel bug."})
    gates = FakeGates({"G2": [TENTATIVE, None]})
    with ScriptedChatServer({}, classify_reply=answer) as server:
        run = make_run(fast_prepare, tmp_path, llm_policy(server), gates)
        out = drive(run)
        (request,) = [r for r in server.requests if not r.get("tools")]
    assert out["exit_status"] == "success", out.get("exit_detail")
    (record,) = run.trajectory.records("classify")
    assert (record["method"], record["owner"], record["case_id"], record["route"]) == (
        "llm", "environment", "allocation-size-corrupt", "config")
    assert record["overrode"] == "collator-unknown (regex, confidence 0.85)"
    prompt = request["messages"][0]["content"]
    assert "## The deterministic stages' answer" in prompt
    assert "- collator-unknown (owner data, regex, confidence 0.85) — tentative: you may confirm or override it" \
        in prompt
    assert "allocation-size-corrupt (owner environment; its message matched the log)" in prompt


def test_llm_abstaining_on_a_tentative_answer_leaves_the_catalog_answer_standing(fast_prepare, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setattr("msmigrate.agent.nodes.classify.REVIEW_TENTATIVE", True)
    answer = json.dumps({"case_id": "unknown", "owner": "unknown", "reason": "the note alone does not say more."})
    gates = FakeGates({"G2": [TENTATIVE, None]})
    with ScriptedChatServer({}, classify_reply=answer) as server:
        run = make_run(fast_prepare, tmp_path, llm_policy(server), gates)
        out = drive(run)
    assert out["exit_status"] == "success", out.get("exit_detail")
    (record,) = run.trajectory.records("classify")
    assert (record["case_id"], record["method"], record["owner"], record["route"]) == (
        "collator-unknown", "regex", "data", "data")
    assert record["llm_review"] == "the note alone does not say more." and record["requests"] == 1


def test_llm_evidence_shows_the_deterministic_answer_and_how_each_candidate_was_found(monkeypatch):
    from msmigrate.agent.nodes.classify import asks_llm, llm_evidence
    from msmigrate.knowledge.classifier import classify

    tentative = classify(TENTATIVE, gate_verdict=[f"fake G2: {TENTATIVE}"])  # as the node asks (gate summary)
    assert tentative.tentative and not asks_llm(tentative)
    monkeypatch.setattr("msmigrate.agent.nodes.classify.REVIEW_TENTATIVE", True)
    assert asks_llm(tentative)
    evidence = llm_evidence("G2", tentative)
    assert evidence["deterministic"] == {"answer": "collator-unknown (owner data, regex, confidence 0.85)",
                                         "tentative": True}
    assert [c["case_id"] for c in evidence["candidates"]][:2] == ["collator-unknown", "allocation-size-corrupt"]
    assert evidence["candidates"][1]["basis"] == "its message matched the log"
    unknown = classify(UNKNOWN)
    assert unknown.method == "none" and not unknown.tentative and asks_llm(unknown)
    shown = llm_evidence("G2", unknown)
    assert shown["deterministic"]["answer"].startswith("unknown (no case it trusts)")
    assert shown["deterministic"]["tentative"] is False
    assert all(c["basis"] for c in shown["candidates"])
    decided = classify("OSError: [Errno 28] No space left on device: '/out/ckpt/model.safetensors'")
    assert decided.method == "regex" and not decided.tentative and not asks_llm(decided)


def test_every_llm_request_has_a_root_cause_section_even_when_none_was_found():
    from msmigrate.agent.nodes.classify import llm_evidence
    from msmigrate.knowledge.classifier import classify

    quiet = llm_evidence("G4", classify("INFO step 1 done\nUserWarning: something is deprecated"))
    assert quiet["root_cause"]["kind"] == "none" and quiet["root_cause"]["text"].startswith("none found: ")
    assert "warning" in quiet["root_cause"]["text"]
    assert quiet["root_cause"]["warnings"] == ["UserWarning: something is deprecated"]
    wrapper = llm_evidence("G4", classify("torch.distributed.elastic.multiprocessing.errors.ChildFailedError"))
    assert "wrapper" in wrapper["root_cause"]["text"] and "not in the excerpt" in wrapper["root_cause"]["text"]


def test_a_log_of_warnings_only_shows_the_last_ones_to_the_llm():
    """A failed run whose log has no failure signal: its last warnings (nearest to where it stopped) are what the
    LLM can read besides the excerpt; the prompt lists them and says they never decide alone."""
    from msmigrate.agent.nodes.classify import MAX_WARNINGS_SHOWN, llm_evidence
    from msmigrate.knowledge.classifier import classify
    from msmigrate.prompts.render import render
    from msmigrate.prompts.sample_state import sample_vars

    log = "\n".join(f"UserWarning: setting number {i} is ignored" for i in range(12)) + "\nstep 3/100 loss 2.1"
    shown = llm_evidence("G4", classify(log))["root_cause"]
    assert shown["warnings"] == [f"UserWarning: setting number {i} is ignored" for i in range(12)][-MAX_WARNINGS_SHOWN:]
    values = sample_vars("classify")
    values["last_failure"] = {**values["last_failure"], "excerpt": log, "root_cause": shown}
    prompt = render("classify", **values)
    assert f"the warnings it printed (the last {MAX_WARNINGS_SHOWN}; a warning alone never decides" in prompt
    assert "  - UserWarning: setting number 11 is ignored" in prompt


def _meta_nan(name: str) -> str:
    return ("single-process: launch failed: non-finite loss at iteration 1: loss=nan\n"
            f"single-process: uninitialised storage at the first forward: non-persistent buffer `{name}` of M holds "
            "the fill value of uninitialised memory (NaN in 4 of 4 elements): nothing wrote it after the storage was "
            "allocated (to_empty after meta-device init)")


def test_a_case_recurring_on_the_same_gate_says_the_previous_fix_did_not_work(fast_prepare, tmp_path):
    """The same case on the same gate after a repair: the diagnosis leads with that, and with this failure's own
    evidence (the tensor it names), not only the case's advice the repair already followed."""
    gates = FakeGates({"G4": [_meta_nan("lm.rotary.inv_freq"), _meta_nan("vision.rotary.inv_freq"), None]})
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates)
    drive(run)  # (the scripted repairs change nothing: the third G4 on the identical target is refused)
    first, second = run.trajectory.records("classify")[:2]
    assert first["case_id"] == second["case_id"] == "meta-init-nonpersistent-buffers"
    assert "did not work" not in first["diagnosis"] and "recurrence" not in first
    assert second["diagnosis"].startswith("G4 failed again with the same case (meta-init-nonpersistent-buffers)")
    assert "the previous fix did not work" in second["diagnosis"] and second["recurrence"] == 2
    assert "vision.rotary.inv_freq" in second["diagnosis"] and "lm.rotary.inv_freq" not in second["diagnosis"]
    assert first["diagnosis"] in second["diagnosis"]  # the case's advice is still there, after the evidence


def test_a_different_case_on_the_same_gate_is_no_recurrence(fast_prepare, tmp_path):
    gates = FakeGates({"G2": [UNKNOWN, _meta_nan("rotary.inv_freq"), None]})
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), gates)
    drive(run)
    assert all("recurrence" not in r for r in run.trajectory.records("classify"))


def test_an_excerpt_cut_inside_a_traceback_is_said_to_lack_its_error():
    from msmigrate.agent.nodes.classify import llm_evidence
    from msmigrate.knowledge.classifier import classify

    cut = ("Traceback (most recent call last):\n"
           "  File \"/work/train.py\", line 88, in <module>\n    main()\n"
           "  File \"/work/train.py\", line 61, in main\n    batch = next(loader)\n")
    shown = llm_evidence("G4", classify(cut))
    assert shown["root_cause"]["kind"] == "traceback"
    assert "before its exception line: the error itself is not shown" in shown["root_cause"]["text"]
    complete = llm_evidence("G4", classify(cut + "RuntimeError: boom in the loader"))
    assert "the error itself is not shown" not in complete["root_cause"]["text"]
    assert "a later traceback" not in complete["root_cause"]["text"]
    # an error, then another process's traceback cut before its exception line: that one may be the cause
    later = llm_evidence("G4", classify("RuntimeError: boom in the loader\n" + cut))
    assert later["root_cause"]["kind"] == "exception"
    assert ("a later traceback in the excerpt ends before its exception line, last frame: File \"/work/train.py\", "
            "line 61, in main") in later["root_cause"]["text"]


def test_lexical_neighbours_are_few_and_say_how_little_they_are_worth():
    from msmigrate.agent.nodes.classify import MAX_LEXICAL_SHOWN, llm_evidence
    from msmigrate.knowledge.classifier import Classification, load_calibration

    calibration = load_calibration()
    neighbours = [{"case_id": cid, "stage": "bm25", "score": 9.0 - i} for i, cid in enumerate(
        ["recompute-past-key-values", "multinode-cache-collision", "meta-init-nonpersistent-buffers",
         "torch-cpu-accelerator-shim"])]
    matched = {"case_id": "batch-key-rejected-by-forward", "stage": "regex", "priority": 50}
    verdict = Classification(None, None, 0.0, "none", "unknown", candidates=[matched, *neighbours],
                             root_cause={"primary": {"kind": "exception", "text": "TypeError: x"}})
    shown = llm_evidence("G2", verdict)["candidates"]
    # every message match stays; of the wording neighbours only the closest ones, each with its measured worth
    assert [c["case_id"] for c in shown] == ["batch-key-rejected-by-forward", "recompute-past-key-values",
                                             "multinode-cache-collision"][:1 + MAX_LEXICAL_SHOWN]
    worth = f"named the right owner in {calibration['vote_correct']} of {calibration['votes']} failures"
    assert all(worth in c["basis"] for c in shown[1:]) and worth not in shown[0]["basis"]
    assert calibration["vote_correct"] < calibration["votes"] / 2  # what makes them a weak hint (tuning half)


def test_a_match_outside_the_failure_lines_is_said_to_decide_nothing():
    from msmigrate.agent.nodes.classify import candidate_basis

    outside = {"case_id": "model-no-split-modules", "stage": "regex", "priority": 60, "outside_failure_lines": True}
    assert "not one of the log's failure lines" in candidate_basis(outside)
    assert candidate_basis({**outside, "outside_failure_lines": False}) == "its message matched the log"


def test_llm_is_shown_the_target_runtime_the_run_probed(fast_prepare, tmp_path, monkeypatch):
    """Inside a run the versions and devices that decide environment were probed at its start: the classify prompt
    shows them (a torch_npu that does not import, the installed releases), not only the log."""
    import msmigrate.agent.nodes.prepare as prepare
    from msmigrate.core.tool_result import ToolResult

    probed = {"python": "3.10.14", "torch": "2.7.1", "transformers": "4.57.0", "packages": {"accelerate": "1.10.0"},
              "torch_npu": {"found": True, "importable": False, "error": "ImportError: libhccl.so: cannot open"},
              "device": "cpu"}
    monkeypatch.setattr(prepare, "run_probe", lambda *a, **k: ToolResult.success(returncode=0, result=probed))
    gates = FakeGates({"G2": [UNKNOWN, None]})
    with ScriptedChatServer({}, classify_reply='{"owner": "data", "reason": "r"}') as server:
        run = make_run(fast_prepare, tmp_path, llm_policy(server), gates)
        drive(run)
        (request,) = [r for r in server.requests if not r.get("tools")]
    prompt = request["messages"][0]["content"]
    section = prompt.split("## The target runtime (probed when this run started; facts, not log lines)", 1)[1]
    assert "- installed: python 3.10.14, torch 2.7.1, transformers 4.57.0, accelerate 1.10.0" in section
    assert "- torch_npu: installed but does not import: ImportError: libhccl.so: cannot open" in section


def test_a_timed_out_probe_is_routed_as_environment_with_the_setting_that_raises_it(fast_prepare, tmp_path):
    from msmigrate.tools.runtime import PROBE_TIMEOUT_SETTING

    timed_out = (f"probe forward_smoke timed out after 300s (the runtime probes' time limit; raise "
                 f"{PROBE_TIMEOUT_SETTING} in the spec for a large source or a slow host)")
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), FakeGates({"G1": [timed_out, None]}),
                   launch={"probe_timeout_s": 450})
    assert run.ctx.probe_timeout_s == 450.0  # the spec's limit is the one every probe of the run gets
    drive(run)
    (record,) = run.trajectory.records("classify")
    assert (record["case_id"], record["owner"], record["route"]) == ("probe-timeout", "environment", "config")
    assert PROBE_TIMEOUT_SETTING in record["diagnosis"]


def test_the_yaml_keys_a_config_failure_names_reach_the_config_phase_as_data(fast_prepare, tmp_path):
    """The config phase's last-resort repair sets the keys a failure names back to the derived values: it gets them
    as a list in the failure, read from the error and the run's own YAML, not parsed from the diagnosis's prose
    (which quotes the catalog's advice and its keys too)."""
    failure = ("[value-out-of-range] training.lr_min: 0.5 is above training.lr 0.0001 (the schedule would rise); "
               "set lr_min below lr")
    run = make_run(fast_prepare, tmp_path, ScriptedPolicy(), FakeGates({"G3": [failure, None]}))
    examples = run.ctx.target / "examples" / run.ctx.model_name
    examples.mkdir(parents=True, exist_ok=True)
    (examples / f"{run.ctx.model_name}_config.yaml").write_text(
        "training:\n  lr: 0.0001\n  lr_min: 0.5\n  micro_batch_size: 1\n")
    drive(run)
    (record,) = run.trajectory.records("classify")
    assert record["route"] == "config" and record["keys"][0] == "training.lr_min"
    assert "training.micro_batch_size" not in record["keys"]


def test_the_keys_a_config_failure_names_come_from_its_error_and_the_rules_that_decided_not_from_advice():
    from msmigrate.agent.failure_artifacts import config_keys
    from msmigrate.knowledge.failure_context import Artifacts

    art = Artifacts(config=("examples/m/m_config.yaml",),
                    yaml_keys={"dataset_dir": "data.dataset_param.basic_parameters.dataset_dir", "lr": "training.lr",
                               "ulysses_parallel_size": "parallel.ulysses_parallel_size"},
                    yaml_values={"data.dataset_param.basic_parameters.dataset_dir": "~/m/data", "training.lr": "0.0001"})
    error = "FileNotFoundError: [Errno 2] No such file or directory: 'images/sample_00.png'"
    assert config_keys(error, art) == []  # the error names no key
    reason = ("set data.dataset_param.basic_parameters.dataset_dir (~/m/data in examples/m/m_config.yaml) to /d: "
              "`images/sample_00.png` exists in that training records' folder")
    assert config_keys(error, art, [reason]) == ["data.dataset_param.basic_parameters.dataset_dir"]
    pydantic = "ValueError: World size should be a multiple of ulysses_parallel_size: 2"
    assert config_keys(pydantic, art) == ["parallel.ulysses_parallel_size"]
