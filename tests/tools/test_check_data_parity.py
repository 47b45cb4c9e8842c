"""check_data runs the same data parity G2 runs, with the run plan's inputs (the media token id, remote code, the
source's own training facts): an answer of "ok" from it means G2's parity holds (it used to answer ok while G2
failed, running the pipeline without any parity)."""

from __future__ import annotations

from msmigrate.core.run_context import RunContext
from msmigrate.core.tool_result import ToolResult
from msmigrate.tools import target_check_tools as tools

FACTS = {"kind": "own", "dataset": {"class": "VqaDataset", "file": "finetune/x.py", "line": 1}}


def ctx_for(tmp_path):
    (tmp_path / "t" / "examples").mkdir(parents=True)
    (tmp_path / "t" / "examples" / "c.yaml").write_text("data: {}\n")
    ctx = RunContext(run_id="r", run_dir=tmp_path / "run", source=tmp_path / "s", target=tmp_path / "t",
                     model_name="m", data_path=tmp_path / "s" / "data" / "train.json")
    ctx.plan = {"route": "custom", "media_expansion": {"media_token_id": 7}, "source_training": FACTS}
    return ctx


def test_check_data_passes_g2s_inputs_and_fails_on_its_parity(tmp_path, monkeypatch):
    seen = {}

    def fake(ctx, path, **kwargs):
        seen.update(kwargs)
        return ToolResult.success(result={"parity": {"passed": False, "oracle": "the source's own training pipeline",
                                                     "problems": ["sample 0: media spans differ"]}})

    monkeypatch.setattr(tools, "data_check", fake)
    res = tools.check_data(ctx_for(tmp_path), "examples/c.yaml")
    assert seen == {"parity_data": tmp_path / "s" / "data" / "train.json", "media_token_id": 7,
                    "trust_remote_code": True, "source_training": FACTS}
    assert not res.ok and "G2's data parity fails (the source's own training pipeline): sample 0: media spans" \
        in res.error


def test_check_data_is_ok_when_the_parity_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(tools, "data_check", lambda ctx, path, **kw: ToolResult.success(
        result={"parity": {"passed": True, "problems": []}}))
    assert tools.check_data(ctx_for(tmp_path), "examples/c.yaml").ok


def test_check_data_fails_where_a_second_draw_differs(tmp_path, monkeypatch):
    # what G2 fails on (tools/probes/_redraw.py): a player told "ok" here would deliver a pipeline whose second
    # epoch breaks (internvl_chat's play on the real MindSpeed-MM)
    found = "sample 0 read from the dataset again after its batch was collated is not the sample read before (...)"
    monkeypatch.setattr(tools, "data_check", lambda ctx, path, **kw: ToolResult.success(
        result={"parity": {"passed": True, "problems": []}, "redraw": {"changed": [{"sample": 0}],
                                                                       "problems": [found]}}))
    res = tools.check_data(ctx_for(tmp_path), "examples/c.yaml")
    assert not res.ok and res.error == "the pipeline runs once, but not twice: " + found
