"""Faults of the runtime and the host (owner ``environment``): nothing the migration writes can fix them. The target
runtime is wrapped (``faults.wrap_runtime``) so that the condition is real where it can be (a network interface
that does not exist, an interpreter that is not there) and simulated with the message the real condition prints
where it cannot (a full disk, a killed process, an older library): the fix is on the host or in the installed
packages, named in ``fix``."""

from __future__ import annotations

from msmigrate.testbeds.faults.injection import Fault, Runtime

# The simulations act in the trainer's processes only (torchrun sets RANK): probes and the agent are left alone,
# unless a fault means the whole runtime.
_IN_TRAINER = "import os\nif os.environ.get('RANK') is not None:\n"

_FAILING_OPEN = '''import builtins, errno, io, os
_real_open = builtins.open
def _open(file, mode="r", *args, **kwargs):
    name = os.fspath(file) if isinstance(file, (str, bytes, os.PathLike)) else ""
    name = name.decode() if isinstance(name, bytes) else name
    if any(c in mode for c in "wax") and ({match}):
        raise OSError(errno.{code}, os.strerror(errno.{code}), name)
    return _real_open(file, mode, *args, **kwargs)
builtins.open = _open
io.open = _open
'''

_KILLED_AT_STEP = _IN_TRAINER + '''    import torch
    from torch.optim import AdamW
    _real = AdamW.step
    _calls = [0]
    def _step(self, *a, **k):
        _calls[0] += 1
        if _calls[0] == 3:
            os.kill(os.getpid(), 9)  # the host's OOM killer: SIGKILL, no traceback
        return _real(self, *a, **k)
    AdamW.step = _step
'''

_VERSION_SAYS = '''import importlib.metadata as _md
_real_version = _md.version
def _version(name):
    if name.lower() == "{package}":
        return "{says}"
    return _real_version(name)
_md.version = _version
'''

_NUMPY_ABI = '''import sys
class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy.core._multiarray_umath" or name == "numpy._core._multiarray_umath":
            raise ImportError("numpy.core.multiarray failed to import (A module that was compiled using NumPy 1.x "
                              "cannot be run in NumPy 2.0.2 as it may crash)")
        return None
sys.meta_path.insert(0, _Refuse())
'''

_MODULE_GONE = '''import sys
class _Older:
    def find_spec(self, name, path=None, target=None):
        if name == "transformers.models.{model_type}" or name.startswith("transformers.models.{model_type}."):
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return None
sys.meta_path.insert(0, _Older())
'''

FAULTS = [
    Fault("env-gloo-interface", "environment", "host",
          "GLOO_SOCKET_IFNAME exported for another machine's network interface",
          runtime=Runtime(env={"GLOO_SOCKET_IFNAME": "ens1f0np0"}), fix=("GLOO_SOCKET_IFNAME",)),
    Fault("env-runtime-missing", "environment", "runtime",
          "runtime_python points at a conda env that was removed",
          runtime=Runtime(missing=True), fix=("runtime_python",)),
    Fault("env-transformers-too-old", "environment", "runtime",
          "the target runtime's transformers is a release without this architecture",
          runtime=Runtime(sitecustomize=_MODULE_GONE), fix=("transformers",)),
    Fault("env-tokenizers-version", "environment", "runtime",
          "a tokenizers release outside what the installed transformers requires (pip upgraded it alone)",
          runtime=Runtime(sitecustomize=_VERSION_SAYS.format(package="tokenizers", says="0.10.3")),
          fix=("tokenizers",)),
    Fault("env-numpy-abi", "environment", "runtime",
          "numpy 2 installed under extensions compiled against numpy 1",
          runtime=Runtime(sitecustomize=_NUMPY_ABI), fix=("numpy",)),
    Fault("env-disk-full-on-save", "environment", "host", "the checkpoint disk fills up at the first save",
          runtime=Runtime(sitecustomize=_FAILING_OPEN.format(
              match='name.endswith(".distcp") or name.endswith(".metadata") or name.endswith(".pt")',
              code="ENOSPC")),
          fix=("No space left", "disk")),
    Fault("env-read-only-save", "environment", "host", "the checkpoint directory is on a read-only mount",
          runtime=Runtime(sitecustomize=_FAILING_OPEN.format(
              match='name.endswith(".distcp") or name.endswith(".metadata") or name.endswith(".pt")',
              code="EROFS")),
          fix=("Read-only file system", "read-only")),
    Fault("env-host-oom-kill", "environment", "host", "the host's OOM killer ends a rank at its third step",
          runtime=Runtime(sitecustomize=_KILLED_AT_STEP), fix=("host memory", "SIGKILL", "-9")),
]
