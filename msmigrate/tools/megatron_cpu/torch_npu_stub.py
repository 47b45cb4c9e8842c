"""A ``torch_npu`` for a CPU process: what MindSpeed's Megatron route imports from torch_npu, with the kernels it
calls backed by the CPU references in ``npu_kernels`` and everything else a named placeholder.

Loaded by the launch shim (``site/sitecustomize.py``) in the launched process only; the checkout is never edited.
What it does on ``install()``:

- registers ``npu`` as torch's PrivateUse1 device name (MindSpeed builds ``torch.device("npu")`` in default
  arguments at import) and ``torch.npu`` as a CPU-backed device module;
- makes ``torch_npu``, ``torch_npu.npu``, ``torch_npu.contrib.transfer_to_npu`` ... importable. An attribute the
  stub does not know is a ``Placeholder``: importing and referencing it works, calling it raises
  ``NotImplementedError`` and prints ``MISSING_MARK`` naming it, so a gate can say which kernel a path needs;
- the ``transfer_to_npu`` stand-in points the accelerator calls Megatron makes (``torch.cuda.current_device``,
  ``set_device``, ``synchronize``, RNG state, ``Tensor.cuda``) at the CPU, as the real one points them at the NPU;
- ``torch.distributed.init_process_group`` / ``new_group`` use gloo whatever backend the launch names (nccl/hccl);
- every call of a kernel reference prints ``KERNEL_MARK`` once per kernel and call shape (layout, mode), so the
  log says which kernels a run went through.
"""
from __future__ import annotations

import sys
import types

KERNEL_MARK = "[msmigrate megatron-cpu] kernel"
MISSING_MARK = "[msmigrate megatron-cpu] no CPU reference for"
VERSION = "0.0+msmigrate.cpu"


class Placeholder:
    """Stands for a torch_npu name the CPU path has no version of: fine to import, subclass or annotate with;
    calling it says which name was needed."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        print(f"{MISSING_MARK} {self._name}", file=sys.stderr, flush=True)
        raise NotImplementedError(f"{self._name} is an NPU kernel/API with no CPU reference in msmigrate's shim")

    def __getitem__(self, item):
        return self

    def __mro_entries__(self, bases):
        return (object,)

    def __bool__(self):
        return False

    def __repr__(self):
        return f"<torch_npu placeholder {self._name}>"


class StubModule(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Placeholder(f"{self.__name__}.{attr}")


_SEEN: set = set()


def _traced(name, fn):
    def call(*args, **kwargs):
        shape = ", ".join(f"{k}={kwargs[k]}" for k in ("input_layout", "sparse_mode", "rotary_mode", "dim")
                          if k in kwargs)
        if name == "npu_fusion_attention" and "input_layout" not in kwargs and len(args) > 4:
            shape = f"input_layout={args[4]}" + (f", {shape}" if shape else "")
        key = (name, shape)
        if key not in _SEEN:
            _SEEN.add(key)
            print(f"{KERNEL_MARK} torch_npu.{name}({shape}) -> CPU reference", file=sys.stderr, flush=True)
        return fn(*args, **kwargs)

    call.__name__ = name
    call.__wrapped__ = fn
    return call


def _module(name, **attrs):
    mod = StubModule(name)
    mod.__file__ = __file__
    mod.__path__ = []  # a package: submodules resolve through sys.modules
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    return mod


def _returns(value):
    """A new function object per patched name: torch._dynamo keys its trace rules by function identity, and one
    shared no-op under two torch names is refused as a duplicate."""
    def fn(*args, **kwargs):
        return value

    return fn


def _cpu_device_module(torch):
    """torch.npu / torch_npu.npu on a CPU box: one 'device' that is the CPU."""
    return dict(
        is_available=_returns(False), device_count=_returns(1), current_device=_returns(0), set_device=_returns(None),
        synchronize=_returns(None), empty_cache=_returns(None), manual_seed=lambda seed: torch.manual_seed(seed),
        manual_seed_all=lambda seed: torch.manual_seed(seed), get_rng_state=lambda *a, **k: torch.get_rng_state(),
        set_rng_state=lambda state, *a, **k: torch.set_rng_state(state), is_bf16_supported=_returns(True),
        get_device_name=_returns("cpu (msmigrate shim)"), memory_allocated=_returns(0),
        max_memory_allocated=_returns(0), memory_reserved=_returns(0), max_memory_reserved=_returns(0),
        reset_peak_memory_stats=_returns(None), set_compile_mode=_returns(None), current_stream=_returns(None),
        default_stream=_returns(None), stream=_null_context,
    )


class _null_context:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _point_cuda_at_cpu(torch):
    """What transfer_to_npu does for the NPU, done for the CPU: the accelerator calls Megatron makes land on it."""
    cuda = torch.cuda
    for name, value in (("current_device", "cpu"), ("set_device", None), ("synchronize", None),
                        ("empty_cache", None), ("device_count", 1), ("memory_allocated", 0),
                        ("max_memory_allocated", 0), ("memory_reserved", 0), ("max_memory_reserved", 0),
                        ("reset_peak_memory_stats", None)):
        setattr(cuda, name, _returns(value))
    cuda.manual_seed = lambda seed: torch.manual_seed(seed)
    cuda.manual_seed_all = lambda seed: torch.manual_seed(seed)
    cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    cuda.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    cuda.nvtx = types.SimpleNamespace(range_push=_returns(None), range_pop=_returns(None), range=_null_context)
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.Tensor.npu = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    torch.nn.Module.npu = lambda self, *a, **k: self


def _gloo_everywhere(torch):
    import torch.distributed as dist

    init, new_group = dist.init_process_group, dist.new_group

    def init_process_group(*args, **kwargs):
        kwargs["backend"] = "gloo"
        if args:
            args = args[1:]
        kwargs.pop("device_id", None)
        return init(*args, **kwargs)

    def gloo_group(*args, **kwargs):
        if kwargs.get("backend") not in (None, "gloo"):
            kwargs["backend"] = "gloo"
        kwargs.pop("pg_options", None)
        return new_group(*args, **kwargs)

    dist.init_process_group = init_process_group
    dist.new_group = gloo_group


def placeholder_module(name):
    """A module of the NPU stack the stub has nothing for (``torchair``, ``torch_npu.op_plugin`` ...): importable,
    every name in it a ``Placeholder``."""
    return _module(name)


def _register_nothing(*args, **kwargs):
    """torchair's graph-compiler registration decorators (``register_fx_node_ge_converter``, ``declare_supported``):
    MindSpeed's op builders apply them at import; without torchair's graph mode they register nothing."""
    return lambda fn: fn


def install():
    if "torch_npu" in sys.modules:
        return sys.modules["torch_npu"]
    import torch

    from npu_kernels import REFERENCES

    if torch._C._get_privateuse1_backend_name() != "npu":
        torch.utils.rename_privateuse1_backend("npu")
    npu = _module("torch_npu.npu", **_cpu_device_module(torch))
    npu.Stream = npu.Event = _null_context
    npu.utils = _module("torch_npu.npu.utils", **_cpu_device_module(torch))
    npu.amp = _module("torch_npu.npu.amp")
    if not hasattr(torch, "npu"):
        torch._register_device_module("npu", npu)
    root = _module("torch_npu", __version__=VERSION, npu=npu,
                   **{name: _traced(name, fn) for name, fn in REFERENCES.items()})
    root.contrib = _module("torch_npu.contrib")
    root.contrib.transfer_to_npu = _module("torch_npu.contrib.transfer_to_npu")
    root.utils = _module("torch_npu.utils")
    root.utils.collect_env = _module("torch_npu.utils.collect_env")
    root.profiler = _module("torch_npu.profiler")
    root._C = _module("torch_npu._C")
    root._C._distributed_c10d = _module("torch_npu._C._distributed_c10d")
    root.dynamo = _module("torch_npu.dynamo")
    air = _module("torchair", register_fx_node_ge_converter=_register_nothing)
    air.ge_concrete_graph = _module("torchair.ge_concrete_graph")
    air.ge_concrete_graph.fx2ge_converter = _module("torchair.ge_concrete_graph.fx2ge_converter",
                                                    register_fx_node_ge_converter=_register_nothing,
                                                    declare_supported=_register_nothing)
    _point_cuda_at_cpu(torch)
    _gloo_everywhere(torch)
    return root
