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

    def __iter__(self):  # an empty collection (``dtype not in torch_npu.unsupported_dtype``), never an endless one
        return iter(())

    def __contains__(self, item):
        return False

    def __len__(self):
        return 0

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
        is_available=_returns(True), device_count=_returns(1), current_device=_returns(0), set_device=_returns(None),
        synchronize=_returns(None), empty_cache=_returns(None), manual_seed=lambda seed: torch.default_generator.manual_seed(int(seed)),
        manual_seed_all=lambda seed: torch.default_generator.manual_seed(int(seed)), get_rng_state=lambda *a, **k: torch.get_rng_state(),
        set_rng_state=lambda state, *a, **k: torch.set_rng_state(state), is_bf16_supported=_returns(True),
        get_device_name=_returns("cpu (msmigrate shim)"), memory_allocated=_returns(0),
        max_memory_allocated=_returns(0), memory_reserved=_returns(0), max_memory_reserved=_returns(0),
        reset_peak_memory_stats=_returns(None), set_compile_mode=_returns(None), current_stream=_returns(None),
        default_stream=_returns(None), stream=_null_context, _is_in_bad_fork=_returns(False),
        is_initialized=_returns(True), _lazy_init=_returns(None), mem_get_info=_returns((0, 0)),
        # Megatron's RNG tracker sets the device generator's state through _lazy_call(cb) with
        # default_generators[current_device()]: on the CPU that is the CPU generator, set at once
        _lazy_call=lambda callback, *a, **k: callback(), default_generators=_EveryIndex(torch.default_generator),
    )


class _EveryIndex:
    """``default_generators[i]`` for any device index (the CPU is every device here)."""

    def __init__(self, item):
        self._item = item

    def __getitem__(self, index):
        return self._item

    def __len__(self):
        return 1


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
    # is_available: True, as under transfer_to_npu on an NPU box (initialize_megatron asserts it); the device that
    # is "available" is the CPU.
    for name, value in (("is_available", True), ("current_device", "cpu"), ("set_device", None), ("synchronize", None),
                        ("empty_cache", None), ("device_count", 1), ("memory_allocated", 0),
                        ("max_memory_allocated", 0), ("memory_reserved", 0), ("max_memory_reserved", 0),
                        ("reset_peak_memory_stats", None)):
        setattr(cuda, name, _returns(value))
    cuda.manual_seed = lambda seed: torch.default_generator.manual_seed(int(seed))
    cuda.manual_seed_all = lambda seed: torch.default_generator.manual_seed(int(seed))
    for space in (cuda, cuda.random):  # Megatron's tracker reads torch.cuda.random.get_rng_state
        space.get_rng_state = lambda *a, **k: torch.get_rng_state()
        space.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    cuda.nvtx = types.SimpleNamespace(range_push=_returns(None), range_pop=_returns(None), range=_null_context)
    # pinning host memory speeds a copy to the accelerator; here the host is the device (the data JSON's
    # pin_memory: true makes the DataLoader pin for the "npu" device, which has no hooks registered)
    torch.Tensor.pin_memory = lambda self, *a, **k: self
    # Megatron's optimizers sort parameters by Tensor.type() == "torch.cuda.BFloat16Tensor" / ".FloatTensor" ...;
    # a CPU tensor here is a tensor on "the device", so type() without arguments names it that way
    plain_type = torch.Tensor.type

    def device_type(self, *args, **kwargs):
        name = plain_type(self, *args, **kwargs)
        if args or kwargs or self.device.type != "cpu":
            return name
        return name.replace("torch.", "torch.cuda.", 1)

    torch.Tensor.type = device_type
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.Tensor.npu = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    torch.nn.Module.npu = lambda self, *a, **k: self


ACCELERATOR_TYPES = ("cuda", "npu")
FACTORIES = ("tensor", "as_tensor", "empty", "zeros", "ones", "full", "arange", "rand", "randn", "randint",
             "randperm", "eye", "linspace", "empty_like", "zeros_like", "ones_like", "full_like", "rand_like",
             "randn_like", "empty_strided")


def _on_cpu(device):
    """An accelerator device (``"cuda"``, ``"npu:0"``, ``torch.device("cuda", 0)``, a bare index) -> ``"cpu"``."""
    if device is None:
        return None
    if isinstance(device, int):
        return "cpu"
    kind = device.type if hasattr(device, "type") else str(device).split(":")[0]
    return "cpu" if kind in ACCELERATOR_TYPES else device


def _device_to_cpu(torch):
    """transfer_to_npu rewrites ``device="cuda"`` to the NPU in torch's factories and ``.to``; this rewrites it to
    the CPU (``pretrain`` builds ``torch.tensor(..., device="cuda")``; Megatron passes current_device() around)."""
    def factory(fn):
        def call(*args, **kwargs):
            if "device" in kwargs:
                kwargs["device"] = _on_cpu(kwargs["device"])
            return fn(*args, **kwargs)

        call.__name__, call.__wrapped__ = getattr(fn, "__name__", "factory"), fn
        return call

    for name in FACTORIES:
        setattr(torch, name, factory(getattr(torch, name)))

    def moved(to):
        def call(self, *args, **kwargs):
            if "device" in kwargs:
                kwargs["device"] = _on_cpu(kwargs["device"])
            if args and (isinstance(args[0], (str, int)) or hasattr(args[0], "type")) \
                    and not isinstance(args[0], torch.dtype) and not torch.is_tensor(args[0]):
                args = (_on_cpu(args[0]),) + args[1:]
            return to(self, *args, **kwargs)

        return call

    torch.Tensor.to = moved(torch.Tensor.to)
    torch.nn.Module.to = moved(torch.nn.Module.to)


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


def _record(*args, **kwargs):
    return types.SimpleNamespace(args=args, **kwargs)


class _Profile:
    """torch_npu.profiler.profile: built always by MM's Profiler, run only when profiling is on (then refused)."""

    def __init__(self, *args, **kwargs):
        self.settings = kwargs

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Placeholder(f"torch_npu.profiler.profile.{attr}")


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
    # The renamed PrivateUse1 backend makes torch report "npu" as this machine's accelerator (dist.barrier builds
    # its device from it, and PrivateUse1 has no hooks here): the accelerator torch sees is the CPU.
    torch._C._get_accelerator = _returns(torch.device("cpu"))
    root = _module("torch_npu", __version__=VERSION, npu=npu,
                   **{name: _traced(name, fn) for name, fn in REFERENCES.items()})
    root.contrib = _module("torch_npu.contrib")
    root.contrib.transfer_to_npu = _module("torch_npu.contrib.transfer_to_npu")
    root.utils = _module("torch_npu.utils")
    root.utils.collect_env = _module("torch_npu.utils.collect_env")
    # MM's Profiler builds its settings whether or not profiling is on; the settings are inert records here, and
    # only running a profile (profile(...).start/step/stop) is refused as an NPU API
    settings = {name: _record for name in ("_ExperimentalConfig", "schedule", "tensorboard_trace_handler")}
    root.profiler = _module("torch_npu.profiler", profile=_Profile, **settings)
    root._C = _module("torch_npu._C")
    # HCCL group options: Megatron fills them per group (hccl_config); gloo groups take none (new_group drops them)
    hccl_options = type("Options", (), {"__doc__": "HCCL process-group options (ignored by gloo)"})
    root._C._distributed_c10d = _module("torch_npu._C._distributed_c10d",
                                        ProcessGroupHCCL=type("ProcessGroupHCCL", (), {"Options": hccl_options}))
    root.dynamo = _module("torch_npu.dynamo")
    air = _module("torchair", register_fx_node_ge_converter=_register_nothing)
    air.ge_concrete_graph = _module("torchair.ge_concrete_graph")
    air.ge_concrete_graph.fx2ge_converter = _module("torchair.ge_concrete_graph.fx2ge_converter",
                                                    register_fx_node_ge_converter=_register_nothing,
                                                    declare_supported=_register_nothing)
    _point_cuda_at_cpu(torch)
    _device_to_cpu(torch)
    _gloo_everywhere(torch)
    return root
