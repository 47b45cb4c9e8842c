"""A checkpoint transformers converts at load (its conversion mapping's ``WeightConverter`` ops) is delivered
converted: the source's own load saved in the model's layout, whose keys map one to one onto the model's parameter
names and whose tensors are bit-equal to what the source model holds after its own load. A checkpoint transformers
reads key by key gets no conversion and no file."""

from __future__ import annotations

import sys

import pytest
import torch

from msmigrate.tools.checkpoint_conversion import CONVERTED_DIR, convert_checkpoint, converted_from
from tiny_converted_sources import checkpoint_tensors, tiny_llama, tiny_mixtral

pytestmark = pytest.mark.integration  # the probe runs in a subprocess of the runtime (transformers imported there)


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory):
    root = tmp_path_factory.mktemp("conversion")
    source = tiny_mixtral(root / "source")
    return source, convert_checkpoint(sys.executable, source, root / "run")


def test_the_source_checkpoint_does_not_map_one_to_one(mixtral):
    from transformers import AutoConfig, MixtralForCausalLM

    source, _ = mixtral
    names = set(MixtralForCausalLM(AutoConfig.from_pretrained(source)).state_dict())
    keys = set(checkpoint_tensors(source))
    assert any(".experts.0.w1.weight" in k for k in keys)  # per-expert tensors, as the hub ships them
    assert {n for n in names if n.endswith("experts.gate_up_proj")} - keys  # fused parameters no key names


def test_a_converted_checkpoint_loads_one_to_one_and_equals_the_source_load(mixtral):
    from transformers import AutoConfig, MixtralForCausalLM

    source, conv = mixtral
    assert conv.ok and conv.needed, conv.error
    assert conv.folder.endswith(CONVERTED_DIR)
    merged = {tuple(c["source"]): c["target"] for c in conv.converters}
    assert merged[(".experts.*.w1.weight", ".experts.*.w3.weight")] == [".experts.gate_up_proj"]
    assert "Concatenate" in conv.summary() and conv.folder in conv.summary()
    written = checkpoint_tensors(conv.folder)
    fresh = MixtralForCausalLM(AutoConfig.from_pretrained(source)).to(torch.bfloat16)
    assert set(written) == set(fresh.state_dict())  # one key per parameter name, nothing else
    fresh.load_state_dict(written, strict=True)
    loaded = MixtralForCausalLM.from_pretrained(source, dtype="auto").state_dict()
    for key, tensor in written.items():
        assert tensor.dtype == loaded[key].dtype == torch.bfloat16 and torch.equal(tensor, loaded[key]), key
    assert conv.tensors == len(written)
    assert converted_from(conv.folder, source) and not converted_from(source, source)


def test_a_checkpoint_read_key_by_key_gets_no_conversion(tmp_path):
    source = tiny_llama(tmp_path / "source")
    conv = convert_checkpoint(sys.executable, source, tmp_path / "run")
    assert conv.ok and not conv.needed and conv.folder is None, conv.error
    assert conv.converters == [] and "delivered as it is" in conv.summary()
    assert not (tmp_path / "run" / CONVERTED_DIR).exists()
