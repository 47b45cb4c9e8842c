"""Apply the failure catalog's deterministic fixes (closed vocabulary, knowledge/failures/README.md) to a YAML dict,
and the validator's own suggestions for misplaced / misspelled keys."""

from __future__ import annotations

import re
from typing import Any

from msmigrate.tools.module_plan import apply_modules_from_tree, recompute_from_tree

_SUGGESTED_PATH = re.compile(r"`([A-Za-z_][\w.]*)`")


def _parent(cfg: dict[str, Any], path: str, create: bool) -> tuple[dict[str, Any] | None, str]:
    *heads, leaf = path.split(".")
    node: Any = cfg
    for h in heads:
        if not isinstance(node, dict):
            return None, leaf
        if h not in node:
            if not create:
                return None, leaf
            node[h] = {}
        node = node[h]
    return (node if isinstance(node, dict) else None), leaf


def get_path(cfg: dict[str, Any], path: str) -> Any:
    parent, leaf = _parent(cfg, path, create=False)
    return None if parent is None else parent.get(leaf)


def set_path(cfg: dict[str, Any], path: str, value: Any) -> None:
    parent, leaf = _parent(cfg, path, create=True)
    if parent is not None:
        parent[leaf] = value


def delete_path(cfg: dict[str, Any], path: str) -> Any:
    parent, leaf = _parent(cfg, path, create=False)
    return None if parent is None else parent.pop(leaf, None)


def apply_action(cfg: dict[str, Any], action: dict[str, Any], tree: dict[str, Any] | None) -> str | None:
    """Apply one action in place; returns a description, or None when it does not apply."""
    kind = action.get("action")
    if kind == "set_yaml":
        if get_path(cfg, action["path"]) == action["value"]:
            return None
        set_path(cfg, action["path"], action["value"])
        return f"set {action['path']} = {action['value']!r}"
    if kind == "delete_yaml_key" and get_path(cfg, action["path"]) is not None:
        delete_path(cfg, action["path"])
        return f"deleted {action['path']}"
    if kind == "rename_yaml_key" and get_path(cfg, action["from"]) is not None:
        set_path(cfg, action["to"], delete_path(cfg, action["from"]))
        return f"moved {action['from']} → {action['to']}"
    if kind == "wrap_yaml_list":
        value = get_path(cfg, action["path"])
        if value is not None and not isinstance(value, list):
            set_path(cfg, action["path"], [value])
            return f"wrapped {action['path']} in a list"
    if kind == "add_collator_id":
        path = "data.dataloader_param.collate_param.collator_id"
        if get_path(cfg, path) is None:
            set_path(cfg, path, action["value"])
            return f"set {path} = {action['value']!r}"
    if kind == "apply_modules_from_tree" and tree:
        set_path(cfg, "parallel.fsdp_plan.apply_modules", apply_modules_from_tree(tree))
        return "recomputed parallel.fsdp_plan.apply_modules from the module tree"
    if kind == "recompute_apply_modules_from_tree" and tree:
        patterns = recompute_from_tree(tree)
        set_path(cfg, "features.recompute_plan.apply_modules", patterns)
        set_path(cfg, "features.recompute", bool(patterns))
        return "recomputed features.recompute_plan.apply_modules from the module tree"
    return None


# findings about a key's value (not its place): the repair re-derives the value; of those, the ones where the target's
# own default is an accepted value when the draft has none to give (a range or a consistency check such as lr_min
# above lr: the defaults satisfy them), so the key may go
_VALUE_FINDINGS = ("value-out-of-range", "bad-value", "weakened-train-iters", "weakened-zero-lr", "weakened-all-frozen",
                   "weakened-all-blocks-frozen", "checkpoint-state-absent", "precision-diverges", "attn-unsupported",
                   "attn-unavailable", "type-mismatch", "bad-type", "bad-dtype", "optimizer-recipe",
                   "optimizer-decay-groups", "data-order-recipe", "freeze-recipe")
_DEFAULT_ACCEPTED = ("value-out-of-range", "bad-value", "optimizer-recipe", "optimizer-decay-groups")
# a registry id the YAML names that nobody registers: the draft's id is the one the run's plan registered (the model
# phase's plugin, the data path it chose), so it is set back; never deleted (the key is required)
_REGISTRY_FINDINGS = ("model-id-unregistered", "model-id-outside-plugin", "dataset-type-unregistered",
                      "dataset-type-outside-plugin", "template-unknown", "template-unregistered", "collator-unknown",
                      "collator-unregistered")


def restore_values(cfg: dict[str, Any], findings: list[dict[str, Any]],
                   reference: dict[str, Any] | None) -> list[str]:
    """A key whose value G3 rejects (out of range, weakened) gets the value the config is derived with (the draft a
    first visit writes from the similar example); a key the draft does not set is removed, so the target's own
    default applies (a default the range check accepts: it flags a key only against a positive default or the
    target's own check)."""
    done = []
    for f in findings:
        if f.get("severity") != "error" or f.get("code") not in _VALUE_FINDINGS + _REGISTRY_FINDINGS or \
                get_path(cfg, f["path"]) is None:
            continue
        wanted = get_path(reference, f["path"]) if reference else None
        if wanted is not None and wanted != get_path(cfg, f["path"]):
            set_path(cfg, f["path"], wanted)
            done.append(f"set {f['path']} = {wanted!r} (the value the config is derived with; {f['code']})")
        elif f.get("code") in _DEFAULT_ACCEPTED:  # (a draft derived from this very YAML repeats the value)
            delete_path(cfg, f["path"])
            done.append(f"deleted {f['path']} ({f['code']}; the target's default applies)")
    return done


def raise_minimums(cfg: dict[str, Any], findings: list[dict[str, Any]]) -> list[str]:
    """A gate finding that carries the smallest value its key needs (``minimum``: G2's cutoff check measured the
    longest sample whose media the cut loses) raises the key to it, as data, not parsed from the message; a key
    already at or above it is left alone."""
    done = []
    for f in findings:
        need = f.get("minimum")
        if f.get("severity") != "error" or not isinstance(need, int) or not f.get("path"):
            continue
        have = get_path(cfg, f["path"])
        if isinstance(have, int) and not isinstance(have, bool) and have >= need:
            continue
        set_path(cfg, f["path"], need)
        done.append(f"set {f['path']} = {need} (was {have}; {f.get('code')})")
    return done


def nearest_paths(path: str, suggested: list[str]) -> list[str]:
    """Of the validator's suggested paths, those sharing the longest leading run of sections with ``path``: a key
    written one level off belongs in its own section (``data.dataset_param.template`` →
    ``data.dataset_param.basic_parameters.template``, not the validation set's twin)."""
    def shared(other: str) -> int:
        n = 0
        for a, b in zip(path.split("."), other.split(".")):
            if a != b:
                break
            n += 1
        return n

    best = max((shared(p) for p in suggested), default=0)
    return list(dict.fromkeys(p for p in suggested if shared(p) == best))


def apply_findings(cfg: dict[str, Any], findings: list[dict[str, Any]]) -> list[str]:
    """Move misplaced / misspelled keys to the path the validator suggests (only when it names exactly one path)."""
    done = []
    for f in findings:
        if f.get("severity") != "error" or f.get("code") not in ("misplaced-key", "unknown-key"):
            continue
        paths = nearest_paths(f["path"], [p for p in _SUGGESTED_PATH.findall(f.get("suggestion") or "")
                                          if "." in p and p != f["path"]])
        if len(set(paths)) == 1 and get_path(cfg, f["path"]) is not None and get_path(cfg, paths[0]) is None:
            set_path(cfg, paths[0], delete_path(cfg, f["path"]))
            done.append(f"moved {f['path']} → {paths[0]} (validator suggestion)")
        elif len(set(paths)) == 1 and get_path(cfg, f["path"]) is not None and f.get("code") == "unknown-key":
            # a misspelt copy of a key the YAML already sets: the framework never reads it, the real key stays
            dropped = delete_path(cfg, f["path"])
            done.append(f"deleted {f['path']} (was {dropped!r}: a key the target does not know, next to "
                        f"{paths[0]} = {get_path(cfg, paths[0])!r}, which it reads)")
    return done


def drop_repeated_keys(text: str, findings: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The YAML text without the later occurrence of each key G3 found written twice in one mapping
    (``yaml-duplicate-key``: its line is the repeat's), when that line is one ``key: value`` line; the first
    occurrence stays — what the config was written with before a pasted block repeated it — and the value
    checks that follow hold it to the derived config like any other."""
    lines = text.splitlines(keepends=True)
    drop, notes = set(), []
    for f in findings:
        line = f.get("line")
        if f.get("code") != "yaml-duplicate-key" or not isinstance(line, int) or not 0 < line <= len(lines):
            continue
        leaf = str(f.get("path", "")).rsplit(".", 1)[-1]
        said = lines[line - 1]
        nested = line < len(lines) and len(lines[line]) - len(lines[line].lstrip()) > len(said) - len(said.lstrip())
        if said.strip().startswith(f"{leaf}:") and said.split(":", 1)[1].strip() and not nested:
            drop.add(line)
            notes.append(f"deleted line {line} (`{said.strip()[:60]}`: {f['path']} written a second time; the first "
                         f"stays)")
    return "".join(ln for i, ln in enumerate(lines, 1) if i not in drop), notes


def apply_failure(cfg: dict[str, Any], failure: dict[str, Any] | None, findings: list[dict[str, Any]],
                  tree: dict[str, Any] | None, reference: dict[str, Any] | None = None) -> list[str]:
    if not failure:
        return []
    actions = failure.get("autofix") or []
    actions = [actions] if isinstance(actions, dict) else list(actions)
    done = [d for d in (apply_action(cfg, a, tree) for a in actions) if d]
    return (done + apply_findings(cfg, findings) + restore_values(cfg, findings, reference)
            + raise_minimums(cfg, findings))


def restore_named(cfg: dict[str, Any], keys: list[str] | None, reference: dict[str, Any] | None) -> list[str]:
    """The last resort of a config repair, where nothing more specific applies: each YAML key the failure names (the
    classify node's ``keys``) whose value departs from the value the config is derived with (the draft from the
    similar example and the source) gets that value back; a key the draft does not write goes, so the target's own
    default applies. Keys whose value is the draft's are left alone: the failure is then not theirs to fix."""
    if reference is None:
        return []
    done = []
    for key in keys or []:
        now, wanted = get_path(cfg, key), get_path(reference, key)
        if now is None or now == wanted:
            continue
        if wanted is None:
            delete_path(cfg, key)
            done.append(f"deleted {key} (the failure names it; the config is derived without it)")
        else:
            set_path(cfg, key, wanted)
            done.append(f"set {key} = {wanted!r} (the failure names it; the value the config is derived with)")
    return done
