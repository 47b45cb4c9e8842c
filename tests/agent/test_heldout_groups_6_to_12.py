"""The sixth to twelfth held-out fault groups (msmigrate/testbeds/faults/heldout6.py, heldout7.py, heldout8.py,
heldout9.py, heldout10.py, heldout11.py, heldout12.py) are each well formed, selectable on their own and apply: every
edit fault's anchors are in a green rules migration of qwen2_vl on the stand-in (built once here, for all seven) and
change the files they name, leaving Python that compiles, YAML that parses and shell that bash parses; the faults in
the data path and the plugin change what the data path or the model computes on the same records (or make it fail);
every runtime fault's simulation, run in a wrapped interpreter, produces the condition it stands for, and the same
program without it gets past that point. Nothing here runs the gates on a faulted copy or classifies anything: that
measurement is the routing benchmark's (``--group heldout6`` …), made by someone other than the faults' authors. Each
group was written blind by its own author; their checks share this one file (they differed only in the group and the
runtime programs)."""

from __future__ import annotations

import signal
import socket

import pytest
from heldout_checks import (assert_bench_reports_every_group, assert_computes_otherwise, assert_group_apart,
                            computed_on_green, run_wrapped_and_plain)
from standin_migration import apply_fault_checked, fault_copy, green_for_faults

from msmigrate.testbeds.faults import heldout6, heldout7, heldout8, heldout9, heldout10, heldout11, heldout12

GROUPS = {"heldout6": ("h6-", heldout6.FAULTS), "heldout7": ("h7-", heldout7.FAULTS),
          "heldout8": ("h8-", heldout8.FAULTS), "heldout9": ("h9-", heldout9.FAULTS),
          "heldout10": ("h10-", heldout10.FAULTS), "heldout11": ("h11-", heldout11.FAULTS),
          "heldout12": ("h12-", heldout12.FAULTS)}
FAULTS = {f.id: f for _, faults in GROUPS.values() for f in faults}
EDITS = sorted(i for i, f in FAULTS.items() if f.edits)
RUNTIMES = sorted(i for i, f in FAULTS.items() if f.runtime is not None)


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_the_group_is_registered_apart_blind_and_spread_over_owners_and_surfaces(group):
    prefix, faults = GROUPS[group]
    by_id = {f.id: f for f in faults}
    assert_group_apart(group, by_id, prefix, 24, {"model": 6, "data": 6, "config": 7, "environment": 5})
    assert sum(f.surface == "launch" for f in faults) >= 2


def test_the_bench_reports_the_groups_apart():
    assert_bench_reports_every_group()


@pytest.fixture(scope="module")
def green(tmp_path_factory):
    """The green migration's target at the run's commit, its source, and where its files are."""
    return green_for_faults(tmp_path_factory.mktemp("heldout_green"))


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", EDITS)
def test_each_edit_fault_applies_to_the_green_migration_and_changes_its_file(green, tmp_path, fault_id):
    layout = fault_copy(green, tmp_path)
    apply_fault_checked(FAULTS[fault_id], layout)


_DATA_PATH = {"template", "mm_plugin"}
# a YAML fault that changes what the data path computes (its pixel bound changes the pixels it hands the model)
_PIXEL_BOUND = "h6-config-image-min-pixels-from-model-card"
COMPUTED = sorted(i for i, f in FAULTS.items() if f.surface in _DATA_PATH | {"plugin", "collator"} or i == _PIXEL_BOUND)


@pytest.fixture(scope="module")
def green_computed(green, tmp_path_factory):
    return computed_on_green(green, tmp_path_factory.mktemp("heldout_green_computed"))


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", COMPUTED)
def test_each_data_path_and_plugin_fault_changes_what_is_computed_or_fails(green, green_computed, tmp_path,
                                                                          fault_id):
    fault = FAULTS[fault_id]
    layout = fault_copy(green, tmp_path)
    apply_fault_checked(fault, layout)
    assert_computes_otherwise(layout, green, green_computed,
                              "model" if fault.surface in ("plugin", "collator") else "data", tmp_path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Per runtime fault: the variables, the program and what it prints under the wrapped interpreter (a signal: the
# process is killed by it, with that text on stderr); "{source}" is the green migration's checkpoint folder
SIMULATED = {
    "h6-env-pythonhome-other-prefix": ({}, "import json\n", "No module named 'encodings'"),
    "h6-env-glibc-too-old": ({}, "import torch\n", "GLIBC_2.28' not found"),
    "h6-env-pillow-before-resampling": (
        {}, "from transformers.image_utils import PILImageResampling\n",
        "module 'PIL.Image' has no attribute 'Resampling'"),
    "h6-env-container-pids-limit": (
        {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "{port}"},
        "import torch.distributed as dist\ndist.init_process_group('gloo')\ndist.destroy_process_group()\n",
        (signal.SIGABRT, "Resource temporarily unavailable")),
    "h6-env-weights-without-preprocessor-config": (
        {}, "from transformers import AutoImageProcessor\n"
            "AutoImageProcessor.from_pretrained({source!r}, local_files_only=True)\n",
        "preprocessor_config.json"),
    "h7-env-weights-not-readable": (
        {}, "from safetensors import safe_open\n"
            "safe_open({source!r} + '/model.safetensors', framework='pt')\n",
        "Permission denied"),
    "h7-env-two-openmp-runtimes": ({}, "import torch\n", (signal.SIGABRT, "OMP: Error #15")),
    "h7-env-toolkit-libstdcxx-first": ({}, "import tokenizers\n", "GLIBCXX_3.4.29' not found"),
    "h7-env-faulty-node-segfault": (
        {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "{port}"},
        "import torch.distributed as dist\ndist.init_process_group('gloo')\ndist.destroy_process_group()\n",
        (signal.SIGSEGV, "Segmentation fault")),
    "h7-env-pythonpath-tools-shadow-copy": ({}, "from copy import deepcopy\n", "cannot import name 'deepcopy'"),
    "h8-env-python-built-without-ctypes": ({}, "import torch\n", "No module named '_ctypes'"),
    "h8-env-address-space-ulimit": ({}, "import torch\n", "failed to map segment from shared object"),
    "h8-env-weights-rewritten-while-mapped": (
        {}, "from safetensors import safe_open\n"
            "with safe_open({source!r} + '/model.safetensors', framework='pt') as f:\n"
            "    f.get_tensor(next(iter(f.keys())))\n",
        (signal.SIGBUS, "Bus error")),
    # (no thread cap in the environment, as on the host the fault stands for)
    "h8-env-openblas-too-many-regions": (
        {"OPENBLAS_NUM_THREADS": "", "OMP_NUM_THREADS": ""}, "import numpy\nnumpy.ones((4, 4)) @ numpy.ones((4, 4))\n",
        (signal.SIGSEGV, "too many memory regions")),
    "h8-env-dataset-on-object-store-mount": (
        {}, "from PIL import Image\n"
            "Image.open({source!r} + '/data/images/sample_00.png').load()\n",
        "Connection timed out"),
    "h9-env-libgomp-static-tls": ({}, "import torch\n", "cannot allocate memory in static TLS block"),
    "h9-env-torchvision-other-torch": (
        {}, "from transformers import AutoImageProcessor\n"
            "AutoImageProcessor.from_pretrained({source!r}, local_files_only=True)\n",
        "operator torchvision::nms does not exist"),
    "h9-env-login-node-cpu-time-limit": (
        {"RANK": "0"}, "import torch\nw = torch.ones(2, requires_grad=True)\n"
                       "for _ in range(4):\n    (w * 2).sum().backward()\n",
        (signal.SIGXCPU, "CPU time limit exceeded")),
    "h9-env-hostname-unresolvable": (
        {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "{port}"},
        "import torch.distributed as dist\ndist.init_process_group('gloo')\ndist.destroy_process_group()\n",
        "Unable to find address for"),
    "h9-env-max-map-count-low": (
        {}, "from safetensors import safe_open\n"
            "with safe_open({source!r} + '/model.safetensors', framework='pt') as f:\n"
            "    f.get_tensor(next(iter(f.keys())))\n",
        "Cannot allocate memory"),
    # (the plain runtime of a host without an accelerator refuses the call on its own: that refusal is let through)
    "h10-env-device-occupied": (
        {"RANK": "0"}, "import torch\ntry:\n    torch.accelerator.set_device_index(0)\n"
                       "except RuntimeError as e:\n    if 'none is available' not in str(e):\n        raise\n",
        "is in use by another process"),
    "h10-env-toolkit-newer-than-driver": (
        {"RANK": "0"}, "import torch\ntry:\n    torch.accelerator.set_device_index(0)\n"
                       "except RuntimeError as e:\n    if 'none is available' not in str(e):\n        raise\n",
        "is older than this toolkit"),
    "h10-env-output-pipe-reader-gone": ({"RANK": "0"}, "print('iteration 1', flush=True)\n", "Broken pipe"),
    "h10-env-tmp-cleaner-removed-images": (
        {}, "from PIL import Image\n"
            "Image.open({source!r} + '/data/images/sample_00.png').load()\n",
        "No such file or directory"),
    "h10-env-stale-torch-npu-autoloaded": ({}, "import torch\n", "Failed to load the backend extension: torch_npu"),
    "h11-env-torch-cuda-wheel-without-deps": ({}, "import torch\n", "libcudnn.so.9: cannot open shared object file"),
    "h11-env-mkl-threading-layer-intel": (
        {}, "import torch\nimport numpy\n", "MKL_THREADING_LAYER=INTEL is incompatible with libgomp.so.1"),
    "h11-env-ephemeral-ports-exhausted": (
        {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "{port}"},
        "import torch.distributed as dist\ndist.init_process_group('gloo')\ndist.destroy_process_group()\n",
        "Cannot assign requested address"),
    "h11-env-weights-copy-truncated": (
        {}, "from safetensors import safe_open\n"
            "with safe_open({source!r} + '/model.safetensors', framework='pt') as f:\n"
            "    f.get_tensor(next(iter(f.keys())))\n",
        "incomplete metadata, file not fully covered"),
    "h11-env-stale-visible-devices": (
        {"RANK": "0"}, "import torch\ntry:\n    torch.accelerator.set_device_index(0)\n"
                       "except RuntimeError as e:\n    if 'none is available' not in str(e):\n        raise\n",
        "invalid device ID"),
    "h12-env-jemalloc-preloaded-page-size": ({}, "import json\n", (signal.SIGABRT, "Unsupported system page size")),
    "h12-env-conda-mkl-2024-under-pip-torch": ({}, "import torch\n", "undefined symbol: iJIT_NotifyEvent"),
    "h12-env-weights-on-fuse-without-mmap": (
        {}, "from safetensors import safe_open\n"
            "with safe_open({source!r} + '/model.safetensors', framework='pt') as f:\n"
            "    f.get_tensor(next(iter(f.keys())))\n",
        "No such device (os error 19)"),
    "h12-env-hub-cache-symlinks-dangling": (
        {}, "from safetensors import safe_open\n"
            "with safe_open({source!r} + '/model.safetensors', framework='pt') as f:\n"
            "    f.get_tensor(next(iter(f.keys())))\n",
        "No such file or directory (os error 2)"),
    "h12-env-localhost-ipv6-only-ipv6-disabled": (
        {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "{port}"},
        "import torch.distributed as dist\ndist.init_process_group('gloo')\ndist.destroy_process_group()\n",
        "address family not supported by protocol"),
}


def test_every_runtime_fault_has_a_check():
    assert set(SIMULATED) == set(RUNTIMES)


@pytest.mark.integration
@pytest.mark.parametrize("fault_id", RUNTIMES)
def test_each_runtime_fault_produces_its_condition_in_the_wrapped_runtime(green, tmp_path, fault_id):
    env, program, expect = SIMULATED[fault_id]
    env = {k: v.format(port=_free_port()) for k, v in env.items()}
    program = program.replace("{source!r}", repr(str(green["source"])))
    out, plain = run_wrapped_and_plain(FAULTS[fault_id].runtime, program, env, tmp_path)
    if isinstance(expect, tuple):
        killed_by, text = expect
        assert out.returncode == -killed_by and text in out.stderr, (out.returncode, out.stderr[-2000:])
    else:
        assert out.returncode != 0 and expect in out.stderr, out.stderr[-2000:]
    # without the fault the same program gets past the point the fault breaks (the simulation is the cause)
    assert plain.returncode == 0, plain.stderr[-2000:]
