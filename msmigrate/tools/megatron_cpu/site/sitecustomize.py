"""Launch shim of the Megatron route on a CPU machine: Python imports this at start-up in every process whose
PYTHONPATH starts with this folder (torchrun's workers included), before the target's code runs.

It does one thing: when no real torch_npu is installed, importing ``torch_npu`` (MindSpeed's adaptor does it first)
or another NPU-only package (``NPU_ONLY``) loads msmigrate's CPU stub instead (``torch_npu_stub.install``; the
kernels are ``npu_kernels``; a submodule the stub does not define is an empty placeholder module). Nothing happens at
start-up beyond adding a finder, so processes that never import torch_npu (torchrun's agent) pay nothing. A
sitecustomize the venv had is still run after it. Standalone: imports nothing from msmigrate.
"""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG = os.path.dirname(_HERE)
NPU_ONLY = ("torch_npu", "torchair")  # torchair: torch_npu's graph compiler, imported by MindSpeed's op builders


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        root = name.split(".")[0]
        if root not in NPU_ONLY:
            return None
        if root == name:
            sys.meta_path.remove(self)
            try:
                real = importlib.util.find_spec(root)
            finally:
                sys.meta_path.insert(0, self)
            if real is not None:  # an accelerator machine: the real one
                return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        if _PKG not in sys.path:
            sys.path.append(_PKG)
        import torch_npu_stub

        if spec.name == "torch_npu":
            return torch_npu_stub.install()
        torch_npu_stub.install()
        return sys.modules.get(spec.name) or torch_npu_stub.placeholder_module(spec.name)

    def exec_module(self, module):
        return None


if os.environ.get("MSMIGRATE_MEGATRON_CPU_SHIM", "1") != "0":
    sys.meta_path.insert(0, _StubFinder())


def _chain_next_sitecustomize():
    """Run the sitecustomize that this one shadows (a venv's own), if any."""
    here = os.path.normcase(_HERE)
    for entry in sys.path:
        if os.path.normcase(os.path.abspath(entry or ".")) == here:
            continue
        cand = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.isfile(cand):
            spec = importlib.util.spec_from_file_location("_msmigrate_shadowed_sitecustomize", cand)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return


_chain_next_sitecustomize()
