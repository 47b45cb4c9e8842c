"""The classify node on the compiled graph, for failures whose cause is the target runtime while the message reads like
the data path's: the runtime's environment setting a variable the target's code reads (G0's env probe recorded it),
the runtime's image library failing on records that decode outside it (G1's source batch met the same error), and a
file of an installed package that does not parse. Each routed to environment (the config phase), each against what
the same failure gets without that fact of the run."""

from __future__ import annotations

import time

from agent_fakes import FakeGates, ScriptedPolicy, make_run

from msmigrate.agent.gates.evidence import evidence_item
from msmigrate.core.tool_result import ToolResult

MM_PLUGIN = "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"
COUNT = (f'Traceback (most recent call last):\n  File "{MM_PLUGIN}", line 51, in _validate_messages\n'
         "ValueError: The number of images does not match the number of <img> tokens in [{'role': 'user', "
         "'content': '<image>Describe the image.'}, {'role': 'assistant', 'content': 'A red square.'}].")
DECODE = (f"data pipeline failed: OSError: decoder zip not available (raised in /opt/rt/lib/python3.11/site-packages/"
          f"PIL/ImageFile.py:300 in load; called from {MM_PLUGIN}:72 in _regularize_images)")


def first_classification(ws, tmp_path, gates) -> dict:
    run = make_run(ws, tmp_path, ScriptedPolicy(), gates, budgets={"phase_attempts": 1})
    try:
        run.drive()
    finally:
        run.close()
    return run.trajectory.records("classify")[0]


def probed(monkeypatch, **result):
    import msmigrate.agent.nodes.prepare as prepare

    env = ToolResult.success(returncode=0, result={"device": {"kind": "cpu"}, **result})
    monkeypatch.setattr(prepare, "run_probe", lambda *a, **k: env)


def test_a_value_the_runtimes_environment_set_is_routed_to_environment_naming_the_variable(fast_prepare, tmp_path,
                                                                                            monkeypatch):
    probed(monkeypatch, target_env={"IMAGE_PLACEHOLDER": {"value": "<img>", "default": "<image>"}})
    record = first_classification(fast_prepare, tmp_path, FakeGates({"G2": [COUNT]}))
    assert (record["owner"], record["route"], record["context"]["rule"]) == ("environment", "config", "runtime-env")
    assert record["diagnosis"].startswith("`<img>` is the value of IMAGE_PLACEHOLDER")


def test_without_the_variable_the_same_failure_stays_with_the_data_path(fast_prepare, tmp_path, monkeypatch):
    probed(monkeypatch)
    record = first_classification(fast_prepare, tmp_path, FakeGates({"G2": [COUNT]}))
    assert (record["owner"], record["route"]) == ("data", "data")


def with_source_batch_error(gates: FakeGates, error: str) -> dict:
    """The gates, G1 passing as the real one does when its forward probe could not build the source's batch from
    the records (it runs on a synthetic batch and records the error)."""
    table = gates.as_dict()

    def g1(deps, state):
        now = time.time()
        ev = evidence_item("forward with labels", ["true"], 0, now, now, "",
                           {"loss": 6.2, "batch_source": "synthetic", "sample_batch_error": error})
        return {"gate": "G1", "passed": True, "summary": "ok", "evidence": [ev], "failure_text": ""}

    return {**table, "G1": g1}


class TableGates(FakeGates):
    def __init__(self, table: dict):
        super().__init__()
        self.table = table

    def as_dict(self):
        return self.table


def test_an_image_error_the_sources_own_processor_met_on_decodable_records_is_the_runtimes(fast_prepare, tmp_path):
    gates = TableGates(with_source_batch_error(FakeGates({"G2": [DECODE]}), "OSError: decoder zip not available"))
    record = first_classification(fast_prepare, tmp_path, gates)
    assert (record["owner"], record["route"], record["context"]["rule"]) == ("environment", "config",
                                                                             "runtime-decode")
    assert "Pillow" in record["diagnosis"]


def test_the_same_image_error_without_the_sources_is_the_data_paths(fast_prepare, tmp_path):
    record = first_classification(fast_prepare, tmp_path, FakeGates({"G2": [DECODE]}))
    assert (record["owner"], record["route"]) == ("data", "data")


def test_a_file_of_an_installed_package_that_does_not_parse_is_routed_to_environment(fast_prepare, tmp_path):
    text = ("plugin does not build on meta: SyntaxError: unexpected EOF while parsing (modeling_qwen2_vl.py, line "
            "812) (raised in /opt/rt/lib/python3.11/site-packages/transformers/models/qwen2_vl/modeling_qwen2_vl.py"
            ":812 in <module>; called from mindspeed_mm/fsdp/models/qwen2_vl/modeling_qwen2_vl.py:7 in <module>)")
    record = first_classification(fast_prepare, tmp_path, FakeGates({"G1": [text]}))
    assert (record["owner"], record["route"], record["context"]["rule"]) == ("environment", "config",
                                                                             "broken-install")


WARNED = ('[rank0]:   File "/opt/rt/lib/python3.11/site-packages/transformers/utils/deprecation.py", line 176, in '
          "wrapped_func\n[rank0]:     warnings.warn(message, FutureWarning, stacklevel=2)\n[rank0]: FutureWarning: "
          "Both `past_key_values` and `cache` are set for `FSDPQwen2VLDecoderLayer.forward`.\n"
          "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n")


def test_a_warning_raised_in_training_under_the_runtimes_error_filter_names_pythonwarnings(fast_prepare, tmp_path,
                                                                                          monkeypatch):
    probed(monkeypatch, python_env={"PYTHONWARNINGS": "error"})
    record = first_classification(fast_prepare, tmp_path, FakeGates({"G4": [WARNED]}))
    assert (record["owner"], record["route"]) == ("environment", "config")
    assert "PYTHONWARNINGS" in record["diagnosis"][:400]
    probed(monkeypatch)  # G0 found no such filter: no owner from the run's facts
    assert first_classification(fast_prepare, tmp_path, FakeGates({"G4": [WARNED]}))["owner"] is None


DOCSTRING = ("plugin does not build on meta: ValueError: No `Args` or `Parameters` section is found in the docstring of "
             "`BaseModelOutputWithPast`. Make sure it has a docstring and contains either `Args` or `Parameters`. "
             "(raised in /opt/rt/lib/python3.11/site-packages/transformers/utils/auto_docstring.py:4255 in "
             "_prepare_return_docstring; called from <frozen importlib._bootstrap>:1229 in _handle_fromlist)")


def test_a_docstring_error_under_the_runtimes_pythonoptimize_is_routed_to_environment(fast_prepare, tmp_path,
                                                                                     monkeypatch):
    probed(monkeypatch, python_env={"PYTHONOPTIMIZE": "2"})
    record = first_classification(fast_prepare, tmp_path, FakeGates({"G1": [DOCSTRING]}))
    assert (record["owner"], record["route"]) == ("environment", "config")
    assert "PYTHONOPTIMIZE" in record["diagnosis"][:400]
    probed(monkeypatch)  # G0 found no such switch: the gate's phase, as before
    assert first_classification(fast_prepare, tmp_path, FakeGates({"G1": [DOCSTRING]}))["owner"] is None


def test_the_targets_own_import_failing_on_an_installed_package_is_routed_to_environment(fast_prepare, tmp_path):
    text = ("data pipeline failed: ImportError: cannot import name 'ConfigDict' from 'pydantic' (/opt/rt/lib/"
            "python3.11/site-packages/pydantic/__init__.py)\nTraceback (most recent call last):\n  File \"/w/"
            "mindspeed_mm/config/arguments/base_args.py\", line 5, in <module>\n    from pydantic import BaseModel, "
            "ConfigDict\nImportError: cannot import name 'ConfigDict' from 'pydantic' (/opt/rt/lib/python3.11/"
            "site-packages/pydantic/__init__.py)\n")
    record = first_classification(fast_prepare, tmp_path, FakeGates({"G2": [text]}))
    assert (record["owner"], record["route"], record["context"]["rule"]) == ("environment", "config", "runtime")
