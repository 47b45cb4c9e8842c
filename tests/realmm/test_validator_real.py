"""The validator on the real examples: machine-readable output, key paths on every finding, the entry point that
reads a task config, and plan audits only for parallelisms that are on."""

from __future__ import annotations

import json

import pytest

from realmm_helpers import msmigrate

pytestmark = pytest.mark.realmm


@pytest.fixture(scope="module")
def funasr(real_checkout, real_runtime):
    proc = msmigrate("validate-config", str(real_checkout / "examples/funasr/funasr_config.yaml"), "--target",
                     str(real_checkout), "--runtime-python", real_runtime, "--json", timeout=600)
    return json.loads(proc.stdout)


def test_json_output_has_a_key_path_on_every_finding(funasr):
    assert funasr["findings"] and funasr["summary"]
    assert all(f["path"] for f in funasr["findings"]), [f for f in funasr["findings"] if not f["path"]]


def test_keys_read_by_the_task_entry_point_are_not_called_ignored(funasr):
    assert funasr["entry_point"] == "mindspeed_mm/fsdp/tasks/funasr/trainer.py"
    by_path = {f["path"]: f for f in funasr["findings"]}
    # the funasr train engine loops over args.training.max_epochs itself
    assert by_path["training.max_epochs"]["code"] == "read-by-entry-point"
    assert by_path["training.max_epochs"]["severity"] == "warning"
