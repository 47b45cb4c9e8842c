"""Where a plugin-route config's weights come from, and the training entries that make it start from the user's
checkpoint (DESIGN decision 16).

The framework's contract (its FSDP2 trainer): with ``init_model_with_meta_device: true`` the model is built on the
meta device and its parameters are filled from ``training.load``; a folder holding ``model.safetensors`` or
``model.safetensors.index.json`` is read as Hugging Face weights when ``load_format`` is ``auto`` (or ``hf``), and
such a load restores weights only, so it needs ``no_load_optim`` and ``no_load_rng``. Without ``training.load`` the
meta-built parameters get a random init. With meta init off, ModelHub loads ``model.model_name_or_path`` with
``from_pretrained`` instead.

The folder is the source's, unless transformers converts the source's checkpoint at load (its conversion ops, which
the target's key-by-key loader does not apply): then the plan holds the converted checkpoint the plan node wrote
(``tools/checkpoint_conversion.py``) and ``weights_folder`` names it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SAFE_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
HF_LOAD_KEYS = ("load", "load_format", "no_load_optim", "no_load_rng")


def hf_weight_dir(path: str | Path | None) -> bool:
    """Whether ``path`` is a folder the framework reads as Hugging Face weights (its ``load_format: auto`` test)."""
    if not path:
        return False
    folder = Path(path)
    return folder.is_dir() and any((folder / name).is_file() for name in SAFE_WEIGHTS)


def weights_folder(plan: dict[str, Any] | None, source: Path) -> Path:
    """The folder the delivered config loads: the plan's converted checkpoint where it has one, else the source."""
    converted = ((plan or {}).get("weights") or {}).get("folder")
    return Path(converted) if converted and hf_weight_dir(converted) else Path(source)


def hf_load_entries(weights: str) -> dict[str, Any]:
    """The ``training`` entries that load the HF folder ``weights`` into the meta-built model."""
    return {"init_model_with_meta_device": True, "load": weights, "load_format": "auto", "no_load_optim": True,
            "no_load_rng": True}


def delivered_weights(source: Path) -> dict[str, Any]:
    """The ``training`` entries of a delivered config for the source folder: its safetensors loaded into the
    meta-built model (the framework's large-model idiom); a source without safetensors is loaded by
    ``from_pretrained`` of ``model_name_or_path`` (meta init off, no ``load``)."""
    if hf_weight_dir(source):
        return hf_load_entries(str(source))
    return {"init_model_with_meta_device": False, "load": None}


def _training(cfg: dict[str, Any]) -> dict[str, Any]:
    training = cfg.get("training") if isinstance(cfg, dict) else None
    return training if isinstance(training, dict) else {}


def weights_origin(cfg: dict[str, Any]) -> tuple[str, str | None]:
    """How a (launched) config's model gets its weights: ("hf-load", folder), ("dcp-load", folder),
    ("from_pretrained", folder) or ("random", None)."""
    training = _training(cfg)
    load = training.get("load")
    meta = bool(training.get("init_model_with_meta_device"))
    if load:
        fmt = training.get("load_format") or "auto"
        return ("hf-load" if fmt == "hf" or (fmt == "auto" and hf_weight_dir(load)) else "dcp-load"), str(load)
    if not meta:
        return "from_pretrained", (cfg.get("model") or {}).get("model_name_or_path")
    return "random", None


def single_process_weights(cfg: dict[str, Any]) -> dict[str, Any]:
    """Overlay entries for a launch that must build on the meta device (one process on CPU) so that it starts from
    the same weights as ``cfg``: a config that loads by ``from_pretrained`` gets the same folder as an HF load."""
    kind, folder = weights_origin(cfg)
    if kind == "from_pretrained" and hf_weight_dir(folder):
        return hf_load_entries(str(folder))
    return {}


def weights_problems(cfg: dict[str, Any], summary: dict[str, Any], label: str) -> list[str]:
    """What a launch's log says against the weights its config asked for: an HF load must log its folder and leave
    no parameter out."""
    kind, folder = weights_origin(cfg)
    if kind != "hf-load":
        return []
    problems = []
    if not summary.get("hf_weights_loaded"):
        problems.append(f"{label}: the config loads HF weights from {folder} but the log has no "
                        "'Loading HF safetensors' line")
    if summary.get("hf_weights_missing"):
        problems.append(f"{label}: {summary['hf_weights_missing']}")
    return problems


def weights_note(cfg: dict[str, Any]) -> str:
    """One line for the evidence: where the launched model's weights came from."""
    kind, folder = weights_origin(cfg)
    return {"hf-load": f"HF weights loaded from {folder}", "dcp-load": f"DCP checkpoint loaded from {folder}",
            "from_pretrained": f"from_pretrained({folder})",
            "random": "random init (meta device, no training.load)"}[kind]


def single_process_training(cfg: dict[str, Any], custom: bool = False) -> dict[str, Any]:
    """The ``training`` overlay that makes a one-process gate launch (G4, G5) take the path ``cfg`` takes: a
    from_pretrained of a safetensors folder becomes the same folder's HF load on the meta-built model (the
    framework's large-model idiom, same weights); every other config keeps its own build path — its meta init and
    load as written, or from_pretrained of what it names — never a meta build without the load it does not have
    (a random init the delivered config never trains, where an ``_init_weights`` that writes into DTensors fails)."""
    weights = {} if custom else single_process_weights(cfg)
    return {**weights, "init_model_with_meta_device": True} if weights else {}


def delivered_training(delivered: dict[str, Any] | None, baseline: dict[str, Any] | None,
                       source: Path) -> dict[str, Any]:
    """The delivered config's ``training`` entries: the run's YAML once written; before that, the similar example's
    with the weights entries the draft writes for ``source`` (``delivered_weights``)."""
    if isinstance(delivered, dict):
        return _training(delivered)
    return {**_training(baseline or {}), **delivered_weights(source)}


def trains_fresh_init(training: dict[str, Any]) -> bool:
    """Whether a config with these ``training`` entries trains the meta-built model from ``init_weights`` (meta init
    without ``training.load``: a random init). A config that loads weights, or builds with from_pretrained, never
    calls init_weights on a meta build, so a gap there is no fact about the model it trains."""
    return weights_origin({"training": training})[0] == "random"


def load_settings(delivered: dict[str, Any] | None, baseline: dict[str, Any] | None,
                  source: Path) -> dict[str, Any] | None:
    """The HF load the delivered config makes its trainer run — folder, ``load_strict``,
    ``load_rank0_and_broadcast`` — or None when it loads no HF folder into a meta-built model. ``delivered``: the
    run's YAML once written (its own entries decide); before that, the similar example's entries (round-tripped into
    the delivered YAML) with the weights entries the draft writes for ``source`` (``delivered_weights``)."""
    training = delivered_training(delivered, baseline, source)
    if not training.get("init_model_with_meta_device") or weights_origin({"training": training})[0] != "hf-load":
        return None
    return {"load": str(training["load"]), "load_strict": bool(training.get("load_strict")),
            "load_rank0_and_broadcast": bool(training.get("load_rank0_and_broadcast"))}
