"""The seventh held-out group (``h7-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules, the routing code, the gate code, the routing tests or any routing result, and never ran the
classifier or the routing bench on them while writing. They were written from the green qwen2_vl stand-in migration's
delivered files (the plugin package, the YAML, the launch script), the stand-in target's data path (template,
mm_plugin, collator, dataset conversion, dtype table, parallel and training arguments), the fixture checkpoint's
files, the fault machinery (injection.py) and the earlier groups' fault lists (read only for their ids and stories,
to leave out every mechanism they already cover), from how public VLM fine-tuning, porting and launching reports go
wrong: a loss recomputed with the label smoothing of the source's trainer arguments, a z-loss regulariser kept from
the source's pretraining loop, a forward that cuts the sequence at the source's own context length, the vision
patch embedding's temporal_patch_size set to 1 before the model is built, a forward written for one image per call, the end-of-turn token
masked out of the labels as the source's loss did; an mm_plugin whose pixel bounds were read under each other's
names, a qwen2vl user slot that names the user role after the ShareGPT tag, an answer slot that appends the base
model's <|endoftext|> after <|im_end|>, a collator cut to a static sequence length for graph mode, records whose role
tags a second annotation tool capitalised, answers exported with their text box's trailing newline; a chat_template
file named by the recipe this YAML was copied from, gradient reduction in bf16 from an NPU recipe, an expert
parallel size from the MoE sibling's recipe, an lr pasted a second time at the end of the training block (YAML keeps
the last), the accumulation count of a large recipe that needs more samples per step than there are; a launch script
with the multi-node example's NNODES=2 on one host, and one that tees its log into a folder of the cluster template
that does not exist here; model weights copied by another user without read permission, two OpenMP runtimes loaded
into one process, an LD_LIBRARY_PATH that puts a toolkit's older libstdc++ ahead of the system's, a faulty node
whose processes segfault once their process group is up, a tools folder on PYTHONPATH whose copy.py shadows the
standard library.

Some fail loudly, some only change numbers (label smoothing, z-loss, the cut sequences, the trailing newline,
bf16 gradient reduction, the duplicated lr); several would show in another phase's gate than the owner's (a plugin
that fails inside the vision merge on a batch of several images, a template edit that only shows as other losses, a
YAML key whose failure comes from the data path's chat template loading, a shell profile that breaks the import of a
library, weights that fail to open in the model build). The public reports read for them are issue threads of the
same conditions (OMP Error #15 with two libiomp runtimes, GLIBCXX versions not found when a toolkit's lib64 comes
first on LD_LIBRARY_PATH, torchrun waiting for a second node that never joins, label_smoothing_factor carried into a
port, a local file shadowing a standard-library module). Each fault was chosen for being a mechanism no earlier group
has and for how users get there, and was checked only for applying to the green migration and for changing what it
computes (or producing its condition), never for how it would be routed. Like the earlier held-out groups, their
figures are reported apart (``--group heldout7``) and a miss is recorded, never fixed by editing the fault or by a
rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin /
template / collator, the YAML, the launch script); the records, the runtime and the host are not the run's to
rewrite."""

from __future__ import annotations

from msmigrate.testbeds.faults.heldout3 import _wrapping_forward
from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine, after_import

_MODELING = ("{modeling}", "{plugin}")
_COLLATOR = ("func_utils/collator.py", "collator.py")
_SUPER_INIT = "        super().__init__(config, *args, **kwargs)\n"
# the qwen2vl registration's user, answer and system slots, made unique by the observation slot that follows them
_QWEN2VL_SLOTS = ('format_user=StringFormatter(slots=["<|im_start|>user\\n{{content}}<|im_end|>\\n<|im_start|>'
                  'assistant\\n"]),\n'
                  '        format_assistant=StringFormatter(slots=["{{content}}<|im_end|>\\n"]),\n'
                  '        format_system=StringFormatter(slots=["<|im_start|>system\\n{{content}}<|im_end|>\\n"]),\n'
                  '        format_observation=StringFormatter(slots=["<|im_start|>tool\\n')
_PIXEL_BOUNDS = ('image_max_pixels=getattr(processor, "image_max_pixels", 768 * 768),\n'
                 '                image_min_pixels=getattr(processor, "image_min_pixels", 32 * 32),')
_LONGEST = 'longest = max(len(f["input_ids"]) for f in features)'

# The checkpoint folder was copied onto the shared disk by another user with their umask (0600 files): the folder
# lists, but the weight file cannot be opened by the job's user
_WEIGHTS_NOT_READABLE = '''import builtins, errno, io, os
def _denied(path):
    try:
        return os.fsdecode(os.fspath(path)).endswith(".safetensors")
    except TypeError:
        return False
def _refuse(path):
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(os.fspath(path)))
_open = builtins.open
def _open_checked(file, *args, **kwargs):
    if _denied(file):
        _refuse(file)
    return _open(file, *args, **kwargs)
builtins.open = io.open = _open_checked
_access = os.access
os.access = lambda path, mode, *a, **k: False if _denied(path) and mode & os.R_OK else _access(path, mode, *a, **k)
''' + after_import("safetensors", '''def _patch(module):
    real = module.safe_open
    class safe_open:
        def __new__(cls, filename, *args, **kwargs):
            if _denied(filename):
                _refuse(filename)
            return real(filename, *args, **kwargs)
    module.safe_open = safe_open
''')

# A conda MKL numpy's libiomp5 and the pip torch wheel's bundled OpenMP runtime both loaded in one process: the Intel
# runtime aborts at initialisation (the message the real runtime prints)
_TWO_OPENMP = after_import("torch", '''def _patch(module):
    if os.environ.get("KMP_DUPLICATE_LIB_OK", "").upper() == "TRUE":
        return
    import resource, signal
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.stderr.write("OMP: Error #15: Initializing libiomp5.so, but found libgomp.so.1 already initialized.\\n"
                     "OMP: Hint This means that multiple copies of the OpenMP runtime have been linked into the "
                     "program. That is dangerous, since it can degrade performance or cause incorrect results.\\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGABRT)
''')

# The toolkit's set_env.sh puts its own lib64 (with an older libstdc++) ahead of the system's on LD_LIBRARY_PATH: the
# tokenizers extension, built against a newer libstdc++, cannot be loaded
_TOOLKIT_LIB64 = "/usr/local/Ascend/ascend-toolkit/latest/lib64"
_OLD_LIBSTDCXX = '''import sys
class _OldLibstdcxx:
    def find_spec(self, name, path=None, target=None):
        if name == "tokenizers.tokenizers":
            raise ImportError("@LIB@/libstdc++.so.6: version `GLIBCXX_3.4.29' not found (required by "
                              "/opt/envs/mm/lib/python3.11/site-packages/tokenizers/tokenizers.abi3.so)")
        return None
sys.meta_path.insert(0, _OldLibstdcxx())
'''.replace("@LIB@", _TOOLKIT_LIB64)

# A faulty node (failing memory or a broken driver): every process segfaults once its process group is up (faulthandler
# output as Python prints it; no core file written here)
_FAULTY_NODE = after_import("torch.distributed.distributed_c10d", '''def _patch(module):
    real = module.init_process_group
    def init_process_group(*args, **kwargs):
        out = real(*args, **kwargs)
        import resource, signal
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        sys.stderr.write("Fatal Python error: Segmentation fault\\n\\n"
                         "Current thread 0x00007f3a (most recent call first):\\n"
                         "  <no Python frame>\\n")
        sys.stderr.flush()
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)
        return out
    module.init_process_group = init_process_group
''')

# The user's profile puts ~/tools on PYTHONPATH, ahead of the standard library; its copy.py (a helper that copies
# checkpoints to the shared disk) shadows the standard library's copy module. The folder is laid out here as it is in
# that home (the entry goes where PYTHONPATH's entries go: ahead of the standard library)
_USER_TOOLS = '''import importlib, os, sys
_TOOLS = os.path.join(os.environ.get("TMPDIR") or "/tmp", "h7-home", "tools")
os.makedirs(_TOOLS, exist_ok=True)
_HELPER = os.path.join(_TOOLS, "copy.py")
if not os.path.isfile(_HELPER):
    with open(_HELPER, "w", encoding="utf-8") as f:
        f.write('"""Copy a checkpoint folder to the shared disk: python ~/tools/copy.py SRC DST"""\\n\\n\\n'
                'def main(src, dst):\\n    import shutil\\n    shutil.copytree(src, dst, dirs_exist_ok=True)\\n\\n\\n'
                'if __name__ == "__main__":\\n    import sys\\n    main(*sys.argv[1:3])\\n')
sys.path.insert(0, _TOOLS)
sys.path_importer_cache.pop(_TOOLS, None)
importlib.invalidate_caches()
'''

MODEL = [
    Fault("h7-model-loss-label-smoothing", "model", "plugin",
          "the plugin's forward recomputes the loss with label_smoothing=0.1, the label_smoothing_factor of the "
          "source's trainer arguments carried into the port: every answer token's target is spread over the "
          "vocabulary, so the loss and its gradients differ from the source's from the first step",
          (_wrapping_forward(after="        labels = kwargs.get(\"labels\")\n"
                                   "        if labels is not None and out.logits is not None:\n"
                                   "            logits = out.logits[:, :-1].float()\n"
                                   "            out.loss = torch.nn.functional.cross_entropy(\n"
                                   "                logits.reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1),\n"
                                   "                ignore_index=-100, label_smoothing=0.1)\n"),),
          fix=(*_MODELING, "label_smoothing", "loss"), repair=True, heldout=True),
    Fault("h7-model-z-loss-from-pretraining", "model", "plugin",
          "the plugin's forward adds a z-loss (1e-4 times the squared log-partition of the logits), the auxiliary "
          "term of the source's pretraining loop kept in while porting its fine-tuning: the loss is larger than "
          "the source's and pulls the logits toward zero",
          (_wrapping_forward(after="        if out.loss is not None:\n"
                                   "            z = torch.logsumexp(out.logits.float(), dim=-1)\n"
                                   "            out.loss = out.loss + 1e-4 * (z ** 2).mean()\n"),),
          fix=(*_MODELING, "z_loss", "logsumexp"), repair=True, heldout=True),
    Fault("h7-model-forward-cuts-at-source-context", "model", "plugin",
          "the plugin's forward cuts input_ids, the mask and the labels at 48 positions, the context guard of the "
          "source's small demo model: the image tokens and the answers past that point are cut off inside the "
          "model while the pixels of every image still arrive",
          (_wrapping_forward(before="        limit = 48  # the source's max_position_embeddings\n"
                                    "        for key in (\"input_ids\", \"attention_mask\", \"labels\", "
                                    "\"mm_token_type_ids\"):\n"
                                    "            if kwargs.get(key) is not None and kwargs[key].dim() == 2:\n"
                                    "                kwargs[key] = kwargs[key][:, :limit]\n"),),
          fix=(*_MODELING, "forward", "input_ids"), repair=True, heldout=True),
    Fault("h7-model-vision-temporal-patch-one", "model", "plugin",
          "the plugin's __init__ sets the vision config's temporal_patch_size to 1 before the model is built, from "
          "the source's image-only encoder that patched single frames: the patch embedding is built for another "
          "input than the checkpoint's weights and the processor's patches",
          (Replace("{modeling}", _SUPER_INIT,
                   "        config.vision_config.temporal_patch_size = 1  # images only: no temporal patching\n"
                   + _SUPER_INIT),),
          fix=(*_MODELING, "temporal_patch_size", "vision_config"), repair=True, heldout=True),
    Fault("h7-model-forward-first-image-only", "model", "plugin",
          "the plugin's forward keeps the first image's patches and grid only, written for the source's demo that "
          "passed one image per call: a batch of several images has image tokens for all of them and features "
          "for one",
          (_wrapping_forward(before="        grid = kwargs.get(\"image_grid_thw\")\n"
                                    "        if grid is not None and len(grid) > 1:\n"
                                    "            n = int(grid[0].prod())\n"
                                    "            kwargs[\"pixel_values\"] = kwargs[\"pixel_values\"][:n]\n"
                                    "            kwargs[\"image_grid_thw\"] = grid[:1]\n"),),
          fix=(*_MODELING, "image_grid_thw", "pixel_values"), repair=True, heldout=True),
    Fault("h7-model-end-of-turn-labels-masked", "model", "plugin",
          "the plugin's forward sets the labels equal to the text config's eos_token_id (<|im_end|>) to -100, as "
          "the source's loss did for its padding: the model is never trained to end its answer",
          (_wrapping_forward(before="        labels = kwargs.get(\"labels\")\n"
                                    "        eos = self.config.get_text_config().eos_token_id\n"
                                    "        if labels is not None and isinstance(eos, int):\n"
                                    "            kwargs[\"labels\"] = labels.masked_fill(labels == eos, -100)\n"),),
          fix=(*_MODELING, "labels", "eos_token_id"), repair=True, heldout=True),
]

DATA = [
    Fault("h7-data-mm-plugin-pixel-bounds-crossed", "data", "mm_plugin",
          "the mm_plugin's pixel bounds read under each other's names (image_max_pixels from image_min_pixels and "
          "back), from an edit that followed a processor listing min before max: the bound that should shrink an "
          "image is 0 and the one that should enlarge it is the maximum",
          (Replace("{mm_plugin}", _PIXEL_BOUNDS,
                   'image_max_pixels=getattr(processor, "image_min_pixels", 32 * 32),\n'
                   '                image_min_pixels=getattr(processor, "image_max_pixels", 768 * 768),'),),
          fix=("mm_plugin.py", "image_max_pixels", "image_min_pixels"), repair=True, heldout=True),
    Fault("h7-data-template-user-role-human", "data", "template",
          "the qwen2vl user slot edited to open with <|im_start|>human, the role name of the ShareGPT records the "
          "user had converted: the chat model was trained with the role 'user', so every prompt differs",
          (Replace("{template}", _QWEN2VL_SLOTS,
                   _QWEN2VL_SLOTS.replace("<|im_start|>user\\n", "<|im_start|>human\\n", 1)),),
          fix=("template.py", "format_user"), repair=True, heldout=True),
    Fault("h7-data-template-answer-endoftext", "data", "template",
          "the qwen2vl answer slot given <|endoftext|> after <|im_end|> 'so generation surely stops', the base "
          "model's end token: every answer is trained to emit one token more than the chat model does",
          (Replace("{template}", _QWEN2VL_SLOTS,
                   _QWEN2VL_SLOTS.replace('["{{content}}<|im_end|>\\n"]', '["{{content}}<|im_end|>\\n<|endoftext|>"]',
                                          1)),),
          fix=("template.py", "format_assistant"), repair=True, heldout=True),
    Fault("h7-data-collator-static-length", "data", "collator",
          "the collator cuts and pads every sample to a fixed 48 tokens, a static shape for the accelerator's "
          "graph mode from a text recipe: samples longer than that lose their tails (image tokens and answers) "
          "while their images are still gathered whole",
          (Replace("{collator}", _LONGEST,
                   "longest = 48  # static shape for graph mode\n"
                   "        for f in features:\n"
                   "            for key in (\"input_ids\", \"attention_mask\", \"labels\"):\n"
                   "                f[key] = list(f[key])[:longest]"),),
          fix=(*_COLLATOR, "longest", "truncat"), repair=True, heldout=True),
    Fault("h7-data-records-roles-capitalised", "data", "dataset",
          "the records re-exported by a second annotation tool that writes its role tags capitalised ('User', "
          "'Assistant'): no turn matches the role tags the YAML maps",
          (Replace("{data}", '"role": "user"', '"role": "User"', count=0),
           Replace("{data}", '"role": "assistant"', '"role": "Assistant"', count=0)),
          fix=("train.json", "role"), heldout=True),
    Fault("h7-data-records-answers-trailing-newline", "data", "dataset",
          "the answers exported from the annotation tool's text boxes with their trailing newline: every answer "
          "trains one more token before the end of the turn than the source's records",
          (Replace("{data}", 'background."', 'background.\\n"', count=0),),
          fix=("train.json", "content"), heldout=True),
]

CONFIG = [
    Fault("h7-config-chat-template-from-other-recipe", "config", "yaml",
          "chat_template: examples/qwen3vl/chat_template.jinja kept from the recipe this YAML was copied from: a "
          "chat template file takes priority over the template, and that file is not in this checkout",
          (Replace("{config}", "      template: qwen2vl\n",
                   "      template: qwen2vl\n      chat_template: examples/qwen3vl/chat_template.jinja\n"),),
          fix=("chat_template",), repair=True, heldout=True),
    Fault("h7-config-reduce-dtype-bf16", "config", "yaml",
          "reduce_dtype: bf16 from an NPU recipe while the parameters stay fp32: the gradients are averaged over "
          "the ranks in bfloat16, so every update differs a little from the source's",
          (SetLine("{config}", "reduce_dtype", "bf16"),), fix=("reduce_dtype",), repair=True, heldout=True),
    Fault("h7-config-expert-parallel-from-moe-recipe", "config", "yaml",
          "expert_parallel_size: 2 copied from the 30B-A3B MoE sibling's recipe: this model is dense and has no "
          "experts to place",
          (SetLine("{config}", "expert_parallel_size", "2"),), fix=("expert_parallel_size",), repair=True,
          heldout=True),
    Fault("h7-config-lr-pasted-twice", "config", "yaml",
          "a block of overrides pasted at the end of the training section from a colleague's recipe repeats "
          "lr: 1.0e-5: YAML keeps the last of the two keys, so the run trains at a tenth of the source's rate",
          (Replace("{config}", "  no_load_rng: true\n", "  no_load_rng: true\n  lr: 1.0e-5\n"),),
          fix=("lr",), repair=True, heldout=True),
    Fault("h7-config-grad-accum-from-large-recipe", "config", "yaml",
          "gradient_accumulation_steps: 16 from the 72B recipe: a step then needs 16 micro-batches per rank, more "
          "than the records hold",
          (SetLine("{config}", "gradient_accumulation_steps", "16"),), fix=("gradient_accumulation_steps",),
          repair=True, heldout=True),
    Fault("h7-config-launch-nnodes-from-multinode", "config", "launch",
          "NNODES=2 kept from the multi-node example the launch script was rebuilt from, started on one host: "
          "torchrun waits at the rendezvous for a second node that never joins",
          (SetLine("{launch}", "NNODES", "2", sep="="),), fix=("{launch}", "NNODES"), repair=True, heldout=True),
    Fault("h7-config-launch-log-to-cluster-folder", "config", "launch",
          "the log tee'd into /var/log/mindspeed/, the folder of the cluster's job template that exists on its "
          "login nodes only: tee cannot open the file and the pipeline's exit status is tee's, not the trainer's",
          (Replace("{launch}", "| tee logs/train_${logfile}.log", "| tee /var/log/mindspeed/train_${logfile}.log"),),
          fix=("{launch}", "tee", "logs"), repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h7-env-weights-not-readable", "environment", "host",
          "the checkpoint was copied onto the shared disk by another user whose umask made the files 0600: the "
          "folder lists, but model.safetensors cannot be opened (Permission denied)",
          runtime=Runtime(sitecustomize=_WEIGHTS_NOT_READABLE),
          fix=("Permission denied", "model.safetensors", "chmod"), heldout=True),
    Fault("h7-env-two-openmp-runtimes", "environment", "runtime",
          "a conda numpy linked against MKL's libiomp5 installed next to the pip torch wheel with its own OpenMP: "
          "the Intel runtime aborts when it finds another already initialised (OMP: Error #15)",
          runtime=Runtime(sitecustomize=_TWO_OPENMP), fix=("OpenMP", "libiomp5", "KMP_DUPLICATE_LIB_OK"),
          heldout=True),
    Fault("h7-env-toolkit-libstdcxx-first", "environment", "runtime",
          "the toolkit's set_env.sh puts its lib64 with an older libstdc++ ahead of the system's on "
          "LD_LIBRARY_PATH: the tokenizers extension cannot load (GLIBCXX_3.4.29 not found)",
          runtime=Runtime(env={"LD_LIBRARY_PATH": _TOOLKIT_LIB64}, sitecustomize=_OLD_LIBSTDCXX),
          fix=("LD_LIBRARY_PATH", "libstdc++", "GLIBCXX"), heldout=True),
    Fault("h7-env-faulty-node-segfault", "environment", "host",
          "the job landed on a faulty node (failing memory, a broken driver): every rank segfaults once its "
          "process group is up, on any code",
          runtime=Runtime(sitecustomize=_FAULTY_NODE), fix=("Segmentation fault", "node", "SIGSEGV"), heldout=True),
    Fault("h7-env-pythonpath-tools-shadow-copy", "environment", "runtime",
          "the user's profile puts ~/tools on PYTHONPATH, where a helper script copy.py (it copies checkpoints to "
          "the shared disk) shadows the standard library's copy module: the first 'from copy import deepcopy' "
          "fails",
          runtime=Runtime(sitecustomize=_USER_TOOLS), fix=("PYTHONPATH", "copy.py"), heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
