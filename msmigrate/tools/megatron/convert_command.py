"""The weight conversion the delivered launch script needs, as the exact command a user runs on the target.

The launch script's ``--load`` (its ``LOAD_PATH``) names a Megatron-layout checkpoint that only the target's
converter makes from the source's HF folder. This reads, from the delivered files and the target, what that command
is: the converter's command-line entry (the console script the target's ``pyproject.toml`` maps to its
``checkpoint`` package, else ``python checkpoint/convert_cli.py``), ``hf_to_mm`` of the planned converter class,
``mm_dir`` = the script's ``--load``, ``hf_dir`` = the source, the per-stage layer counts the delivered model JSON
gives the text decoder and the vision encoder (``pipeline_num_layers``), and the launch's TP size.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)=[\"']?([^\"'\s]*)", re.M)
_LOAD = re.compile(r"--load[\s=]+[\"']?([^\"'\s\\]+)")


@dataclass
class ConversionCommand:
    command: str | None = None
    mm_dir: str | None = None  # where the launch script loads from (its --load)
    problems: list[str] = field(default_factory=list)  # the script and the conversion disagree
    error: str | None = None  # no command could be formed (no converter, no CLI, files unreadable)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def converter_cli(target: Path) -> str | None:
    """The target's converter command line: its console script into ``checkpoint``, else the CLI module."""
    try:
        scripts = tomllib.loads((target / "pyproject.toml").read_text(encoding="utf-8")).get("project", {}).get(
            "scripts", {})
    except (OSError, tomllib.TOMLDecodeError):
        scripts = {}
    name = next((k for k, v in scripts.items() if str(v).startswith("checkpoint.")), None)
    if name:
        return name
    return "python checkpoint/convert_cli.py" if (target / "checkpoint" / "convert_cli.py").is_file() else None


def script_load(text: str) -> str | None:
    """The ``--load`` a launch script passes, with a ``$VAR`` / ``${VAR}`` read from the script's assignments."""
    m = _LOAD.search(text)
    if not m:
        return None
    value = m.group(1)
    assigned = dict(_ASSIGN.findall(text))
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda v: assigned.get(v.group(1), v.group(0)), value)


def _stages(section: Any) -> Any:
    layers = section.get("pipeline_num_layers") if isinstance(section, dict) else None
    if isinstance(layers, list) and layers and all(isinstance(x, int) for x in layers):
        return [layers]  # one virtual stage per rank: the converter takes a list per virtual stage
    return layers


def conversion_command(target: Path, converter: str | None, model_json: str, script: str, source: Path,
                       tp: int, planned_output: str | None = None) -> ConversionCommand:
    target = Path(target)
    if not converter:
        return ConversionCommand(error="the target has no converter for this model: none to run")
    cli = converter_cli(target)
    if cli is None:
        return ConversionCommand(error="the target has no converter command line (no console script into "
                                       "checkpoint/ in pyproject.toml, no checkpoint/convert_cli.py)")
    try:
        doc = json.loads((target / model_json).read_text(encoding="utf-8"))
        text = (target / script).read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        return ConversionCommand(error=f"delivered files not read: {exc}")
    out = ConversionCommand(mm_dir=script_load(text))
    if out.mm_dir is None:
        out.problems.append(f"{script} passes no --load: the launch would start from random weights")
    elif planned_output and out.mm_dir.rstrip("/") != planned_output.rstrip("/"):
        out.problems.append(f"{script} loads {out.mm_dir}, the plan converts to {planned_output}")
    llm = _stages(doc.get("text_decoder"))
    vit = _stages((doc.get("image_encoder") or {}).get("vision_encoder"))
    if llm is None or vit is None:
        out.problems.append(f"{model_json} gives no pipeline_num_layers for the "
                            + ("text decoder" if llm is None else "vision encoder"))
    out.command = (f'{cli} {converter} hf_to_mm --cfg.mm_dir "{out.mm_dir or planned_output}" '
                   f'--cfg.hf_config.hf_dir "{source}" '
                   f"--cfg.parallel_config.llm_pp_layers {json.dumps(llm, separators=(',', ':'))} "
                   f"--cfg.parallel_config.vit_pp_layers {json.dumps(vit, separators=(',', ':'))} "
                   f"--cfg.parallel_config.tp_size {tp}")
    return out
