"""Who owns a failure — written down once, used by failure-catalog entries, corpus labels and the LLM prompt.

The owner of a failure is **the phase whose artifact must change to fix it**; ``environment`` when nothing the
migration writes can fix it. A label is decided by the fix, not by where the traceback points: a shape error raised
inside the model's forward because the data loader yielded nothing is owned by ``data``; an out-of-memory error
fixed by a smaller batch or more sharding is owned by ``config``; the same message caused by a library kernel bug
fixed by upgrading the library is owned by ``environment``.
"""

from __future__ import annotations

OWNER_SEMANTICS: dict[str, str] = {
    "model": "the model plugin code: modeling / adapter classes, forward signature and outputs, weight init and "
             "loading, registration, module names other code relies on",
    "data": "the data path: dataset files and media, their format, the chat template / prompt template, the "
            "processor and mm_plugin, the collator, tokenisation and labels",
    "config": "the training YAML and launch script arguments: parallel sizes, batch and sequence sizes, precision, "
              "attention implementation, paths, trust_remote_code, FSDP / recompute / wrap patterns, optimizer "
              "settings",
    "environment": "what no migration artifact controls: installed package versions (torch, torch_npu, CANN, "
                   "transformers, framework), drivers, the devices present (their count and kind; how much device "
                   "memory a run uses is the settings': config), host memory, disks and mounts, network and ports, "
                   "accelerator runtime variables, cluster / multi-node setup",
}
OWNERS: tuple[str, ...] = tuple(OWNER_SEMANTICS)

# When a message fits two owners, the fact that decides is which artifact would have to change. Each line names such a
# fact for a kind of failure that recurs; they follow from the definitions above (they are not a table fitted to any
# log), and where the excerpt does not show the deciding fact, two owners stay possible and the answer is "unknown".
DECIDING_FACTS: tuple[str, ...] = (
    "Whose code raises or lacks the thing: an installed library's or the training framework's own module, trainer, "
    "optimizer or config class (a path under site-packages, a framework's script or trainer of another release, "
    "installed or run from its source checkout) is environment "
    "- the versions disagree; the model's own classes, its config mapping or code the migration writes is model. "
    "The code path of the root cause tells whose file each frame is (installed package, remote code of the "
    "checkpoint, code outside installed packages): an error raised in an installed package is decided by what "
    "the calling code outside the packages passed it (a setting: config; a sample: data; an object of the "
    "project's own model class lacking what the library needs: model). Code written for another release of a "
    "library it calls (a checkpoint's remote code in transformers_modules, a research project pinned to an older "
    "timm, detectron2 or transformers) fails on an API the installed release renamed or removed: environment when "
    "the fix is installing that release; model when the model's own code must change (a checkpoint's remote code "
    "with a bug of its own, the plugin the migration writes).",
    "A model type or architecture the libraries do not know: environment when it is a published architecture a "
    "newer library release ships; model when it is a project's own architecture that must be registered; config "
    "when the checkpoint ships its code and only trust_remote_code is missing (transformers then asks for "
    "trust_remote_code; 'does not recognize this architecture' means no code was found). The root cause's checked "
    "facts say whether the installed transformers registers the type.",
    "Weights that do not fit the built model (size mismatch, missing / unexpected keys): model when the module "
    "definition or names differ from the checkpoint's; config when the log shows the run's own setting differs "
    "from the checkpoint's (parallel sizes, a hyperparameter argument, a checkpoint of another kind or stage given "
    "as the path: a dimension exactly 1/N of the other, a quantisation, size or variant argument, keys of another "
    "head or training stage, key names or shapes of another architecture's weights, such as another vision "
    "tower's). A dimension that is a count the data or a size argument sets (a vocabulary or "
    "dictionary size, a number of classes, frames or positions) points at that dictionary, dataset or argument: "
    "data or config, not the module. When the log shows no such count or setting, the module definition or its "
    "loading code is what must change: model.",
    "A dataset's own definition file (class names and counts, annotation files, splits of a YOLO / mmdet / COCO "
    "dataset) is data; the training YAML's or argument's path pointing at it is config.",
    "A file that does not exist or cannot be read: data when a dataset / media / tokenizer file itself is missing, "
    "empty or corrupt; config when the path in the message is visibly wrong (mangled, another root, an unexpanded "
    "variable); environment when model weights are truncated or a Git LFS pointer. A well-formed path to a "
    "dataset or media file that is absent means the file itself is missing: data, unless the log shows the path "
    "setting that points at the wrong place. A Hub repository or file that cannot be fetched (private, gated, no "
    "token, no network): environment, unless the repository id in the message is visibly wrong (config).",
    "A collective, store or socket timeout on one rank: the first error another rank printed decides, when the "
    "excerpt shows one; when the timeout is the only error, environment (network, cluster, communication settings).",
    "An Ascend / CANN error code raised inside the runtime or an operator (EZ/EE/EH/EI codes, 5xxxxx / 1xxxxx error "
    "codes, an aicore exception) with no error of the run's own code: environment; the log must name an input the "
    "data or model produced (an out-of-range index, a dtype) for another owner. The same holds for any accelerator "
    "runtime's own fault (HIP / ROCm, XLA / TPU, Habana, oneCCL, MPS, CUDA driver errors).",
    "A device that lacks a dtype or feature the run asks for (bf16 on an older GPU, float64 on MPS, a fused kernel "
    "for another architecture): config when a setting of the run asks for it and can ask for another; model when "
    "the model's own code hard-codes it; environment when the installed build lacks the device's support (a torch "
    "or kernel built without its architecture).",
    "Out of memory on the device: config (batch, sequence length, sharding, offload, recompute), on any device "
    "and whatever its size. An allocation larger than any device (more than 1 EB, a corrupted size) is no shortage: "
    "the owner is whose code computed the size (a library kernel: environment; the model's or the data path's own "
    "code: model or data). A process killed by the host (SIGKILL, exit code -9, a killed DataLoader worker): "
    "environment (host memory) unless the log shows the setting that exhausts it.",
    "Shapes and counts that disagree between the batch and the model (image tokens vs features, labels vs logits): "
    "data when the samples, template or collator produce them; config when the log shows a sequence limit cut the "
    "sample; model when the model's own forward computes the wrong shape.",
    "A loss or gradient norm that turns NaN / Inf part-way through a run: config when a setting makes the arithmetic "
    "overflow (fp16 without loss scaling, the learning rate, a loss scale); data when a sample is bad (all labels "
    "masked, an empty or corrupt sample); environment when a kernel of one library release produces it. The "
    "excerpt seldom shows which; without it, those owners stay possible.",
    "A name the run's YAML or arguments set (a key or argument, a template, dataset, model type, option value) that "
    "the installed framework rejects (not permitted, unrecognized, not a valid choice): config when it is not a name "
    "the framework offers (a typo, another tool's option, the wrong choice); environment when it is a name a newer "
    "(or older) release of the framework offers; data when the template or dataset definition it names is what "
    "must change.",
    "A bus error (SIGBUS, signal 7) in a collective library's threads or a DataLoader worker: the shared memory "
    "the container gives (/dev/shm) is exhausted: environment.",
    "A forward() that misses a required argument or rejects a keyword: the forward signature is the model's, and so "
    "is the code calling one of its modules (model), unless the traceback shows the call is the data path's own "
    "function (mm_plugin, processor, collator, dataset: data) or the batch reaching the model is empty (data).",
    "Parameters without gradients under DDP, gradient checkpointing that fails, an attention implementation the "
    "class lacks: model when the model's code must change; config when an option in the run turns on what the "
    "class cannot do and may simply be turned off. A class of an installed library (transformers' own model "
    "class, by its name or the code path) is not code the migration changes: config (turn the option off, pick "
    "another implementation), even when a newer release adds what it lacks; the project's own class (code outside "
    "installed packages) that the run needs the option for: model. When the excerpt shows neither, both fit.",
)


def owner_semantics_text() -> str:
    """The definition as a bulleted block (prompts and docs render this, so there is one wording)."""
    lines = ["The owner of a failure is the phase whose artifact must change to fix it; `environment` when nothing "
             "the migration writes can fix it. Decide by the fix, not by where the traceback points."]
    lines += [f"- {owner}: {meaning}" for owner, meaning in OWNER_SEMANTICS.items()]
    return "\n".join(lines)


def deciding_facts_text() -> str:
    """The facts that decide between two owners, as a bulleted block (the classify prompt renders this)."""
    return "\n".join(f"- {fact}" for fact in DECIDING_FACTS)
