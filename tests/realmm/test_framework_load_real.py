"""G1's framework-load check on the real MindSpeed-MM (its ``HuggingFaceCheckpointer.load`` with the config's load
settings, transformers 4.57): the vendored remote-code class without ``_checkpoint_conversion_mapping`` loads (the
real loader leaves keys as they are then, which the stand-in now copies); a plugin whose names differ from the
checkpoint's keys fails naming the unwritten parameters, and passes with the mapping — the same verdicts as on the
stand-in (tests/agent/test_framework_load_gate.py)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from test_framework_load_gate import MAPPING, PLUGIN_DIR, VENDORED, WRAPPED  # noqa: E402

from realmm_helpers import source_for_runtime  # noqa: E402

from msmigrate.core.run_context import RunContext  # noqa: E402
from msmigrate.tools.target_checks import framework_load_check  # noqa: E402

pytestmark = pytest.mark.realmm


def test_the_real_loader_gives_the_stand_ins_verdicts(tmp_path, real_checkout, real_runtime):
    source = source_for_runtime("phi3_v", tmp_path / "phi3_v", real_runtime)
    verdicts = {}
    for name, plugin, strict in (("vendored", VENDORED, True), ("wrapped", WRAPPED.format(mapping=""), False),
                                 ("mapped", WRAPPED.format(mapping=MAPPING), True)):
        target = tmp_path / f"t_{name}"  # a copy: the session's checkout is shared read-only
        shutil.copytree(real_checkout / "mindspeed_mm", target / "mindspeed_mm", symlinks=True)
        pkg = target / PLUGIN_DIR
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        for module in ("modeling_phi3_v.py", "configuration_phi3_v.py"):
            shutil.copy2(source / module, pkg / module)
        (pkg / "plugin.py").write_text(plugin)
        ctx = RunContext(run_id=f"real-load-{name}", run_dir=tmp_path / f"run_{name}", source=source, target=target,
                         model_name="phi3_v", data_path=source / "data" / "train.json", runtime_python=real_runtime)
        res = framework_load_check(ctx, plugins=[PLUGIN_DIR], model_id="phi3_v", load=str(source),
                                   load_strict=strict, trust_remote_code=True)
        r = res.data.get("result") or {}
        assert r.get("loader") == "HuggingFaceCheckpointer.load", (res.error, res.data.get("stderr_tail", "")[-2000:])
        verdicts[name] = (res.ok, r.get("unfilled_count") == 0)
    assert verdicts == {"vendored": (True, True), "wrapped": (False, False), "mapped": (True, True)}
