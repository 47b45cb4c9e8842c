"""Structural checks of a YAML config against the target's schema: unknown / misplaced keys, types, Literals,
missing required keys. This is the strict layer the framework lacks: its loader auto-registers any unknown key as a
"dynamic field" and carries on, so a misplaced ``model.loss_cfg`` or a typo'd ``trainnig:`` section is silently
ignored (contract §2.1, §13 #30).

Type checks follow pydantic v2 *lax* mode (what ``Arguments(**yaml)`` accepts): numeric strings pass for int/float,
``"true"``/``"yes"``/0/1 pass for bool, but an int does not pass for ``str`` and a string does not pass for a list.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from msmigrate.tools.module_match import module_name_match
from msmigrate.tools.yaml_validator.findings import Finding, join_path
from msmigrate.tools.yaml_validator.schema import iter_paths, type_label

# Keys that are not declared but that the target reads on purpose (exact paths) → the type they must have.
KNOWN_DYNAMIC = {
    "features.recompute": {"kind": "bool"},  # the real recompute switch, read with getattr (contract §3.4)
}
# Declared but not read on the plugin route (contract §3.1, §3.5): never the best suggestion for a misplaced key.
UNUSED_ON_ROUTE = ("parallel.recompute", "parallel.recompute_plan", "parallel.tp_plan", "training.profile",
                   "training.ckpt_manager", "training.save_steps", "training.max_steps",
                   "training.load_checkpoint_path", "training.enable_full_determinism")
# Names used by the Megatron-bridge route / other frameworks for what the plugin route calls differently.
KNOWN_RENAMES = {
    "context_parallel_size": "parallel.ulysses_parallel_size",
    "sharding_size": "parallel.fully_shard_parallel_size",
    "sub_modules_to_wrap": "parallel.fsdp_plan.apply_modules",
}
# Undeclared keys here are forwarded (collator constructor kwargs; contract §3.3) — allowed unless a typo.
FORWARDED_PREFIXES = ("data.dataloader_param.collate_param",)
# Undeclared keys here may be read by custom code (custom-path models receive ModelArguments; custom datasets get
# the whole dataset_param dict) — warnings, not errors, unless misplaced or a near-typo of a declared key.
PASSTHROUGH_PREFIXES = ("model", "data.dataset_param", "data.val_dataset_param")
_BOOL_STRINGS = {"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"}


@dataclass
class SchemaChecker:
    schema_root: dict
    dataset_type: str | None = None
    extra_allowed: tuple[str, ...] = ()
    findings: list[Finding] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._paths = [p for p, _ in iter_paths(self.schema_root)]
        self._clean_paths = [p.replace("[]", "") for p in self._paths] + list(KNOWN_DYNAMIC)

    # ---------------------------------------------------------------- entry
    def check(self, data: dict) -> list[Finding]:
        self._check_model(self.schema_root, data, "")
        return self.findings

    def _add(self, severity: str, code: str, path: str, message: str, suggestion: str | None = None) -> None:
        self.findings.append(Finding(severity, code, path, message, suggestion))  # lines are filled in by the core

    # ---------------------------------------------------------------- mappings
    def _check_model(self, node: dict, value: dict, path: str) -> None:
        fields = node.get("fields", {})
        if node.get("recursive"):
            return
        for key, sub in value.items():
            key = str(key)
            child = join_path(path, key)
            if key in fields:
                self._check_value(fields[key]["type"], sub, child)
            else:
                self._unknown_key(path, key, child, sub, fields)
        for name, fnode in fields.items():
            if name in value:
                continue
            if fnode.get("required"):
                self._add("error", "missing-required", join_path(path, name),
                          f"required key `{join_path(path, name)}` ({type_label(fnode['type'])}) is missing; the "
                          "target fails with `Field required [type=missing]`",
                          f"add `{name}:` under `{path or 'the top level'}`")
            elif fnode.get("default_factory") and fnode["type"].get("kind") == "model":
                # absent section built from its defaults: its own required keys are still required
                self._check_model(fnode["type"], {}, join_path(path, name))

    def _unknown_key(self, parent: str, key: str, child: str, sub: Any, fields: dict) -> None:
        if child in KNOWN_DYNAMIC:
            self._check_value(KNOWN_DYNAMIC[child], sub, child)
            return
        if any(module_name_match(p, child) for p in self.extra_allowed):
            return
        clean_parent = parent.split("[")[0]
        passthrough = clean_parent.startswith(PASSTHROUGH_PREFIXES) and not (
            clean_parent.startswith("data.") and self.dataset_type == "huggingface")
        forwarded = clean_parent.startswith(FORWARDED_PREFIXES)
        elsewhere = [p for p in self._clean_paths if p.rsplit(".", 1)[-1] == key and p != child]
        # In pass-through sections custom code may read look-alike names (``num_layers`` next to the declared
        # ``mtp_num_layers``), so only a very close spelling counts as a typo there.
        near_typo = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.88 if passthrough or forwarded else 0.8)
        if elsewhere and not near_typo:
            best = sorted(elsewhere, key=lambda p: (p in UNUSED_ON_ROUTE, p.count("."), p))[:3]
            # a custom dataset builder receives the whole dataset_param dict and may read such a key on purpose
            severity = "warning" if passthrough and clean_parent.startswith("data.") else "error"
            self._add(severity, "misplaced-key", child,
                      f"`{child}` is not a field of `{clean_parent or 'the top level'}`, but `{key}` exists under "
                      f"another section; the target would register it as a dynamic field and ignore it",
                      "did you mean " + " or ".join(f"`{p}`" for p in best) + "?")
            return
        if forwarded:
            if near_typo:
                self._add("warning", "unknown-key", child,
                          f"`{child}` is forwarded to the collator constructor as a keyword argument, but it is "
                          f"very close to the declared `{join_path(parent, near_typo[0])}`",
                          f"did you mean `{join_path(parent, near_typo[0])}`?")
            return
        suggestion = self._suggest(parent, key, fields)
        if passthrough and not near_typo and not self._near_leaf_elsewhere(key):
            self._add("warning", "unknown-key-passthrough", child,
                      f"`{child}` is not declared by the target; only code that reads it explicitly (a custom-path "
                      "model, an `overwrite_transformer_config` hook, a custom dataset) will see it", suggestion)
            return
        self._add("error", "unknown-key", child,
                  f"`{child}` is not a declared field; the target silently ignores it (auto-registered dynamic "
                  "field)", suggestion)

    def _leaves(self) -> dict[str, str]:
        """leaf name → shallowest full path having it."""
        leaves: dict[str, str] = {}
        for p in sorted(self._clean_paths, key=lambda p: p.count(".")):
            leaves.setdefault(p.rsplit(".", 1)[-1], p)
        return leaves

    def _near_leaf_elsewhere(self, key: str) -> bool:
        return bool(difflib.get_close_matches(key, list(self._leaves()), n=1, cutoff=0.88))

    def _suggest(self, parent: str, key: str, fields: dict) -> str | None:
        """Closest valid key: a known rename, else a sibling, else a similarly named key in another section."""
        if key in KNOWN_RENAMES:
            return f"did you mean `{KNOWN_RENAMES[key]}`? ({key} is a spelling of another route)"
        sibling = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
        if sibling:
            return f"did you mean `{join_path(parent, sibling[0])}`?"
        leaves = self._leaves()
        other = difflib.get_close_matches(key, list(leaves), n=1, cutoff=0.75)
        return f"did you mean `{leaves[other[0]]}`?" if other else None

    # ---------------------------------------------------------------- values
    def _check_value(self, tnode: dict, value: Any, path: str) -> None:
        problem = self._type_problem(tnode, value, path, record=True)
        if problem is not None:
            code, message = problem
            self._add("error", code, path, message, None)

    def _type_problem(self, tnode: dict, value: Any, path: str, record: bool) -> tuple[str, str] | None:
        """None if ``value`` is accepted; else (code, message). With ``record`` nested findings are emitted."""
        kind = tnode.get("kind")
        shown = repr(value) if len(repr(value)) < 80 else repr(value)[:77] + "..."
        if kind in ("any", "other"):
            return None
        if kind == "none":
            return None if value is None else ("type-mismatch", f"`{path}` must be null, got {shown}")
        if kind == "optional":
            return None if value is None else self._type_problem(tnode["inner"], value, path, record)
        if kind == "union":
            for option in tnode["options"]:
                if self._type_problem(option, value, path, record=False) is None:
                    if record:
                        self._type_problem(option, value, path, record=True)
                    return None
            return ("type-mismatch", f"`{path}` = {shown} matches none of {type_label(tnode)}")
        if kind == "literal":
            # True == 1 in Python; a Literal of strings/ints must not accept a YAML boolean and vice versa
            if any(c == value and isinstance(c, bool) == isinstance(value, bool) for c in tnode["choices"]):
                return None
            choices = ", ".join(repr(c) for c in tnode["choices"])
            return ("bad-literal", f"`{path}` = {shown} is not allowed; input should be one of {choices}")
        if value is None:
            return ("type-mismatch", f"`{path}` is null but must be {type_label(tnode)}")
        if kind == "model":
            if not isinstance(value, dict):
                return ("type-mismatch", f"`{path}` must be a mapping ({tnode.get('class')}), got {shown}")
            if record:
                self._check_model(tnode, value, path)
            return None
        if kind == "list":
            if not isinstance(value, list):
                return ("type-mismatch", f"`{path}` = {shown}: input should be a valid list (write a YAML list)")
            for i, item in enumerate(value):
                problem = self._type_problem(tnode["item"], item, f"{path}[{i}]", record)
                if problem is not None:
                    if not record:
                        return problem
                    self._add("error", problem[0], f"{path}[{i}]", problem[1])
            return None
        if kind == "dict":
            return None if isinstance(value, dict) else ("type-mismatch", f"`{path}` must be a mapping, got {shown}")
        if _scalar_ok(kind, value):
            return None
        return ("type-mismatch", f"`{path}` = {shown}: input should be a valid {_KIND_WORD.get(kind, kind)}")


_KIND_WORD = {"int": "integer", "float": "number", "bool": "boolean", "str": "string"}


def _scalar_ok(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        if isinstance(value, bool):
            return True
        if isinstance(value, int) or isinstance(value, float):
            return value in (0, 1)
        return isinstance(value, str) and value.strip().lower() in _BOOL_STRINGS
    if kind == "int":
        if isinstance(value, (bool, int)):
            return True
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, str) and _parses(int, value)
    if kind == "float":
        if isinstance(value, (bool, int, float)):
            return True
        return isinstance(value, str) and _parses(float, value)
    return True


def _parses(conv, text: str) -> bool:
    try:
        conv(text.strip())
        return True
    except ValueError:
        return False
