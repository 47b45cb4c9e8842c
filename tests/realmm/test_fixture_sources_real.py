"""The custom-code fixture patchlm written by the real runtime's transformers (4.57): its remote model saves, and
its LM head stays its own weight as in the project runtime's build. Without ``tie_word_embeddings: false`` in its
config.json, 4.x ties ``lm_head`` to ``embed_tokens`` (the key's default is true there) and ``save_pretrained``
refuses the undeclared share, so no real-MM run of patchlm could start."""

from __future__ import annotations

import json
import subprocess

import pytest

from realmm_helpers import source_for_runtime

pytestmark = [pytest.mark.realmm]


def test_patchlm_source_builds_untied_for_the_real_runtime(tmp_path, real_runtime):
    source = source_for_runtime("patchlm", tmp_path / "src", real_runtime)
    assert json.loads((source / "config.json").read_text())["tie_word_embeddings"] is False
    probe = ("import json, sys, transformers\n"
             "m = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True)\n"
             "print(json.dumps({'shared': m.lm_head.weight.data_ptr() == m.embed_tokens.weight.data_ptr(),\n"
             "                  'equal': bool((m.lm_head.weight == m.embed_tokens.weight).all())}))\n")
    out = subprocess.run([real_runtime, "-c", probe, str(source)], capture_output=True, text=True, timeout=600,
                         env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"shared": False, "equal": False}
