"""``model.attn_implementation`` chosen among the implementations the source's model classes support.

transformers refuses a requested implementation at build time on every PreTrainedModel that does not declare it
(``_supports_sdpa``, ``_supports_flash_attn``): a YAML asking for ``sdpa`` of a class that lacks the flag passes the
schema checks and fails the first training launch. The support is read from the built plugin class (the module-tree
probe's ``attention_support``: the delivered classes, flags the model phase added included), else from the source's
remote code by AST (the plan's ``attention_flags_missing``)."""

from __future__ import annotations

from typing import Any

ATTN_PATH = "model.attn_implementation"
FRAMEWORK_DEFAULT = "flash_attention_2"  # what the target's ModelArguments uses when the key is absent
PREFERRED = ("sdpa", "eager")  # eager needs no flag: every class has it


def lacking(plan: dict[str, Any], tree: dict[str, Any] | None) -> tuple[dict[str, list[str]], str]:
    """(implementation -> the classes that do not declare it, where that was read)."""
    support = (tree or {}).get("attention_support")
    if isinstance(support, dict):
        return dict(support.get("lacks") or {}), f"the built class {(tree or {}).get('model_class') or ''}".strip()
    return dict(plan.get("attention_flags_missing") or {}), "the source's remote code"


def supported(plan: dict[str, Any], tree: dict[str, Any] | None) -> list[str]:
    lacks, _ = lacking(plan, tree)
    return [impl for impl in ("eager", "sdpa", "flash_attention_2") if impl not in lacks]


def choose_attention(plan: dict[str, Any], tree: dict[str, Any] | None, current: Any) -> tuple[str, str | None]:
    """(the implementation the draft writes, why it is not ``current``): ``current`` (the example's) when the source
    supports it, else the first of sdpa / eager it supports."""
    lacks, where = lacking(plan, tree)
    if isinstance(current, str) and current not in lacks:
        return current, None
    pick = next(impl for impl in PREFERRED if impl not in lacks)
    if current is None:
        return pick, (None if pick == PREFERRED[0] else
                      f"{ATTN_PATH} {pick}: {', '.join(lacks['sdpa'])} declare no sdpa support ({where})")
    return pick, (f"{ATTN_PATH} {pick} instead of the similar example's {current!r}: "
                  f"{', '.join(lacks[current])} declare no {current} support ({where})")


def attention_findings(cfg: dict[str, Any], plan: dict[str, Any], tree: dict[str, Any] | None) -> list[dict[str, Any]]:
    """G3: the YAML asks for an implementation a class of the source's model does not declare."""
    model = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
    asked = model.get("attn_implementation", FRAMEWORK_DEFAULT)
    lacks, where = lacking(plan, tree)
    if not isinstance(asked, str) or asked not in lacks:
        return []
    absent = "" if "attn_implementation" in model else " (the target's default: the key is absent)"
    return [{"severity": "error", "code": "attn-unsupported", "path": ATTN_PATH, "value": asked,
             "message": f"attn_implementation {asked!r}{absent} is not supported by the source's model: "
                        f"{', '.join(lacks[asked])} declare no {asked} support (read from {where}); transformers "
                        f"refuses it when the model is built; the source supports {', '.join(supported(plan, tree))}",
             "suggestion": f"set {ATTN_PATH} to one of {', '.join(supported(plan, tree))}"}]
