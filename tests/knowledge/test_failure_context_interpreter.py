"""Runtime faults whose message names no variable or version: a docstring error while the rank's interpreter strips
docstrings (PYTHONOPTIMIZE >= 2, as G0's env probe read it), and the target's own code failing to import a name
from an installed package (the release in the runtime lacks it) with no frame of the run's own code."""

from __future__ import annotations

from msmigrate.knowledge.failure_context import Artifacts, context_owner, interpreter_switch_owner

ART = Artifacts(model=("mindspeed_mm/fsdp/models/qwen2_vl",), data=("mindspeed_mm/fsdp/data/datasets/huggingface",),
                config=("examples/qwen2_vl/qwen2_vl_config.yaml", "examples/qwen2_vl/finetune_qwen2_vl.sh"),
                records=("/data/src/data",))
DOC = ("plugin does not build on meta: ValueError: No `Args` or `Parameters` section is found in the docstring of "
       "`BaseModelOutputWithPast`. Make sure it has a docstring and contains either `Args` or `Parameters`. (raised "
       "in /venv/lib/python3.11/site-packages/transformers/utils/auto_docstring.py:4255 in _prepare_return_docstring; "
       "called from <frozen importlib._bootstrap>:1229 in _handle_fromlist)")


def with_env(**env: str) -> Artifacts:
    return Artifacts(model=ART.model, data=ART.data, config=ART.config, records=ART.records, interpreter_env=env)


def test_a_docstring_error_under_the_runtimes_pythonoptimize_2_is_environment():
    verdict = interpreter_switch_owner(DOC, with_env(PYTHONOPTIMIZE="2"))
    assert verdict is not None and (verdict.owner, verdict.rule) == ("environment", "runtime-env")
    assert "PYTHONOPTIMIZE=2" in verdict.reason


def test_no_switch_or_level_1_or_another_error_decides_nothing_and_a_launch_flag_is_config():
    assert interpreter_switch_owner(DOC, ART) is None
    assert interpreter_switch_owner(DOC, with_env(PYTHONOPTIMIZE="1")) is None  # level 1 keeps docstrings
    other = DOC.replace("docstring", "signature")
    assert interpreter_switch_owner(other, with_env(PYTHONOPTIMIZE="2")) is None
    said = interpreter_switch_owner(DOC, ART, "torchrun --nproc_per_node 1 -m x\npython -OO train.py\n")
    assert said is not None and said.owner == "config"


IMPORT = '''data pipeline failed: ImportError: cannot import name 'ConfigDict' from 'pydantic' (/venv/lib/python3.11/site-packages/pydantic/__init__.py)
Traceback (most recent call last):
  File "/w/msmigrate/tools/probes/data_check.py", line 131, in load_pipeline
    from mindspeed_mm.config.config_manager import ConfigManager
  File "/runs/x/worktree/mindspeed_mm/config/arguments/base_args.py", line 5, in <module>
    from pydantic import BaseModel, ConfigDict
ImportError: cannot import name 'ConfigDict' from 'pydantic' (/venv/lib/python3.11/site-packages/pydantic/__init__.py)
'''


def test_the_targets_own_code_failing_to_import_from_an_installed_package_is_environment():
    verdict = context_owner(IMPORT, ART)
    assert verdict is not None and (verdict.owner, verdict.rule) == ("environment", "runtime")
    assert "base_args.py:5" in verdict.reason and "`pydantic`" in verdict.reason


def test_the_same_import_from_the_plugin_is_the_plugins_frame():
    plugin = IMPORT.replace("mindspeed_mm/config/arguments/base_args.py",
                            "mindspeed_mm/fsdp/models/qwen2_vl/modeling_qwen2_vl.py")
    assert context_owner(plugin, ART).owner == "model"
    local = IMPORT.replace("/venv/lib/python3.11/site-packages/pydantic/__init__.py", "/w/pydantic/__init__.py")
    assert context_owner(local, ART) is None  # not an installed package: nothing said about the runtime
