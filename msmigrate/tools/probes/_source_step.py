"""A user's source training step for ``training_parity.py --source-step``: ``FILE.py:function`` (loaded from the
file, its folder importable for its own siblings) or ``module:function`` (importable in the target runtime).

Two forms, told apart by the function's required positional parameters (the product checks the same statically
before a run starts, ``msmigrate/tools/source_step.py``): ``loss`` — ``function(model, batch) -> loss tensor``, run
inside the probe's step (``train``'s ``loss_of``) — and ``loop`` — ``function(model, micro_batches, settings) ->
[{"loss", "grad_norm"}, ...]``, the whole K-step loop, the first record carrying ``grads`` for the step-1 parity."""
import importlib
import importlib.util
import inspect
import os
import sys

FORMS = {2: "loss", 3: "loop"}


def load_step(ref):
    """-> (function, form). Raises with the reason where the reference does not resolve or the signature fits
    neither form."""
    target, sep, func = ref.rpartition(":")
    if not sep or not target or not func:
        raise ValueError(f"--source-step {ref!r}: expected FILE.py:function or module:function")
    if target.endswith(".py") or os.sep in target:
        path = os.path.abspath(target)
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        name = "source_step_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"--source-step: {path} cannot be loaded as a module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    fn = getattr(module, func, None)
    if not callable(fn):
        raise ValueError(f"--source-step: {target} has no function {func!r}")
    return fn, form_of(fn, ref)


def form_of(fn, ref):
    params = inspect.signature(fn).parameters.values()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.kind in positional and p.default is inspect.Parameter.empty]
    form = FORMS.get(len(required))
    if form is None:
        raise TypeError(f"--source-step {ref}: takes {len(required)} required positional parameters; a training "
                        "step is function(model, batch) -> loss or function(model, micro_batches, settings)")
    return form
