"""G1's forward smoke names the file whose forward returned an output the engine cannot read (no ``.loss``), so the
classify node places the cause in that file of the run (its owner), or in nothing when the forward is a library's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import msmigrate

PROBES = Path(msmigrate.__file__).parent / "tools" / "probes"


def _probe():
    sys.path.insert(0, str(PROBES))  # the probes import their siblings, as they do in the target runtime
    spec = importlib.util.spec_from_file_location("forward_smoke_probe", PROBES / "forward_smoke.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_forward_that_made_the_output_is_named_by_its_file_relative_to_the_target(tmp_path, monkeypatch):
    plugin = tmp_path / "mindspeed_mm" / "fsdp" / "models" / "tiny"
    plugin.mkdir(parents=True)
    (plugin / "modeling_tiny.py").write_text(
        "import torch\n\nclass Base(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
        "class Tiny(Base):\n    def forward(self, x):\n        return (x, x)\n\n\nclass Inherits(Base):\n    pass\n")
    monkeypatch.syspath_prepend(str(plugin))
    monkeypatch.chdir(tmp_path)  # the probe runs in the target root
    module = __import__("modeling_tiny")
    named = _probe().forward_defined_at(module.Tiny())
    assert named == " by Tiny.forward (defined in mindspeed_mm/fsdp/models/tiny/modeling_tiny.py)"
    # a forward the class inherits is named by the file that defines it (here the same module; an installed
    # library's forward is named under site-packages, which the classify node attributes to nobody)
    assert "modeling_tiny.py" in _probe().forward_defined_at(module.Inherits())
