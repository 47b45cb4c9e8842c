"""``instantiate`` (probes/_model_build.py): the plugin checks ask for sdpa (as the CPU launches do); a class with no
sdpa path (seen in the open-world sweep: a transformers-native family whose classes declare only eager) failed G1
with "plugin does not build on meta" twice and the run ended, though the config could have asked for eager. It now
builds with eager, and the built model's own flags tell the draft what to ask for; any other ValueError still
fails the build."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


@pytest.fixture(scope="module")
def model_build():
    sys.path.insert(0, str(PROBES))
    try:
        sys.modules.pop("_model_build", None)
        import _model_build
    finally:
        sys.path.remove(str(PROBES))
    return _model_build


class _Config:
    def __init__(self, attn):
        self._attn_implementation = attn


class _EagerOnly:
    def __init__(self, config):
        if config._attn_implementation != "eager":
            raise ValueError("_EagerOnly does not support an attention implementation through "
                             "torch.nn.functional.scaled_dot_product_attention yet.")
        self.attn = config._attn_implementation

    def float(self):
        return self


class _Broken(_EagerOnly):
    def __init__(self, config):
        raise ValueError("hidden_size must be a multiple of num_heads")


def test_a_class_without_sdpa_is_built_with_eager(model_build):
    config = _Config("sdpa")
    assert model_build.instantiate(_EagerOnly, config, meta=True).attn == "eager"
    assert config._attn_implementation == "eager"


def test_other_build_errors_still_fail(model_build):
    with pytest.raises(ValueError, match="multiple of num_heads"):
        model_build.instantiate(_Broken, _Config("sdpa"), meta=False)


def test_the_meta_init_build_of_the_weight_load_checks_falls_back_too(model_build):
    # the same run then failed G1 in the target's own HF weight load, whose build is _meta_init's
    sys.path.insert(0, str(PROBES))
    try:
        sys.modules.pop("_meta_init", None)
        import _meta_init
    finally:
        sys.path.remove(str(PROBES))
    assert _meta_init.build(_EagerOnly, _Config("sdpa"), meta=False).attn == "eager"
