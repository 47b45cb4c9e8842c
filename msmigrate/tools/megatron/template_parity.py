"""Chat-format parity of the Megatron route's data JSON (gate G2): the template the data JSON names, as the target
registers it, against the source's own chat template on the delivered samples (probe megatron_template_parity,
run in the target runtime where the source's processor loads). One core for the gate and the route's tools.

What it proves: the text the framework's dataset builds around each answer (role markers, system prompt, turn
closings) is the text the source's template builds, turn by turn. Not proven here: the token ids after the mm
plugin's media expansion and the label mask (the framework's dataset computes those in its own runtime).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.megatron import PROBES_DIR
from msmigrate.tools.runtime import run_probe

PROBE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclass
class TemplateParity:
    ok: bool = False
    problems: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # template, where registered, samples and turns compared
    error: str | None = None  # the comparison could not run (no template named or registered, unreadable files)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def template_parity(runtime_python: str, target: Path, data_json: str, source: Path, *, samples: int = 2,
                    timeout: float = 300.0) -> TemplateParity:
    args = ["--target", str(Path(target).resolve()), "--data-json", data_json, "--source",
            str(Path(source).resolve()), "--samples", str(samples)]
    res = run_probe(runtime_python, "megatron_template_parity", args, probes_dir=PROBES_DIR, cwd=target,
                    env_extra=PROBE_ENV, timeout=timeout)
    payload = res.data.get("result") or {}
    if not payload or payload.get("error"):
        return TemplateParity(error=payload.get("error") or res.error or "probe failed",
                              facts={"stderr_tail": res.data.get("stderr_tail")} if not payload else {})
    facts = {k: payload.get(k) for k in ("template", "registered_in", "samples_compared", "turns_compared",
                                         "data_file", "first_prompt")}
    return TemplateParity(ok=bool(payload.get("ok")), problems=list(payload.get("problems") or []), facts=facts)
