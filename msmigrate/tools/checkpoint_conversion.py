"""The source's checkpoint in the layout the target's loader reads, where transformers converts it at load.

The target's HF loader maps one checkpoint key to one parameter name. transformers 5 loads some families' checkpoints
through conversion ops instead (its conversion mapping's ``WeightConverter`` entries: per-expert tensors merged into
fused experts, split q/k/v concatenated, rope permutations), so those checkpoints leave parameters unwritten in the
target. The source is the oracle: ``probes/checkpoint_conversion.py`` asks the runtime's transformers whether its ops
match a checkpoint key and, where one does, whether its load then differs from the keys read one by one; only then it
writes the source's own load, saved in the model's layout, under the run
(``<run_dir>/converted_weights``, with a ``msmigrate_conversion.json`` record), checked bit for bit against the loaded
model. A checkpoint transformers reads key by key (every family on transformers 4.x) gets no step and no file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msmigrate.tools.runtime import run_probe, save_probe_output

PROBE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
CONVERTED_DIR = "converted_weights"
RECORD = "msmigrate_conversion.json"  # the probe's name for it (probes import nothing from here)


@dataclass
class CheckpointConversion:
    ok: bool
    needed: bool = False
    folder: str | None = None  # the converted checkpoint (only when needed and written)
    converters: list[dict[str, Any]] = field(default_factory=list)
    transformers: str | None = None
    unreached_count: int = 0  # parameters no checkpoint key reaches by name (merged, renamed by an op)
    changed_count: int = 0  # parameters a key reaches whose loaded values the ops changed
    tensors: int | None = None
    bytes: int | None = None
    files: list[str] = field(default_factory=list)
    max_rss_mb: float | None = None
    seconds: float | None = None
    error: str | None = None
    saved: str | None = None

    def summary(self) -> str:
        """One line for the plan and the README: what was converted, by what, from where."""
        if not self.ok:
            return f"checkpoint conversion check failed: {self.error}"
        if not self.needed and self.converters:
            return (f"transformers {self.transformers}'s conversion ops match {sum(c['keys'] for c in self.converters)}"
                    " checkpoint key(s) but change none of them for this checkpoint (its load compared with the keys "
                    "read one by one): it is delivered as it is")
        if not self.needed:
            return (f"transformers {self.transformers} loads the checkpoint key by key (no conversion op matches a "
                    "key): it is delivered as it is")
        merges = "; ".join(f"{' + '.join(c['source'])} -> {', '.join(c['target'])} ({', '.join(c['operations'])}, "
                           f"{c['keys']} key(s))" for c in self.converters)
        return (f"converted by transformers {self.transformers}'s own load (its conversion mapping: {merges}; "
                f"{self.unreached_count} parameter(s) no key reaches by name, {self.changed_count} changed by the ops) "
                f"into {self.folder}: {self.tensors} tensors in the model's layout, bit-equal to the loaded source")


def convert_checkpoint(runtime_python: str, source: Path, run_dir: Path, *, trust_remote_code: bool = False,
                       timeout: float = 300.0) -> CheckpointConversion:
    """Ask the runtime's transformers whether it converts ``source``'s checkpoint at load; when it does, write the
    converted checkpoint under ``run_dir`` (the probe's own comparison must show it bit-equal)."""
    out = Path(run_dir) / CONVERTED_DIR
    args = ["--model", str(source), "--out", str(out)] + (["--trust-remote-code"] if trust_remote_code else [])
    res = run_probe(runtime_python, "checkpoint_conversion", args, env_extra=PROBE_ENV, timeout=timeout)
    raw, saved = save_probe_output(run_dir, "checkpoint_conversion", res)
    facts = {"converters": raw.get("converters") or [], "transformers": raw.get("transformers"),
             "unreached_count": raw.get("unreached_count") or 0, "changed_count": raw.get("changed_count") or 0,
             "max_rss_mb": raw.get("max_rss_mb"), "seconds": raw.get("seconds"), "saved": saved}
    if not res.ok:
        return CheckpointConversion(ok=False, needed=bool(raw.get("needed")), error=raw.get("error") or res.error,
                                    **facts)
    if not raw.get("needed"):
        return CheckpointConversion(ok=True, **facts)
    return CheckpointConversion(ok=True, needed=True, folder=str(out), tensors=raw.get("tensors"),
                                bytes=raw.get("bytes"), files=raw.get("files") or [], **facts)


def conversion_record(folder: str | Path | None) -> dict[str, Any] | None:
    """The record a converted checkpoint folder holds (None for any other folder)."""
    if not folder:
        return None
    try:
        record = json.loads((Path(folder) / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def converted_from(folder: str | Path | None, source: str | Path) -> bool:
    """Whether ``folder`` is a checkpoint converted from ``source`` (and checked bit-equal to its load)."""
    record = conversion_record(folder)
    return bool(record and record.get("bit_equal")
                and Path(str(record.get("source"))).resolve() == Path(source).resolve())
