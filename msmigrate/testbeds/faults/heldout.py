"""The held-out group: faults written blind, from the categories the classifier issue names (raw framework errors,
a fault that surfaces in another phase's gate, value ranges the trainer hits, host and runtime conditions), by
someone who had not run them, and never run while the classifier or the gates were being changed. The benchmark
reports their figures apart from the rest (``heldout``); a change fitted to one of them would void that figure, so a
miss here is recorded, not fixed by editing the fault or by a rule keyed on its message."""

from __future__ import annotations

from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine
from msmigrate.testbeds.faults.model import CLASS_HEAD


def _method(body: str) -> Replace:
    return Replace("{modeling}", CLASS_HEAD, CLASS_HEAD + body)


_MODELING = ("{modeling}", "{plugin}")

# A host library the runtime's Pillow was linked against is gone (an OS upgrade removed libjpeg's old soname)
_PIL_LIB_GONE = '''import sys
class _Gone:
    def find_spec(self, name, path=None, target=None):
        if name == "PIL._imaging":
            raise ImportError("libjpeg.so.8: cannot open shared object file: No such file or directory")
        return None
sys.meta_path.insert(0, _Gone())
'''

# The container's shared memory (/dev/shm) is too small: the trainer's loader dies with a bus error
_SHM_EXHAUSTED = '''import os
if os.environ.get('RANK') is not None:
    import torch.utils.data as _tud
    _real_iter = _tud.DataLoader.__iter__
    def _iter(self):
        raise RuntimeError("DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
                           "dataloader's workers are out of shared memory. Please try to raise your shared memory "
                           "limit.")
    _tud.DataLoader.__iter__ = _iter
'''

# The host's open-file limit is tiny (a service unit with LimitNOFILE=64): the trainer runs out of descriptors
_NOFILE_LOW = '''import os
if os.environ.get('RANK') is not None:
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))
'''

FAULTS = [
    Fault("ho-model-forward-returns-tuple", "model", "plugin",
          "a forward override returns (loss, logits) as a tuple, as an older training script expected",
          (_method("    def forward(self, *args, **kwargs):\n"
                   "        out = super().forward(*args, **kwargs)\n"
                   "        return out.loss, out.logits\n\n"),),
          fix=_MODELING, heldout=True),
    Fault("ho-model-forward-not-implemented", "model", "plugin",
          "a forward left as a TODO stub while porting the vision merge",
          (_method("    def forward(self, *args, **kwargs):\n"
                   "        raise NotImplementedError(\"TODO: port the vision-token merge from the source\")\n\n"),),
          fix=_MODELING, heldout=True),
    Fault("ho-model-hardcoded-cuda", "model", "plugin",
          "the plugin's forward moves the input ids to a hard-coded 'cuda' device (copied from a GPU notebook)",
          (_method("    def forward(self, *args, **kwargs):\n"
                   "        if kwargs.get(\"input_ids\") is not None:\n"
                   "            kwargs[\"input_ids\"] = kwargs[\"input_ids\"].to(\"cuda\")\n"
                   "        return super().forward(*args, **kwargs)\n\n"),),
          fix=_MODELING, heldout=True),
    Fault("ho-data-collator-pads-labels-zero", "data", "collator",
          "the collator pads the labels with 0 (the pad id) instead of the ignore index",
          (Replace("{collator}", '("labels", self.label_pad_token_id)', '("labels", 0)'),),
          fix=("func_utils/collator.py", "data_collator.py", "label_pad_token_id"), heldout=True),
    Fault("ho-data-records-wrapped-object", "data", "dataset",
          "the records exported as {\"samples\": [...]} instead of a list of samples",
          (Replace("{data}", "[\n {", '{"samples": [\n {'), Replace("{data}", "\n }\n]", "\n }\n]}")),
          fix=("train.json",), heldout=True),
    Fault("ho-data-mm-plugin-grayscale", "data", "mm_plugin",
          "the mm_plugin's image preprocessing converts every image to grayscale ('L') instead of RGB",
          (Replace("{mm_plugin}", 'return image if image.mode == "RGB" else image.convert("RGB")',
                   'return image.convert("L")'),),
          fix=("mm_plugin.py", "_preprocess_image"), heldout=True),
    Fault("ho-config-micro-batch-negative", "config", "yaml", "micro_batch_size: -1 (meant as 'use the default')",
          (SetLine("{config}", "micro_batch_size", "-1"),), fix=("micro_batch_size",), heldout=True),
    Fault("ho-config-train-iters-zero", "config", "yaml", "train_iters: 0 (meant as 'one epoch')",
          (SetLine("{config}", "train_iters", "0"),), fix=("train_iters",), heldout=True),
    Fault("ho-config-attn-impl-unavailable", "config", "yaml",
          "attn_implementation set to flash_attention_2, which this runtime does not have",
          (SetLine("{config}", "attn_implementation", "flash_attention_2"),), fix=("attn_implementation",),
          heldout=True),
    Fault("ho-config-launch-no-devices", "config", "launch",
          "the launch script's default device count edited to 0 (meant as 'all devices')",
          (Replace("{launch}", "NPUS_PER_NODE=${NPUS_PER_NODE:-2}", "NPUS_PER_NODE=${NPUS_PER_NODE:-0}"),),
          fix=("{launch}", "NPUS_PER_NODE", "nproc_per_node"), heldout=True),
    Fault("ho-env-pillow-host-lib-gone", "environment", "runtime",
          "an OS upgrade removed the libjpeg release the runtime's Pillow was built against",
          runtime=Runtime(sitecustomize=_PIL_LIB_GONE), fix=("libjpeg", "Pillow", "pillow"), heldout=True),
    Fault("ho-env-shm-exhausted", "environment", "host",
          "the container's /dev/shm is too small for the trainer's data loader",
          runtime=Runtime(sitecustomize=_SHM_EXHAUSTED), fix=("shared memory", "shm"), heldout=True),
    Fault("ho-env-open-files-limit", "environment", "host",
          "the host's open-file limit is tiny (a service unit with a low LimitNOFILE)",
          runtime=Runtime(sitecustomize=_NOFILE_LOW), fix=("open files", "ulimit", "NOFILE"), heldout=True),
]
