"""Whether the vision feature a LLaVA-style source reads from its tower's LAST ``hidden_states`` entry has passed
the tower's post norm, measured in the runtime the source runs in (probe ``vision_feature_norm``).

A new Megatron encoder must end where the source's feature is taken: with the post norm when the source's last
entry carries it, without it when the entry is the raw last layer. Which of the two depends on the transformers
release (4.56–4.57 replace the last entry by the post-normed ``last_hidden_state``; 5.x keep the layer's output for
CLIP/SigLIP towers), so it is not read from the config or the weights. Nothing here knows a model family.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from msmigrate.tools.runtime import run_probe, save_probe_output

PROBE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass
class FeatureNorm:
    ok: bool = False
    last_entry: str | None = None  # "post_norm" | "last_layer" | "neither"
    tower_class: str | None = None
    transformers_version: str | None = None
    saved: str | None = None
    error: str | None = None

    @property
    def post_normed(self) -> bool | None:
        """True / False when measured one way or the other; None when not known."""
        return {"post_norm": True, "last_layer": False}.get(self.last_entry or "") if self.ok else None

    def evidence(self) -> str:
        return (f"the source's {self.tower_class} under transformers {self.transformers_version}: its last "
                f"hidden_states entry is {'the post-normed output' if self.post_normed else 'the last layer output'}"
                if self.post_normed is not None else f"not measured ({self.error or self.last_entry})")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "post_normed": self.post_normed}


def reads_last_entry(cfg: dict[str, Any], vision_cfg: dict[str, Any]) -> bool:
    """Whether the source's ``vision_feature_layer`` names the tower's last ``hidden_states`` entry (-1, or the
    layer count: the entries are the embeddings then one per layer)."""
    layer = cfg.get("vision_feature_layer")
    depth = vision_cfg.get("num_hidden_layers") or vision_cfg.get("depth")
    return isinstance(layer, int) and not isinstance(layer, bool) and (layer == -1 or layer == depth)


def derive_feature_norm(runtime_python: str, source: Path, *, run_dir: Path | None = None,
                        trust_remote_code: bool = False, timeout: float = 300.0) -> FeatureNorm:
    args = ["--model", str(source)] + (["--trust-remote-code"] if trust_remote_code else [])
    res = run_probe(runtime_python, "vision_feature_norm", args, env_extra=PROBE_ENV, timeout=timeout)
    raw, saved = save_probe_output(run_dir, "vision_feature_norm", res)
    if not res.ok:
        return FeatureNorm(error=res.error, saved=saved)
    return FeatureNorm(ok=True, last_entry=raw.get("last_entry"), tower_class=raw.get("tower_class"),
                       transformers_version=raw.get("transformers_version"), saved=saved)
