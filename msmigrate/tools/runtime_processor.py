"""The processor class the target runtime really loads for a source (``probes/processor_class.py``).

What a folder declares (``processor_config.json``, ``processor_class``) and what ``AutoProcessor`` returns can differ:
a remote-code checkpoint that ships a tokenizer and an image-processor config but no processor class gets a bare
tokenizer back, and then the huggingface dataset has nothing that turns images into pixels. The plan asks the
runtime instead of guessing from file names.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from msmigrate.tools.runtime import run_probe, save_probe_output

PROBE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass
class RuntimeProcessor:
    ok: bool  # the probe ran (a folder AutoProcessor cannot load is ok=True, loaded=False)
    loaded: bool = False
    processor_class: str | None = None
    kind: str | None = None  # processor | tokenizer | image_processor | other
    parts: dict[str, str] = field(default_factory=dict)
    handles_images: bool = False
    load_error: str | None = None
    trust_remote_code: bool = False
    saved: str | None = None
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def note(self) -> str:
        """One line for the plan's reasons: what loads, and what it means for image samples."""
        if not self.ok:
            return f"processor the runtime loads: unknown (probe failed: {self.error})"
        if not self.loaded:
            return f"processor the runtime loads: AutoProcessor fails ({self.load_error})"
        if self.kind == "processor" and self.handles_images:
            return (f"processor the runtime loads: AutoProcessor → {self.processor_class} (a processor with "
                    f"{', '.join(sorted(self.parts))})")
        return (f"processor the runtime loads: AutoProcessor → {self.processor_class}, a {self.kind} without an "
                f"image processor: the huggingface dataset cannot turn this source's images into pixels; the data "
                f"phase needs a processor folder the YAML points to, or a dataset plugin")


def probe_runtime_processor(runtime_python: str, source: Path, *, trust_remote_code: bool = False,
                            run_dir: Path | None = None, timeout: float = 300.0) -> RuntimeProcessor:
    args = [str(source)] + (["--trust-remote-code"] if trust_remote_code else [])
    res = run_probe(runtime_python, "processor_class", args, env_extra=PROBE_ENV, timeout=timeout)
    raw, saved = save_probe_output(run_dir, "processor_class", res)
    if not res.ok:
        return RuntimeProcessor(ok=False, error=res.error, trust_remote_code=trust_remote_code, saved=saved)
    return RuntimeProcessor(ok=True, loaded=bool(raw.get("loaded")), processor_class=raw.get("class"),
                            kind=raw.get("kind"), parts=raw.get("parts") or {},
                            handles_images=bool(raw.get("handles_images")), load_error=raw.get("load_error"),
                            trust_remote_code=trust_remote_code, saved=saved)
