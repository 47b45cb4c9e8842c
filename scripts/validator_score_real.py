"""Score the config validator on the real MindSpeed-MM's own examples: each plugin-route example YAML (launched by
the generic trainer) is mutated in ways the framework itself would not catch or would catch late, and the
validator must report an error at the mutated key path; the unmutated examples show its error count (findings on
configs the maintainers ship: some are real problems — unregistered ids, keys the trainer ignores).

    python scripts/validator_score_real.py --target DEST/MindSpeed-MM --runtime-python DEST/runtime/bin/python [--json]

Prints one line per mutation and the score (detected / mutations). Mutations are generic (no per-example table):
a typo in a declared key, a declared key moved to another section, an unregistered model_id, a bad literal for the
dataloader mode, an invalid brace pattern, an unknown top-level section."""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

import yaml

from msmigrate.tools.yaml_validator import schema_from_target, validate_config
from msmigrate.tools.yaml_validator.entry_point import GENERIC_TRAINER, entry_point_of


def mutations(cfg: dict) -> list[tuple[str, str, dict]]:
    """(name, key path that must be flagged, mutated copy)."""
    out = []

    def variant(name, path, fn):
        c = copy.deepcopy(cfg)
        if fn(c) is not False:
            out.append((name, path, c))

    training = cfg.get("training") or {}
    if "micro_batch_size" in training:
        variant("typo", "training.micro_batch_sise",
                lambda c: c["training"].__setitem__("micro_batch_sise", c["training"].pop("micro_batch_size")))
    if "lr" in training:
        variant("misplaced", "model.lr", lambda c: c.setdefault("model", {}).__setitem__("lr", c["training"].pop("lr")))
    if (cfg.get("model") or {}).get("model_id"):
        variant("unregistered-model-id", "model.model_id",
                lambda c: c["model"].__setitem__("model_id", c["model"]["model_id"] + "_nonexistent"))
    if ((cfg.get("data") or {}).get("dataloader_param") or {}).get("dataloader_mode"):
        variant("bad-literal", "data.dataloader_param.dataloader_mode",
                lambda c: c["data"]["dataloader_param"].__setitem__("dataloader_mode", "samplr"))
    apply = ((cfg.get("parallel") or {}).get("fsdp_plan") or {}).get("apply_modules")
    if isinstance(apply, list) and apply:
        variant("invalid-pattern", "parallel.fsdp_plan.apply_modules[0]",
                lambda c: c["parallel"]["fsdp_plan"]["apply_modules"].__setitem__(0, "model.layers.{x-y}"))
    variant("unknown-section", "trainig", lambda c: c.__setitem__("trainig", {"lr": 1.0e-5}))
    return out


def plugin_route_examples(target: Path) -> list[Path]:
    found = []
    for path in sorted((target / "examples").rglob("*.yaml")):
        try:
            cfg = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            continue
        if isinstance(cfg, dict) and {"model", "data", "training"} <= set(cfg) and \
                entry_point_of(path, target) in (GENERIC_TRAINER, None):
            found.append(path)
    return found


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True, type=Path)
    ap.add_argument("--runtime-python", required=True)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    target = args.target.resolve()
    schema = schema_from_target(target, args.runtime_python)
    if not schema.ok:
        print(f"cannot derive the schema: {schema.error}", file=sys.stderr)
        return 2
    rows, clean = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for example in plugin_route_examples(target):
            rel = str(example.relative_to(target))
            base = validate_config(example, schema=schema.data["schema"], target_root=target)
            clean.append({"example": rel, "errors": sum(f["severity"] == "error" for f in base.data["findings"])})
            cfg = yaml.safe_load(example.read_text())
            for name, path, mutated in mutations(cfg):
                copy_path = example.parent / f".msmigrate_mutation_{name}.yaml"  # next to it: same entry point
                copy_path.write_text(yaml.safe_dump(mutated, sort_keys=False))
                try:
                    res = validate_config(copy_path, schema=schema.data["schema"], target_root=target)
                finally:
                    copy_path.unlink()
                hit = any(f["severity"] == "error" and f["path"] == path for f in res.data["findings"])
                rows.append({"example": rel, "mutation": name, "path": path, "detected": hit})
                if not args.json:
                    print(f"{'ok  ' if hit else 'MISS'} {rel} {name} {path}")
    detected = sum(r["detected"] for r in rows)
    if args.json:
        print(json.dumps({"detected": detected, "mutations": len(rows), "mutation_rows": rows, "clean": clean}, indent=2))
    else:
        print(f"unmutated examples: {len(clean)}, with errors: {sum(c['errors'] > 0 for c in clean)}")
        print(f"score: {detected}/{len(rows)} mutations detected at their key path")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
