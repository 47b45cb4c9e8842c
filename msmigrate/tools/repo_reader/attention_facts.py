"""Which ``PreTrainedModel`` classes a source's remote code builds, and which attention implementations each declares,
read by AST over the source's own ``.py`` files (no import, no run).

Why: transformers checks the requested attention implementation (``sdpa`` here: the CPU launches and check_forward
ask for it; ``flash_attention_2`` is the framework's default) on EVERY ``PreTrainedModel`` it constructs, and a
sub-model class the top model builds in its ``__init__`` (InternVL's vision tower) is refused at build time when it
does not declare ``_supports_sdpa``. Blind live run 12's player learned this only from check_forward's error. The
remote code already says it: which classes derive from ``PreTrainedModel``, which of them the top class builds
(directly or through another such class), and the flags each class body (or a same-source base) sets. Classes built
from transformers itself (``AutoModel.from_config``, an imported ``Qwen2ForCausalLM``) declare their own flags in the
installed transformers and are not listed.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

# attention implementation -> the class flags that declare support for it (transformers 4.x and 5.x spellings)
ATTN_FLAGS: dict[str, tuple[str, ...]] = {
    "sdpa": ("_supports_sdpa",),
    "flash_attention_2": ("_supports_flash_attn", "_supports_flash_attn_2"),
}
BUILD_METHODS = ("_from_config", "from_config", "from_pretrained")
MAX_FILES = 40


def _classes(folder: Path) -> dict[str, tuple[str, ast.ClassDef]]:
    """Class name -> (file, node) over the folder's top-level .py files (the first definition of a name wins)."""
    out: dict[str, tuple[str, ast.ClassDef]] = {}
    for path in sorted(folder.glob("*.py"))[:MAX_FILES]:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=path.name)
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, (path.name, node))
    return out


def _base_names(node: ast.ClassDef) -> list[str]:
    return [ast.unparse(b).split(".")[-1] for b in node.bases]


def _is_pretrained(name: str, classes: dict, seen: frozenset = frozenset()) -> bool:
    if name not in classes or name in seen:
        return False
    return any(b == "PreTrainedModel" or _is_pretrained(b, classes, seen | {name})
               for b in _base_names(classes[name][1]))


def _declared(name: str, classes: dict, seen: frozenset = frozenset()) -> dict[str, Any]:
    """The attention flags ``name``'s body sets, over those its same-source bases set (its own win)."""
    if name not in classes or name in seen:
        return {}
    node = classes[name][1]
    inherited: dict[str, Any] = {}
    for base in reversed(_base_names(node)):
        inherited.update(_declared(base, classes, seen | {name}))
    wanted = {f for flags in ATTN_FLAGS.values() for f in flags} | {"_supports_attention_backend"}
    own: dict[str, Any] = {}
    for stmt in node.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) \
            else []
        value = getattr(stmt, "value", None)
        for t in targets:
            if isinstance(t, ast.Name) and t.id in wanted and isinstance(value, ast.Constant):
                own[t.id] = value.value
    return {**inherited, **own}


def _built_in_init(name: str, classes: dict) -> list[tuple[str, int]]:
    """(class, line) of each remote-code class that ``name.__init__`` constructs: ``X(...)`` or
    ``X._from_config(...)`` / ``X.from_pretrained(...)`` — PreTrainedModels, and the plain modules they are nested in
    (a vision tower built inside an embedding or projector module is built by the top class all the same)."""
    node = classes[name][1]
    init = next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
    if init is None:
        return []
    found = []
    for call in (n for n in ast.walk(init) if isinstance(n, ast.Call)):
        fn = call.func
        if isinstance(fn, ast.Attribute) and fn.attr in BUILD_METHODS:
            fn = fn.value
        target = fn.id if isinstance(fn, ast.Name) else None
        if target and target != name and target in classes:
            found.append((target, call.lineno))
    return found


def remote_attention_facts(folder: Path, arch: str | None) -> dict[str, Any] | None:
    """``classes``: the top class ``arch`` and every remote-code PreTrainedModel it builds (transitively), each with
    its file:line, who builds it (``Class.__init__`` file:line) and the attention flags it declares;
    ``lacks``: implementation -> the classes (the top one first, then those built inside it) that declare no
    support for it. None when ``arch`` is not a class of the folder's code."""
    classes = _classes(Path(folder))
    if not arch or arch not in classes:
        return None
    rows: list[dict[str, Any]] = []
    queue: list[tuple[str, str | None]] = [(arch, None)]
    seen: set[str] = set()
    while queue:
        name, built_by = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        file, node = classes[name]
        if name == arch or _is_pretrained(name, classes):
            rows.append({"class": name, "at": f"{file}:{node.lineno}", "built_by": built_by,
                         "declares": _declared(name, classes)})
        # a plain module in between is walked through: the towers nested in it are named with the chain
        via = f"{name}.__init__ ({file}:{{line}})" if built_by is None or _is_pretrained(name, classes) else \
            f"{built_by} → {name}.__init__ ({file}:{{line}})"
        queue += [(child, via.format(line=line)) for child, line in _built_in_init(name, classes)]
    lacks = {impl: [r["class"] for r in rows if not any(r["declares"].get(f) for f in flags)]
             for impl, flags in ATTN_FLAGS.items()}
    return {"classes": rows, "lacks": {k: v for k, v in lacks.items() if v}}
