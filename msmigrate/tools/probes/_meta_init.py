"""Building a model the way the target's trainer does (on the meta device, then given storage) — shared by
``model_parity.py`` and ``forward_smoke.py``. Runs in the target runtime; imports nothing from msmigrate."""

import copy


def build(cls, config, meta=False):
    import torch

    from _model_build import with_attention_fallback

    config = copy.deepcopy(config)
    if meta:
        from accelerate import init_empty_weights

        def make():
            with init_empty_weights():
                return cls._from_config(config) if hasattr(cls, "_from_config") else cls(config)

        model = with_attention_fallback(make, config)  # eager where the class has no sdpa path
        for module in model.modules():  # as ModelHub does: a later init_weights must not skip them
            if getattr(module, "_is_hf_initialized", False):
                module._is_hf_initialized = False
        return as_fp32(model)

    def make_cpu():
        with torch.device("cpu"):
            return cls._from_config(config) if hasattr(cls, "_from_config") else cls(config)

    return as_fp32(with_attention_fallback(make_cpu, config))


# the parameter dtypes a model came out of its constructor with, before the probes' fp32 cast: a part the model's
# own code casts (a tower kept in bf16) shows here and nowhere after the cast
BUILT_DTYPES = "_msmigrate_built_dtypes"


def as_fp32(model):
    """The probes compare in fp32; the constructor's own dtypes are kept on the model (``built_dtypes``)."""
    if hasattr(model, "named_parameters"):
        object.__setattr__(model, BUILT_DTYPES, dtypes_now(model))
    return model.float()


def dtypes_now(model):
    """name -> dtype of each parameter and each floating buffer (a rotary ``inv_freq``, a norm's running stats: a
    cast of a module moves them too; integer buffers such as position ids keep their dtype under any cast)."""
    out = {n: p.dtype for n, p in model.named_parameters()}
    out.update({n: b.dtype for n, b in model.named_buffers() if b.is_floating_point() and n not in out})
    return out


def built_dtypes(model):
    """Parameter and floating-buffer dtypes as the model's constructor left them (``as_fp32``), else as they are
    now."""
    return getattr(model, BUILT_DTYPES, None) or dtypes_now(model)


def materialize(model):
    """Give meta tensors storage the way the target's trainer does (its ``to_empty_if_needed`` where it has one,
    else ``Module.to_empty`` — a plugin's ``to_empty`` override runs there). Returns how."""
    try:
        from mindspeed_mm.fsdp.utils.utils import to_empty_if_needed
    except ImportError:
        model.to_empty(device="cpu")
        return "Module.to_empty"
    to_empty_if_needed(model, device="cpu")
    return "to_empty_if_needed"


def retie(model):
    """The trainer's retie after a load, where the target has one."""
    try:
        from mindspeed_mm.fsdp.checkpoint.utils import retie_embeddings
    except ImportError:
        return False
    retie_embeddings(model)
    return True


def persistent_keys(model):
    """State-dict keys minus non-persistent buffers (what a checkpoint holds), and the non-persistent ones."""
    nonpersistent = []
    for name, module in model.named_modules():
        for buf in getattr(module, "_non_persistent_buffers_set", ()):
            nonpersistent.append(f"{name}.{buf}" if name else buf)
    return nonpersistent


def restore_computed_buffers(source, src_cls, build, nonpersistent_names):
    """Non-persistent buffers (rotary ``inv_freq``, position ids …) are computed by the class's ``__init__`` and never
    saved. transformers 5 builds a ``from_pretrained`` model on the meta device and recomputes only the buffers its
    own init code knows; a remote-code class that does not re-initialise its own buffers gets uninitialised memory
    there (a different loss on every load). That is the source code on this runtime, not the export: the buffers
    are recomputed from a fresh CPU build of the same class, and the names returned so the record says so."""
    import torch

    names = set(nonpersistent_names(source))
    if not names:
        return []
    fresh = dict(build(src_cls, source.config).named_buffers())
    restored = []
    with torch.no_grad():
        for name, buf in source.named_buffers():
            want = fresh.get(name)
            if name in names and want is not None and want.shape == buf.shape and not torch.equal(buf, want.to(buf.dtype)):
                buf.copy_(want.to(buf.dtype))
                restored.append(name)
    return restored
