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
