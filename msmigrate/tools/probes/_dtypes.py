"""The dtypes a plugin's own code gives its parameters, against the source class built from the same config — shared
by ``model_parity.py`` (G1) and ``training_parity.py`` (G4). Runs in the target runtime; imports nothing from
msmigrate.

Both parity probes build each side and cast it to fp32 (``_meta_init.as_fp32``: they compare in fp32), which hides a
cast the plugin's ``__init__`` makes — a tower kept in bf16 agrees with the source within the parity tolerance once
cast back. The dtypes each constructor left (parameters and floating buffers) are kept before that cast
(``_meta_init.built_dtypes``); a difference between the two sides is the plugin's own code deciding a dtype that the
delivered config's precision settings decide, and is reported, never cast away: the first module whose every tensor
differs (the one the code cast), its dtype, the count, and the lines of the plugin class's own file that name that
dtype (where the fix goes)."""
import inspect
import os

# a dtype -> the spellings a cast to it takes in code (``.to(torch.bfloat16)``, ``.bfloat16()``, ``.half()``)
_SPELLINGS = {"bfloat16": ("bfloat16", "bf16"), "float16": ("float16", "half", "fp16"),
              "float64": ("float64", "double"), "float32": ("float32", "float()", "fp32")}


def short(dtype):
    return str(dtype).replace("torch.", "")


def dtype_differences(source, plugin):
    """(name, source dtype, plugin dtype) of each parameter or floating buffer the plugin holds in another dtype than
    the source's same-named one, as their constructors left them (before the probes' fp32 cast)."""
    from _meta_init import built_dtypes

    want, got = built_dtypes(source), built_dtypes(plugin)
    return [(n, short(want[n]), short(d)) for n, d in got.items() if n in want and d != want[n]]


def first_cast_module(plugin, cast):
    """(module name, its class, dtype, tensors in it) of the outermost module around the first differing tensor all of
    whose tensors differ in that same dtype — the module the plugin's code cast; the tensor's own module where no
    enclosing one is cast whole. None without differences."""
    if not cast:
        return None
    from _meta_init import built_dtypes

    dtypes = built_dtypes(plugin)
    differing = {n: got for n, _, got in cast}
    name, _, dtype = cast[0]
    parts = name.split(".")
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i])
        inside = [n for n in dtypes if n.startswith(prefix + ".")]
        if inside and all(differing.get(n) == dtype for n in inside):
            break
    else:
        prefix = ".".join(parts[:-1])
        inside = [n for n in dtypes if n.startswith(prefix + ".") and n.count(".") == name.count(".")] or [name]
    try:
        cls = type(plugin.get_submodule(prefix)).__name__ if prefix else type(plugin).__name__
    except AttributeError:
        cls = None
    return prefix, cls, dtype, len(inside)


def cast_lines(plugin_cls, dtype, root=None, limit=3):
    """(file relative to ``root``, [(line number, text)]) of the lines that spell a cast to ``dtype``: in the plugin
    class's own body first, else anywhere in its file; the file alone when none does (a cast through a variable)."""
    try:
        path = inspect.getsourcefile(plugin_cls)
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        body, first = inspect.getsourcelines(plugin_cls)
    except (OSError, TypeError):
        return None, []
    spellings = _SPELLINGS.get(dtype, (dtype,))

    def spelled(numbered):
        return [(i, text.strip()) for i, text in numbered
                if not text.lstrip().startswith("#") and any(s in text for s in spellings)]

    hits = spelled(enumerate(body, first)) or spelled(enumerate(lines, 1))
    rel = os.path.relpath(path, root) if root and os.path.abspath(path).startswith(os.path.abspath(root)) else path
    return rel, hits[:limit]


def cast_problem(plugin, plugin_cls, cast, root=None):
    """The problem line for a plugin whose own code holds tensors in another dtype than the source; None without."""
    if not cast:
        return None
    module, cls, dtype, inside = first_cast_module(plugin, cast)
    want = next(w for n, w, got in cast if got == dtype)
    params = {n for n, _ in plugin.named_parameters()}
    n_params = sum(n in params for n, _, _ in cast)
    where, hits = cast_lines(plugin_cls, dtype, root)
    lines = "; ".join(f"{where}:{i} `{t[:100]}`" for i, t in hits)
    return (f"the plugin holds {n_params} parameter(s) and {len(cast) - n_params} floating buffer(s) in another dtype "
            f"than the source class built from the same config: first module {module or '(root)'}"
            + (f" ({cls})" if cls else "") + f" in {dtype} where the source builds {want} ({inside} tensors in it; "
            f"e.g. {', '.join(f'{n} {got}' for n, _, got in cast[:3])}). The plugin's own code casts them, while the "
            "delivered config's precision settings decide dtypes (the trainer's master weights, FSDP2's compute "
            "copy); every parity check runs both sides in fp32 and cannot see it. Fix: remove the cast "
            + (f"at {lines}" if lines else f"in {where} (no line of it spells the dtype: a cast through a variable)"))
