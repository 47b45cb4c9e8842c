"""Whether the recompute wrapper's ``past_key_values=None`` collides with what a block's caller passes (runs in the
target runtime; imports nothing from msmigrate).

The framework's recompute wrapper calls a block's forward with the caller's arguments plus ``past_key_values=None``.
transformers 5 renames that keyword on many forwards (``deprecate_kwarg("past_key_values", new_name="cache")``): the
signature shows ``cache`` and ``**kwargs``, and the wrapper turns the injected keyword into ``cache=None``. That is
harmless where the caller passes ``cache=`` by keyword (the decorator keeps one), and a ``TypeError: forward() got
multiple values for argument 'cache'`` where the caller passes it by position (the sweep's GIT: its encoder calls
``layer_module(hidden_states, attention_mask, cache, **kwargs)``; G4 failed there, G1–G3 run without recompute).
Two reads decide it: the parameter the keyword lands in (one trial call that stops at argument binding) and how
many arguments the block's caller passes by position (its forward's source, read with ``ast``).
"""
import ast
import inspect
import re
import textwrap
import warnings


class _BodyReached(Exception):
    """A trial call got past argument binding into the forward's body."""


class _Stub:
    def __getattr__(self, name):
        raise _BodyReached(name)


def renamed_to(cls):
    """(the parameter ``past_key_values=`` lands in, its index among the positional parameters after self), where a
    wrapper of ``cls.forward`` renames the keyword to one the signature also takes by position; else None. The trial
    call gives every positional parameter by position (stubs; self an instance left uninitialised, so the class's
    own wrappers find what they read on the class) and ``past_key_values=None``: it stops at binding, or at the
    body's first read of a stub or of the empty instance."""
    forward = getattr(cls, "forward", None)
    if forward is None or inspect.unwrap(forward) is forward:
        return None  # nothing wraps it: the signature alone says how it binds
    try:
        params = list(inspect.signature(inspect.unwrap(forward)).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.name == "past_key_values" for p in params):
        return None
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    stub = _Stub()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            forward(object.__new__(cls), *[stub] * (len(positional) - 1), past_key_values=None)
        except TypeError as exc:
            found = re.search(r"got multiple values for argument '(\w+)'", str(exc))
            if found and found.group(1) in positional:
                return found.group(1), positional.index(found.group(1)) - 1
            return None
        except (_BodyReached, AttributeError, ValueError, RuntimeError):
            return None  # bound without a clash: the body ran into the stubs
    return None


def positional_args_of_calls(owner_cls, attr):
    """The most arguments the owner's forward passes by position to a block drawn from ``self.<attr>`` (a ``for``
    over it, ``enumerate`` or a slice included); None where its source cannot be read or no such call is found; a
    ``*args`` in the call counts as unbounded."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(owner_cls.forward))))
    except (OSError, TypeError, SyntaxError):
        return None
    most = None
    for loop in ast.walk(tree):
        if not isinstance(loop, ast.For):
            continue
        over = any(isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.value, ast.Name)
                   and n.value.id == "self" for n in ast.walk(loop.iter))
        if not over:
            continue
        names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
        for call in ast.walk(loop):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names:
                count = float("inf") if any(isinstance(a, ast.Starred) for a in call.args) else len(call.args)
                most = count if most is None else max(most, count)
    return most


def past_key_values_clashes(model, name):
    """The parameter the recompute wrapper's ``past_key_values=None`` would give twice to the block ``name`` of
    ``model`` (an indexed child of a list its parent's forward loops over), else None."""
    parts = name.split(".")
    if len(parts) < 2 or not parts[-1].isdigit():
        return None
    module = model.get_submodule(name)
    renamed = renamed_to(type(module))
    if renamed is None:
        return None
    owner = model.get_submodule(".".join(parts[:-2]))  # "": the model itself
    passed = positional_args_of_calls(type(owner), parts[-2])
    return renamed[0] if passed is not None and passed > renamed[1] else None
