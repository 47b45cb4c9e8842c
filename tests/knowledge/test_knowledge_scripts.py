"""scripts/knowledge_accuracy.py and scripts/prompt_sizes.py run and print their figures."""

import importlib.util
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_knowledge_accuracy_reports_and_passes(capsys):
    assert _load("knowledge_accuracy").main([]) == 0
    out = capsys.readouterr().out
    assert "owner-phase accuracy:" in out and "case-id accuracy:" in out and "confusion matrix" in out


def test_knowledge_accuracy_bm25_only_mode_runs(capsys):
    _load("knowledge_accuracy").main(["--bm25-only", "--min-owner", "0"])
    assert "regex stage disabled" in capsys.readouterr().out


def test_knowledge_accuracy_fails_below_threshold(tmp_path, capsys):
    (tmp_path / "x.yaml").write_text("expected_case: hccl-timeout\nexpected_owner: model\nsource: t\n"
                                     "log: 'EI0006: Getting socket times out.'\n")
    assert _load("knowledge_accuracy").main(["--labeled", str(tmp_path)]) == 1


def test_prompt_sizes_within_budget(capsys):
    assert _load("prompt_sizes").main([]) == 0
    out = capsys.readouterr().out
    assert "system" in out and "format_error" in out and "chars / 3.5" in out
    assert _load("prompt_sizes").main(["--budget", "100"]) == 1


def test_knowledge_accuracy_llm_stage_over_http(tmp_path, capsys):
    """The LLM stage of the script talks to a real OpenAI-compatible endpoint (a local fake on 127.0.0.1)."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
    from fake_openai_server import ScriptedChatServer

    (tmp_path / "failures").mkdir()
    (tmp_path / "healthy").mkdir()
    (tmp_path / "failures" / "a.yaml").write_text(
        "source: https://github.com/example/a/issues/1\nowner: data\nbasis: message\nresolution: r\n"
        "log: \"TypeError: unsupported operand type(s) for //: 'NoneType' and 'int'\"\n")
    (tmp_path / "failures" / "b.yaml").write_text(
        "source: https://github.com/example/b/issues/2\nowner: environment\nbasis: message\nresolution: r\n"
        "log: 'OSError: [Errno 28] No space left on device'\n")
    answer = json.dumps({"case_id": "unknown", "owner": "data", "reason": "the data plugin call is wrong"})
    with ScriptedChatServer({}, classify_reply=answer) as server:
        code = _load("knowledge_accuracy").main(["--corpus", str(tmp_path), "--llm-base-url", server.base_url])
        asked = len(server.requests)
    out = capsys.readouterr().out
    assert code == 0 and asked == 1  # only the excerpt the classifier abstains on is asked
    assert "with the LLM stage" in out and "LLM asked 1 times, answered 1" in out
    assert "methods: llm=1" in out and "owner accuracy:         100.0% (1/1)" in out


def test_knowledge_accuracy_records_llm_answers_and_replays_them(tmp_path, capsys):
    """An answer asked over HTTP is recorded with its prompt-input hash; without an endpoint it is replayed, and an
    abstention nobody asked stays an abstention."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
    from fake_openai_server import ScriptedChatServer

    corpus = tmp_path / "corpus"
    (corpus / "failures").mkdir(parents=True)
    (corpus / "healthy").mkdir()
    (corpus / "failures" / "a.yaml").write_text(
        "source: https://github.com/example/a/issues/1\nowner: data\nbasis: message\nresolution: r\n"
        "log: \"TypeError: unsupported operand type(s) for //: 'NoneType' and 'int'\"\n")
    answers = tmp_path / "answers.json"
    reply = json.dumps({"case_id": "unknown", "owner": "model", "reason": "the plugin signature"})
    with ScriptedChatServer({}, classify_reply=reply) as server:
        _load("knowledge_accuracy").main(["--corpus", str(corpus), "--llm-base-url", server.base_url,
                                          "--llm-answers", str(answers)])
    recorded = json.loads(answers.read_text())
    assert recorded["a"]["owner"] == "model" and len(recorded["a"]["prompt_key"]) == 16
    capsys.readouterr()

    _load("knowledge_accuracy").main(["--corpus", str(corpus), "--llm-answers", str(answers)])  # no endpoint
    out = capsys.readouterr().out
    assert "recorded answers used 1 (0 asked on other prompt inputs; 0 changed a tentative owner); abstentions " \
        "never asked 0" in out
    assert "confidently wrong rate: 100.0% (1/1)" in out  # the replayed answer is scored, wrong as it is

    answers.write_text(json.dumps({"a": {**recorded["a"], "prompt_key": "0" * 16}}))
    _load("knowledge_accuracy").main(["--corpus", str(corpus), "--llm-answers", str(answers)])
    assert "(1 asked on other prompt inputs;" in capsys.readouterr().out

    answers.write_text("{}")
    _load("knowledge_accuracy").main(["--corpus", str(corpus), "--llm-answers", str(answers)])
    assert "abstentions never asked 1" in capsys.readouterr().out


def test_knowledge_accuracy_counts_an_llm_unknown_as_an_abstention(tmp_path, capsys):
    """Owner "unknown" from the LLM is an abstention (the run would go back to the failed gate's phase), not a
    wrong owner: it lowers accuracy, never raises the confidently-wrong rate; recorded, it replays the same way."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
    from fake_openai_server import ScriptedChatServer

    corpus = tmp_path / "corpus"
    (corpus / "failures").mkdir(parents=True)
    (corpus / "healthy").mkdir()
    (corpus / "failures" / "a.yaml").write_text(
        "source: https://github.com/example/a/issues/1\nowner: data\nbasis: message\nresolution: r\n"
        "log: \"TypeError: unsupported operand type(s) for //: 'NoneType' and 'int'\"\n")
    answers = tmp_path / "answers.json"
    reply = json.dumps({"case_id": "unknown", "owner": "unknown", "reason": "the excerpt stops before the cause"})
    with ScriptedChatServer({}, classify_reply=reply) as server:
        _load("knowledge_accuracy").main(["--corpus", str(corpus), "--llm-base-url", server.base_url,
                                          "--llm-answers", str(answers)])
    out = capsys.readouterr().out
    recorded = json.loads(answers.read_text())["a"]
    assert recorded["owner"] is None and recorded["method"] == "llm-abstain"
    assert "abstention rate:        100.0% (1/1)" in out and "confidently wrong rate: 0.0% (0/1)" in out
    assert "the LLM abstained (owner unknown) on 1" in out

    _load("knowledge_accuracy").main(["--corpus", str(corpus), "--llm-answers", str(answers)])  # replayed
    out = capsys.readouterr().out
    assert "abstention rate:        100.0% (1/1)" in out and "the LLM abstained (owner unknown) on 1" in out


def test_knowledge_accuracy_asks_every_abstention_newest_held_out_round_first(tmp_path, capsys):
    """No request cap by default (both halves fully asked); under a cap the newest held-out round goes first, then
    the older held-out rounds, then the tuning half."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
    from fake_openai_server import ScriptedChatServer

    from msmigrate.knowledge.real_log_corpus import split_of

    corpus = tmp_path / "corpus"
    (corpus / "failures").mkdir(parents=True)
    (corpus / "healthy").mkdir()
    excerpts = {"old": ("https://github.com/example/q/issues/2", 1), "new": ("https://github.com/example/q/issues/3", 2),
                "tun": ("https://github.com/example/q/issues/1", 2)}
    assert [split_of(u) for u, _ in excerpts.values()] == ["heldout", "heldout", "tuning"]
    for name, (url, round_) in excerpts.items():
        (corpus / "failures" / f"{name}.yaml").write_text(
            f"source: {url}\nowner: data\nbasis: message\nresolution: r\nround: {round_}\n"
            f"log: \"TypeError: unsupported operand type(s) for //: 'NoneType' and 'marker_{name}'\"\n")
    reply = json.dumps({"case_id": "unknown", "owner": "data", "reason": "r"})

    def asked(*extra):
        with ScriptedChatServer({}, classify_reply=reply) as server:
            _load("knowledge_accuracy").main(["--corpus", str(corpus), "--llm-base-url", server.base_url, *extra])
            prompts = [r["messages"][0]["content"] for r in server.requests]
        capsys.readouterr()
        return [next(n for n in excerpts if f"marker_{n}" in p) for p in prompts]

    script = _load("knowledge_accuracy")
    assert script.build_parser().parse_args([]).llm_max is None and script.LLMStage(None, "m").max_requests is None
    assert asked() == ["new", "old", "tun"]
    assert asked("--llm-max", "2") == ["new", "old"]


def test_each_llm_answer_is_saved_as_it_comes(tmp_path):
    """A measurement stopped midway (a deadline, a killed relay) keeps every answer given so far."""
    import json

    from msmigrate.knowledge.classifier import classify

    class Stub:
        def classify(self, log, view, evidence=None):
            return {"owner": "data", "case_id": None, "method": "llm", "diagnosis": "r", "fits": ["data"]}

    saved = tmp_path / "answers.json"
    stage = _load("knowledge_accuracy").LLMStage(None, "m", save_to=saved)
    stage.policy = Stub()
    log = "TypeError: unsupported operand type(s) for //: 'NoneType' and 'int'"
    stage("first", log, classify(log))
    assert json.loads(saved.read_text())["first"]["owner"] == "data"  # on disk before the run ends
    stage("second", log, classify(log))
    assert set(json.loads(saved.read_text())) == {"first", "second"}


def test_knowledge_accuracy_reports_figures_by_decidability_audit(tmp_path, capsys):
    """A decidability audit beside the corpus splits the figures by whether the excerpt alone decides its owner."""
    import json

    (tmp_path / "failures").mkdir()
    (tmp_path / "healthy").mkdir()
    (tmp_path / "failures" / "a.yaml").write_text(  # a catalog message: decided
        "source: https://github.com/example/a/issues/1\nowner: environment\nbasis: message\nresolution: r\n"
        "log: 'OSError: [Errno 28] No space left on device'\n")
    (tmp_path / "failures" / "b.yaml").write_text(  # nothing the catalog knows: an abstention
        "source: https://github.com/example/b/issues/2\nowner: data\nbasis: resolution\nresolution: r\n"
        "log: \"TypeError: unsupported operand type(s) for //: 'NoneType' and 'int'\"\n")
    (tmp_path / "decidability_audit_x.json").write_text(json.dumps({
        "_about": "test", "a": {"decides": "yes", "fits": ["environment"], "why": "w"},
        "b": {"decides": "no", "fits": ["data", "model"], "why": "w"}}))
    _load("knowledge_accuracy").main(["--corpus", str(tmp_path)])
    out = " ".join(capsys.readouterr().out.split())  # columns are padded: compare words
    assert "by decidability (decidability_audit_x.json: 2 excerpts judged" in out
    assert "decides yes: 1 failures 100.0% (1/1) 0.0% (0/1) 0.0% (0/1)" in out
    assert "decides no: 1 failures 0.0% (0/1) 0.0% (0/1) 100.0% (1/1)" in out
    assert "decides partly: 0 failures" in out
    from msmigrate.knowledge.real_log_corpus import split_of
    held = {name for name, n in (("a", 1), ("b", 2))
            if split_of(f"https://github.com/example/{name}/issues/{n}") == "heldout"}
    together = out.split("by decidability (every audit's held-out excerpts;")[1]
    assert f"decides yes: {int('a' in held)} failures" in together and \
        f"decides no: {int('b' in held)} failures" in together
    # what the judged held-out excerpts allow at most: the share deciding their owner, and deciding or leaning to it
    yes = int("a" in held)
    assert f"what these {len(held)} excerpts allow a classifier reading only the excerpt" in together
    if held:
        assert f"decided by the excerpt {100 * yes / len(held):.1f}% ({yes}/{len(held)})" in together


def test_the_excerpt_ceiling_counts_yes_and_partly_verdicts():
    ceiling = _load("knowledge_accuracy").excerpt_ceiling(
        {"a": {"decides": "yes"}, "b": {"decides": "partly"}, "c": {"decides": "no"}, "d": {"decides": "no"}})
    assert "these 4 excerpts" in ceiling and "decided by the excerpt 25.0% (1/4)" in ceiling
    assert "decided or leaning to the label 50.0% (2/4)" in ceiling
