"""The delivered launch script's size is the user's (spec, else the devices G0 found), never the similar example's;
the similar-case ranking breaks ties by architecture kind and size, and says so."""

from __future__ import annotations

import json
import struct

import pytest

from msmigrate.agent.config import LaunchSettings
from msmigrate.agent.launch_size import launch_size, size_launch_script
from msmigrate.agent.similar_case import checkpoint_parameters, rank_similar_cases

EXAMPLE_SCRIPT = """NPUS_PER_NODE=16
MASTER_ADDR=localhost
NNODES=8
NODE_RANK=0
DISTRIBUTED_ARGS="--nproc_per_node $NPUS_PER_NODE --nnodes $NNODES"
"""


def test_the_spec_wins_over_the_devices_found():
    size = launch_size(LaunchSettings.model_validate({"nproc_per_node": 4, "nnodes": 2}), {"npu_count": 8})
    assert (size["nproc_per_node"], size["nnodes"]) == (4, 2) and "spec" in size["why"]


def test_without_a_spec_value_the_devices_g0_found():
    size = launch_size(LaunchSettings(), {"npu_count": 8, "cuda": {"count": 0}})
    assert (size["nproc_per_node"], size["nnodes"]) == (8, 1) and "8 NPU" in size["why"]
    assert launch_size(LaunchSettings(), {"npu_count": 0, "cuda": {"count": 4}})["nproc_per_node"] == 4


def test_on_a_host_without_accelerators_the_g6_rank_count():
    size = launch_size(LaunchSettings(), {"npu_count": 0, "cuda": {"count": 0}, "device": "cpu"})
    assert size["nproc_per_node"] == 2 and "G6" in size["why"]


def test_the_script_is_sized_in_every_spelling():
    out = size_launch_script(EXAMPLE_SCRIPT, {"nproc_per_node": 2, "nnodes": 1})
    assert "NPUS_PER_NODE=2\n" in out and "NNODES=1\n" in out and "16" not in out and "=8" not in out
    env_default = "NPUS_PER_NODE=${NPUS_PER_NODE:-8}\nNNODES=1\n"
    assert size_launch_script(env_default, {"nproc_per_node": 4, "nnodes": 2}) == \
        "NPUS_PER_NODE=${NPUS_PER_NODE:-4}\nNNODES=2\n"
    flags = "torchrun --nproc_per_node 8 --nnodes 4 trainer.py cfg.yaml\n"
    assert size_launch_script(flags, {"nproc_per_node": 2, "nnodes": 1}) == \
        "torchrun --nproc_per_node 2 --nnodes 1 trainer.py cfg.yaml\n"
    with pytest.raises(ValueError, match="processes per node"):
        size_launch_script("torchrun trainer.py cfg.yaml\n", {"nproc_per_node": 2, "nnodes": 1})


def _safetensors(path, shapes):
    header = json.dumps({name: {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}
                         for name, shape in shapes.items()}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)


def test_parameter_count_from_the_shard_headers(tmp_path):
    _safetensors(tmp_path / "model-00001-of-00002.safetensors", {"a": [1000, 1000]})
    _safetensors(tmp_path / "model-00002-of-00002.safetensors", {"b": [1000], "c": [10, 10]})
    assert checkpoint_parameters(tmp_path) == 1_001_100
    assert checkpoint_parameters(tmp_path / "none") is None


def test_ties_break_by_kind_then_size_and_say_why():
    inventory = {"model_ids": [], "templates": [], "examples": [
        {"file": f"examples/fam/fam_{n}_config.yaml", "model_id": "fam", "dataset_type": "huggingface",
         "moe": moe, "parameters_b": size} for n, moe, size in
        (("122B", True, 122.0), ("27B", False, 27.0), ("4B", False, 4.0), ("9B", False, 9.0))]}
    source = {"model_type": "fam"}
    ranked = rank_similar_cases(source, inventory, {"moe": False, "parameters": 7_000_000_000})
    assert [c["example"].split("_")[1] for c in ranked] == ["9B", "4B", "27B", "122B"]
    assert "dense example (same kind as the source); 9B" in ranked[0]["tie_break"]
    assert "MoE example (unlike the source)" in ranked[-1]["tie_break"]
    moe_first = rank_similar_cases(source, inventory, {"moe": True, "parameters": 7_000_000_000})
    assert moe_first[0]["example"].endswith("fam_122B_config.yaml")
    # without the source's facts the old order (score, then name) stands
    assert [c["example"] for c in rank_similar_cases(source, inventory)] == sorted(c["example"] for c in ranked)
