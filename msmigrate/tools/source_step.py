"""The user's own source training step (``msmigrate run/verify --source-step FILE.py:function``, spec key
``source_step``): the source side of G4's training parity where the source has no loss or training code of its own
(a forward that returns logits only, no ``labels`` argument, no ``finetune/``), so the probe has nothing else to
compare the migrated model's curve with and records "not comparable".

Two forms, told apart by the function's required positional parameters:

- ``function(model, batch) -> loss`` (the loss form, the usual one): one micro batch of the target pipeline (the
  collated dict the target trainer feeds, ``labels`` aligned with ``input_ids``, -100 where nothing trains) in, the
  scalar loss tensor out — the forward and the loss the user's own training loop computes. The probe runs it inside
  its step: ``loss / gradient_accumulation_steps`` backward, the delivered clip, AdamW at the delivered settings, so
  both sides differ only in what is compared (the loss path), and the step-1 gradients, the fixed-batch loss and
  the first-loss cause are compared as for any source.
- ``function(model, micro_batches, settings) -> [{"loss", "grad_norm"}, ...]`` (the loop form): the whole K-step
  loop, the optimizer included (``settings``: lr, betas, eps, weight_decay, clip_grad, gradient_accumulation_steps);
  the first record must carry ``grads`` ({name: gradient before clipping}) for the step-1 gradient parity.

Checked here before a run starts (``step_problem``): the file exists and parses, the function is defined at its top
level with ``def``, and its parameters are one of the two forms — read with ``ast``, the user's code is not run in
this process (it runs in the target runtime, where its imports are). The file is copied into the run folder
(``copy_step``): the probe runs that copy (a separate process of the target runtime reads it from there), and the
record keeps its hash, so what the gate compared with stays known after the user edits the file."""

from __future__ import annotations

import ast
import hashlib
import shutil
from pathlib import Path
from typing import Any

FORMS = {2: "loss", 3: "loop"}
SIGNATURES = {"loss": "function(model, batch) -> loss tensor",
              "loop": "function(model, micro_batches, settings) -> [{'loss', 'grad_norm'}, ...]"}
COPY_DIR = "source_step"
# what the plan and G4 tell a user whose source gives no loss to compare with
SOURCE_STEP_ADVICE = ("give your own training step with `--source-step FILE.py:function` on `msmigrate run`/`verify` "
                      "(spec key `source_step`): function(model, batch) -> loss, your forward and loss on one "
                      "collated micro batch (labels aligned with input_ids, -100 where nothing trains)")


def split_ref(ref: str) -> tuple[str, str]:
    """(file, function) of ``FILE.py:function`` (the last ``:`` splits, so a path may hold one)."""
    file, sep, func = str(ref).rpartition(":")
    return (file, func) if sep else (str(ref), "")


def resolve_ref(ref: str | None, base: Path) -> str | None:
    """``ref`` with its file made absolute against ``base`` (the spec's folder, or the working directory)."""
    if not ref:
        return ref
    file, func = split_ref(ref)
    path = Path(file).expanduser()
    return f"{(path if path.is_absolute() else base / path).resolve()}:{func}" if file and func else ref


def _function(tree: ast.Module, name: str) -> ast.AST | None:
    found = None
    for node in tree.body:  # the last top-level definition wins, as at import
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.ClassDef)) and name in _bound_names(node):
            found = node
    return found


def _bound_names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.ClassDef):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def step_form(ref: str) -> tuple[str | None, str | None]:
    """(form, problem): ``loss`` or ``loop`` for a usable step, else None and one line naming what is wrong."""
    file, func = split_ref(ref)
    if not file or not func:
        return None, (f"--source-step {ref!r}: give FILE.py:function (the file holding your training step and the "
                      "function's name)")
    path = Path(file)
    if path.suffix != ".py":
        return None, f"--source-step {ref!r}: {file} is not a Python file (FILE.py:function)"
    if not path.is_file():
        return None, f"--source-step: no such file {file}"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"--source-step: {file} cannot be read: {exc}"
    except SyntaxError as exc:
        return None, f"--source-step: {file} line {exc.lineno} does not parse: {exc.msg}"
    node = _function(tree, func)
    if node is None:
        defined = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
        return None, (f"--source-step: {file} defines no function {func!r} at its top level"
                      + (f" (it defines {', '.join(defined[:8])})" if defined else ""))
    if isinstance(node, ast.AsyncFunctionDef):
        return None, f"--source-step: {file}:{func} is async; the training step must be a plain def"
    if not isinstance(node, ast.FunctionDef):
        return None, (f"--source-step: {file}:{func} is not defined with def (a class or an assignment): its "
                      f"parameters cannot be checked; define {SIGNATURES['loss']} or {SIGNATURES['loop']}")
    args = node.args
    positional = len(args.posonlyargs) + len(args.args)
    required = positional - len(args.defaults)
    kw_required = [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    form = FORMS.get(required)
    if form is None or args.vararg is not None or kw_required:
        got = ast.unparse(args)
        return None, (f"--source-step: {file}:{func}({got}) has the wrong signature: the training step is "
                      f"{SIGNATURES['loss']} (your forward and loss on one micro batch) or {SIGNATURES['loop']} "
                      "(the whole loop, optimizer included)")
    return form, None


def step_problem(ref: str | None) -> str | None:
    """One line saying why ``ref`` cannot be the source's training step, or None (also None when none was given)."""
    return step_form(ref)[1] if ref else None


def copy_step(ref: str, run_dir: Path) -> dict[str, Any]:
    """The step's file copied into ``run_dir/source_step/`` (kept as it is when a resumed run already holds it: the
    step a run started with is the one it compares with) -> the record the plan, the probe call and the report
    read."""
    file, func = split_ref(ref)
    src = Path(file)
    dest = run_dir / COPY_DIR / src.name
    if not dest.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    form, problem = step_form(f"{dest}:{func}")
    return {"given": ref, "file": str(src), "function": func, "form": form, "problem": problem,
            "copy": str(dest), "probe_ref": f"{dest}:{func}", "sha256": hashlib.sha256(dest.read_bytes()).hexdigest(),
            "signature": SIGNATURES.get(form or "")}


def describe(record: dict[str, Any] | None) -> str | None:
    """How the report names the step: "the user's step FILE:function"."""
    if not record:
        return None
    return f"the user's step {record['file']}:{record['function']} ({record.get('form')} form)"
