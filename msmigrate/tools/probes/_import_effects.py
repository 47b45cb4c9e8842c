"""What importing (and building) the plugin changes in the code the source's own model runs (used by the parity
probes; imports nothing from msmigrate).

The parity probes run the source and the plugin in one process. A plugin package that patches a library class or
function at import (``Qwen2VLRMSNorm.forward = fused_rms_norm``, an attention function swapped for a kernel wrapper)
patches the source's model too: both sides then compute the patched numbers and agree, and the oracle has been
rewritten by the thing it judges. So the source's reference is computed before the plugin is imported, and what the
import changed is read here: the callables the source's modules run through — every attribute of their classes (up to
torch's ``Module``), every function of the modules defining those classes, and ``torch.nn.functional`` — snapshotted
before, compared by identity after. A patch that computes the same numbers (a fused kernel wrapper with an exact
fallback) is named but is no finding; the probe decides that by running the source again on the same batch.
"""
import contextlib
import inspect
import os
import sys


def _owners(model):
    """The objects whose attributes the source's forward reads: its modules' classes (below torch's own), the Python
    modules defining them, and torch.nn.functional."""
    import torch.nn.functional as F

    classes, modules = {}, {"torch.nn.functional": F}
    for cls in {type(m) for m in model.modules()}:
        for klass in cls.__mro__:
            if klass.__module__.startswith("torch.") or klass is object:
                continue
            classes[f"{klass.__module__}.{klass.__qualname__}"] = klass
            mod = sys.modules.get(klass.__module__)
            if mod is not None:
                modules[mod.__name__] = mod
    return classes, modules


def snapshot(model):
    """{qualified name: object} for every callable attribute the source's code can reach by name (module doc)."""
    classes, modules = _owners(model)
    out = {}
    for name, klass in classes.items():
        for attr, value in vars(klass).items():
            if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
                out[f"{name}.{attr}"] = (klass, attr, value)
        out[f"{name}.__dict__"] = (klass, None, frozenset(vars(klass)))
    for name, mod in modules.items():
        for attr, value in vars(mod).items():
            if inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value):
                out[f"{name}.{attr}"] = (mod, attr, value)
    return out


def _where(value, root):
    """'file:line' of the Python function now in place (relative to ``root`` when under it), None for a builtin."""
    func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
    func = getattr(func, "fget", None) or func
    code = getattr(inspect.unwrap(func), "__code__", None) if callable(func) else None
    if code is None:
        return None
    path = os.path.abspath(code.co_filename)
    rel = os.path.relpath(path, os.path.abspath(root)) if root else path
    return f"{rel if not rel.startswith('..') else path}:{code.co_firstlineno}"


def changed(before, root=None):
    """[{"name", "now_from"}]: the entries of ``before`` (``snapshot``) that are no longer the same object, and class
    attributes added since (a method set on a class that inherited it); ``now_from`` is where the replacement is
    defined."""
    out = []
    for name, (owner, attr, value) in before.items():
        if attr is None:  # the class's own attribute names: one added is a patch too (an inherited forward replaced)
            for added in sorted(set(vars(owner)) - value):
                now = vars(owner)[added]
                if callable(now) or isinstance(now, (staticmethod, classmethod, property)):
                    out.append({"name": f"{name[:-len('.__dict__')]}.{added}", "now_from": _where(now, root)})
            continue
        now = vars(owner).get(attr)
        if now is not value:
            out.append({"name": name, "now_from": _where(now, root) if now is not None else None})
    return out


@contextlib.contextmanager
def unpatched(before):
    """The source's own code while inside: every entry of ``before`` (``snapshot``) the plugin's import replaced is
    put back, and every class attribute it added is taken away; on leaving, the plugin's objects return, so its side
    runs as its import left it. For a probe whose two sides run one after the other in one process (the training
    parity), so the source's side is the source's, backward included. Yields the names it put back."""
    swapped, added = [], []
    for name, (owner, attr, value) in before.items():
        if attr is None:
            for extra in sorted(set(vars(owner)) - value):
                added.append((owner, extra, vars(owner)[extra]))
            continue
        now = vars(owner).get(attr)
        if now is not value:
            swapped.append((owner, attr, now, name))
    try:
        for owner, attr, _, name in swapped:
            setattr(owner, attr, before[name][2])
        for owner, extra, _ in added:
            delattr(owner, extra)
        yield [n for *_, n in swapped] + [f"{o.__module__}.{o.__qualname__}.{a}" if isinstance(o, type)
                                          else f"{o.__name__}.{a}" for o, a, _ in added]
    finally:
        for owner, extra, now in added:
            setattr(owner, extra, now)
        for owner, attr, now, _ in swapped:
            if now is None:
                delattr(owner, attr)
            else:
                setattr(owner, attr, now)
