"""The machinery of a fault: its edits (``Replace``, ``SetLine``) resolved through a ``Layout``, and a wrapped target
runtime (``Runtime``); the package docstring says what the suite is."""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

OWNERS = ("model", "data", "config", "environment")


class FaultError(RuntimeError):
    """A fault's anchor is not in the migration (the green migration changed shape): the fault is not applied."""


@dataclass(frozen=True)
class Replace:
    """Replace the one occurrence of ``old`` in ``file`` by ``new`` (``old`` None: ``new`` is the whole file)."""
    file: str
    old: str | None
    new: str
    count: int = 1  # how many occurrences ``old`` must have (all are replaced); 0: at least one


@dataclass(frozen=True)
class SetLine:
    """Set the value of the one YAML / shell line ``<indent>key: value`` (``key=value`` with ``sep='='``)."""
    file: str
    key: str
    value: str
    sep: str = ":"


@dataclass(frozen=True)
class Runtime:
    """The target runtime wrapped: ``env`` set, ``sitecustomize`` preloaded (a host or library state simulated)."""
    env: dict[str, str] = field(default_factory=dict)
    sitecustomize: str = ""
    missing: bool = False  # the interpreter path does not exist at all


@dataclass(frozen=True)
class Fault:
    id: str
    owner: str
    surface: str  # plugin | mm_plugin | template | collator | dataset | yaml | launch | runtime | host
    story: str  # how a user gets here
    edits: tuple[Replace | SetLine, ...] = ()
    fix: tuple[str, ...] = ()  # file names or keys; the diagnosis leads to the fix when the report names one
    runtime: Runtime | None = None
    repair: bool = False  # in the subset a full run (rules policy) must repair to green
    # written blind from the classifier issue's categories, never run while the classifier was changed: the figures
    # on these are reported apart (faults/heldout.py)
    heldout: bool = False

    def __post_init__(self):
        if self.owner not in OWNERS:
            raise ValueError(f"fault {self.id}: owner {self.owner!r} is not one of {OWNERS}")
        if not self.fix:
            raise ValueError(f"fault {self.id}: say what the fix changes")


@dataclass(frozen=True)
class Layout:
    """Where a migration's files are in one copy (paths relative to the target root, except ``data``)."""
    root: Path
    plugin: str
    modeling: str
    config: str
    launch: str
    data: Path  # the records file of the source copy
    mm_plugin: str = "mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py"
    template: str = "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py"
    collator: str = "mindspeed_mm/fsdp/data/data_utils/func_utils/collator.py"
    registry: str = "mindspeed_mm/fsdp/data/dataloader/data_collator.py"

    def path(self, placeholder: str) -> Path:
        names = {"plugin": self.plugin, "modeling": self.modeling, "config": self.config, "launch": self.launch,
                 "mm_plugin": self.mm_plugin, "template": self.template, "collator": self.collator,
                 "registry": self.registry}
        resolved = placeholder.format(**names, data=self.data, data_dir=self.data.parent)
        return Path(resolved) if Path(resolved).is_absolute() else self.root / resolved


def apply(fault: Fault, layout: Layout) -> list[Path]:
    """Apply the fault's edits to the copy; returns the files changed. Raises FaultError on a missing anchor."""
    changed = []
    for edit in fault.edits:
        path = layout.path(edit.file)
        if isinstance(edit, Replace) and edit.old is None:  # the whole file (an image among them: no read)
            path.write_text(edit.new, encoding="utf-8")
            changed.append(path)
            continue
        text = path.read_text(encoding="utf-8")
        if isinstance(edit, Replace):
            found = text.count(edit.old)
            if (found != edit.count) if edit.count else not found:
                raise FaultError(f"{fault.id}: {edit.old!r} occurs {found} times in {path.name}, "
                                 f"expected {edit.count or 'at least 1'}")
            text = text.replace(edit.old, edit.new)
        else:
            line = re.compile(rf"^(\s*{re.escape(edit.key)}\s*{re.escape(edit.sep)}).*$", re.M)
            found = line.findall(text)
            if len(found) != 1:
                raise FaultError(f"{fault.id}: key {edit.key!r} is on {len(found)} lines of {path.name}, expected 1")
            space = " " if edit.sep == ":" else ""
            text = line.sub(lambda m: m.group(1) + space + edit.value, text)
        path.write_text(text, encoding="utf-8")
        changed.append(path)
    return changed


def wrap_runtime(runtime: Runtime, real_python: str, folder: Path, model_type: str = "") -> str:
    """An interpreter path that runs ``real_python`` with the fault's variables and ``sitecustomize`` preloaded
    (``{model_type}`` in it: the source's model type)."""
    folder.mkdir(parents=True, exist_ok=True)
    if runtime.missing:
        return str(folder / "no-such-env" / "bin" / "python")
    site = folder / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(runtime.sitecustomize.replace("{model_type}", model_type), encoding="utf-8")
    exports = "".join(f"export {k}={_shell_quote(v)}\n" for k, v in runtime.env.items())
    script = folder / "python"
    script.write_text(f"#!/bin/sh\n{exports}export PYTHONPATH={_shell_quote(str(site))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
                      f"exec {_shell_quote(real_python)} \"$@\"\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP)
    return str(script)


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


# A simulation that runs ``_patch(module)`` right after ``{module}`` is first imported (in every process of the
# wrapped runtime; a patch that means the trainer only checks RANK itself, which torchrun sets)
_AFTER_IMPORT = '''import importlib.util, os, sys
class _AfterImport:
    def find_spec(self, name, path=None, target=None):
        if name != "@MODULE@":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        real = spec.loader.exec_module
        def exec_module(module):
            real(module)
            _patch(module)
        spec.loader.exec_module = exec_module
        return spec
@PATCH@
sys.meta_path.insert(0, _AfterImport())
'''


def after_import(module: str, patch: str) -> str:
    return _AFTER_IMPORT.replace("@MODULE@", module).replace("@PATCH@", patch)
