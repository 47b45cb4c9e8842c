"""`msmigrate fixtures list` says which policy migrates each fixture on which route, read from the eval suites;
`msmigrate fixtures target --backend megatron` writes the Megatron-route stand-in."""

from pathlib import Path

from typer.testing import CliRunner

from msmigrate.faces.cli import app
from msmigrate.faces.eval import coverage
from msmigrate.testbeds.fixtures import FIXTURES


def _rows(output: str) -> dict[str, list[str]]:
    lines = output.strip().splitlines()
    assert lines[0].split("\t")[:2] == ["fixture", "family"]
    return {cells[0]: cells for cells in (line.split("\t") for line in lines[1:])}


def test_list_gives_every_fixture_its_policy_and_route():
    result = CliRunner().invoke(app, ["fixtures", "list"])
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    assert set(rows) == set(FIXTURES) and all(len(cells) == 4 for cells in rows.values())
    assert rows["qwen2_vl"][2] == "rules: G0-G6"
    assert rows["internvl_chat"][2].startswith("llm")  # remote code: the rules policy declines it
    assert "declined" in rows["florence2"][2] and rows["florence2"][3] == "-"
    megatron = rows["qwen2_5_vl"][3]
    assert "rules tp=2: G0-G3, then needs an accelerator" in megatron and "rules tp=4: declined" in megatron


def test_the_cells_follow_the_suites_not_a_hand_typed_table(tmp_path, monkeypatch):
    (tmp_path / "one.yaml").write_text(
        "name: one\ntasks:\n  - fixture: qwen2_vl\n  - id: llava_pp2\n    fixture: llava\n"
        "    target: megatron_standin\n    spec: {parallelism: {pp: 2}}\n"
        "    expect: {backend: megatron, exit_status: needs_accelerator}\n")
    monkeypatch.setattr(coverage, "SUITES_DIR", tmp_path)
    rows = {r.name: r for r in coverage.fixture_routes()}
    assert rows["qwen2_vl"].fsdp2 == ["rules: G0-G6"] and rows["qwen2_vl"].megatron == []
    assert rows["llava"].fsdp2 == [] and rows["llava"].megatron == ["rules pp=2: G0-G3, then needs an accelerator"]
    assert rows["gemma3"].cells()[2:] == ("-", "-")  # in no suite: nothing claimed


def test_target_backend_megatron_writes_the_megatron_standin(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["fixtures", "target", "--backend", "megatron", str(tmp_path / "mt")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "mt" / "pretrain_vlm.py").is_file() and (tmp_path / "mt" / ".git").is_dir()
    assert not (tmp_path / "mt" / "mindspeed_mm" / "fsdp").exists()  # not the plugin-route stand-in
    assert Path(result.output.strip().splitlines()[-1]) == (tmp_path / "mt").resolve()
    bad = runner.invoke(app, ["fixtures", "target", "--backend", "deepspeed", str(tmp_path / "x")])
    assert bad.exit_code == 2 and not (tmp_path / "x").exists()
