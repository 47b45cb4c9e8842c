"""benchmarks/results_md.py: a benchmark rewrites its own section of RESULTS.md and leaves the rest alone."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("results_md", ROOT / "benchmarks" / "results_md.py")
results_md = importlib.util.module_from_spec(spec)
spec.loader.exec_module(results_md)


def test_update_section_replaces_only_its_own_block():
    text = "# R\n\nhistory\n"
    once = results_md.update_section(text, "bench_a", "first")
    assert once.startswith("# R\n\nhistory\n") and "first" in once
    twice = results_md.update_section(once + "\nmore history\n", "bench_a", "second")
    assert "first" not in twice and "second" in twice and twice.endswith("more history\n")
    both = results_md.update_section(twice, "bench_b", "other")
    assert results_md.update_section(both, "bench_a", "third").count("other") == 1


def test_recorded_tees_stdout_into_the_section(tmp_path, monkeypatch, capsys):
    out = tmp_path / "RESULTS.md"
    out.write_text("# R\n\nhand-written history\n")
    monkeypatch.setenv("MSMIGRATE_RESULTS_MD", str(out))
    with results_md.recorded("bench_x", ["--mb", "1"]):
        print("throughput: 9 MB/s")
    assert "throughput: 9 MB/s" in capsys.readouterr().out  # still printed
    text = out.read_text()
    assert "hand-written history" in text and "throughput: 9 MB/s" in text
    assert "`python benchmarks/bench_x.py --mb 1`" in text and results_md.end_marker("bench_x") in text
    monkeypatch.setenv("MSMIGRATE_RESULTS_MD", "0")
    with results_md.recorded("bench_y", []):
        print("not written")
    assert "not written" not in out.read_text()


def test_every_benchmark_script_records_its_section():
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        assert f'recorded("{script.stem}")' in script.read_text(), script.name
        assert results_md.begin_marker(script.stem) in (ROOT / "benchmarks" / "RESULTS.md").read_text()
