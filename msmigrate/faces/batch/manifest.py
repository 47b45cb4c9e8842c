"""The batch manifest: a list of migrations, each a spec file path or an inline spec, with an optional id.

```yaml
defaults: {policy: rules}          # optional, merged under every inline spec and over nothing in spec files
items:
  - spec: specs/qwen2_vl.yaml      # path relative to the manifest
  - id: llava-try2
    spec: {source: src/llava, target: mm, model_name: llava}
```
A bare YAML list of items is accepted too. Ids default to the spec's model_name, made unique with -2, -3 …"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msmigrate.agent.config import RunSpec, unknown_key_error
from msmigrate.agent.user_yaml import load_user_yaml_file

_ID_OK = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class BatchItem:
    id: str
    spec: RunSpec  # paths resolved (absolute)


@dataclass
class Manifest:
    items: list[BatchItem]
    error: str | None = None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_manifest(path: Path) -> Manifest:
    path = Path(path).resolve()
    try:
        raw = load_user_yaml_file(path, "manifest")
    except (OSError, ValueError) as exc:
        return Manifest([], f"cannot read manifest {path}: {exc}")
    if isinstance(raw, list):
        raw = {"items": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("items"), list) or not raw["items"]:
        return Manifest([], "manifest needs a non-empty list 'items' (or is that list itself)")
    bad = unknown_key_error(raw, ("defaults", "items"), "the manifest") or unknown_key_error(
        raw.get("defaults"), RunSpec, "defaults")
    if bad:
        return Manifest([], bad)
    defaults = raw.get("defaults") or {}
    items: list[BatchItem] = []
    seen: set[str] = set()
    for n, entry in enumerate(raw["items"]):
        if isinstance(entry, str):
            entry = {"spec": entry}
        if not isinstance(entry, dict) or "spec" not in entry:
            return Manifest([], f"item {n}: expected a mapping with 'spec' (a path or an inline spec)")
        bad = unknown_key_error(entry, ("id", "spec"), f"item {n}")
        if bad:
            return Manifest([], bad)
        try:
            if isinstance(entry["spec"], dict):
                spec = RunSpec.from_dict(_merge(defaults, entry["spec"]), path.parent, f"item {n} spec")
            else:
                spec = RunSpec.load(path.parent / str(entry["spec"]))
        except (OSError, ValueError) as exc:
            return Manifest([], f"item {n}: invalid spec: {exc}")
        base = _ID_OK.sub("-", str(entry.get("id") or spec.model_name)).strip("-")[:48] or f"item{n}"
        item_id, k = base, 2
        while item_id in seen:
            item_id, k = f"{base}-{k}", k + 1
        seen.add(item_id)
        items.append(BatchItem(item_id, spec))
    return Manifest(items)
