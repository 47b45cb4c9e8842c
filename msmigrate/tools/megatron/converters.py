"""Which of the target's weight converters handle a source architecture, read from the target's code by AST.

A converter is a concrete class in the target's ``checkpoint/`` tree with ``hf_to_mm`` and ``mm_to_hf`` (the
framework's Converter contract; the CLI offers each as ``mm-convert <Class>``). What architecture it converts is
taken from the HF configuration modules its file imports (``from transformers.models.qwen2_5_vl import
Qwen2_5_VLConfig`` -> ``qwen2_5_vl``), which is the source's ``model_type`` in transformers' own layout. A file that
reads the config through ``AutoConfig`` gives no such evidence: its converters are listed with no model types and
never picked for a source. Several candidates are ordered by how specific their file is (fewest other model
types first).
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ConverterRef:
    name: str  # class name, the mm-convert sub-command
    file: str  # relative to the target root
    line: int
    model_types: list[str] = field(default_factory=list)  # transformers.models.<x> modules its file imports


@dataclass
class ConverterCandidates:
    model_type: str | None = None
    matches: list[ConverterRef] = field(default_factory=list)  # best first
    converters: list[ConverterRef] = field(default_factory=list)  # every converter found
    error: str | None = None

    @property
    def best(self) -> str | None:
        return self.matches[0].name if self.matches else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _model_types(tree: ast.Module) -> list[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("transformers.models."):
            out.add(node.module.split(".")[2])
    return sorted(out)


def list_converters(target: Path) -> list[ConverterRef]:
    root = Path(target) / "checkpoint"
    out = []
    for path in sorted(root.rglob("*.py")) if root.is_dir() else []:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        types = _model_types(tree)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                if {"hf_to_mm", "mm_to_hf"} <= methods and not any(
                        isinstance(d, ast.Name) and d.id == "abstractmethod"
                        for n in node.body if isinstance(n, ast.FunctionDef) for d in n.decorator_list):
                    out.append(ConverterRef(node.name, str(path.relative_to(target)), node.lineno, types))
    return out


def converter_candidates(target: Path, model_type: str | None) -> ConverterCandidates:
    """The converters whose file imports ``transformers.models.<model_type>``, most specific first."""
    if not (Path(target) / "checkpoint").is_dir():
        return ConverterCandidates(model_type=model_type, error=f"{target} has no checkpoint/ folder")
    refs = list_converters(target)
    matches = sorted((r for r in refs if model_type and model_type in r.model_types),
                     key=lambda r: (len(r.model_types), r.name))
    return ConverterCandidates(model_type=model_type, matches=matches, converters=refs)
