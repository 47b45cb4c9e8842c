"""The eighth held-out group (``h8-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules, the routing code, the gate code, the routing tests or any routing result, and never ran the
classifier, ``msmigrate verify`` or the routing bench on them while writing. They were written from the green qwen2_vl
stand-in migration's delivered files (the plugin package, the YAML, the launch script, the source's records), the
stand-in target's data path and trainer (template, mm_plugin, collator, dataset conversion, sampler, recompute and
FSDP2 appliers, loss, checkpoint loader), the real MindSpeed-MM snapshot (its recompute wrapper, dataloader, dataset
converters and example recipes, read to keep each fault true of the real framework too), the installed transformers'
Qwen2-VL modeling file, the fault machinery (injection.py) and the earlier groups' fault lists (read only for their
ids and stories, to leave out every mechanism they already cover), from how public VLM porting, fine-tuning and
launching reports go wrong: a loss summed over the tokens as a trainer that divided by an all-reduced token count
did, image features normalised to unit length as CLIP's get_image_features returns them, the processor's patches
re-laid channel-last for the einops patchifier of a ViT port, the image grid handed on as a list of tuples like
LLaVA's image_sizes, a stage-1 mm_projector.bin loaded in __init__ as LLaVA's pretrain_mm_mlp_adapter does, and
LLaVA-NeXT's image_newline row appended to the image features; an mm_plugin that pads every image to a square with
the mean colour (LLaVA's expand2square, image_aspect_ratio: pad), a qwen2vl registration with the image and video
tokens exchanged, a collator that pads the inputs on the left as a batched-generation script did but the labels on
the right, records half converted from ShareGPT (roles renamed, 'value' kept), records carrying the annotation
tool's instruction as a system turn, image paths written with a Windows export's backslashes; a recompute plan
copied from the FSDP plan (embedding and head included, which the recompute wrapper calls with past_key_values), a
sampler named by its torch class, ignored_modules taken from the frozen-ViT fsdp2 recipe while the vision tower
trains (its gradients are then never reduced over the ranks), the template key pasted one level up, a cosine decay
from the recipe template where the source trained at a constant rate; a launch script whose MASTER_ADDR is node-0 of
the cluster it was copied from, and one that backgrounds torchrun with nohup so the script returns at once; an
interpreter built by pyenv without libffi (no _ctypes), a login profile's ulimit -v (torch's libraries cannot be
mapped), a checkpoint rewritten in place by a sync job while the ranks have it mapped (SIGBUS), the OpenBLAS of the
numpy wheel on a host with more cores than it was built for, a dataset folder on an object-store mount whose reads
time out.

Some fail loudly, some only change numbers (the summed loss, the unit-length features, the channel-last patches,
the squared images, the left-padded inputs, the system turn, the unreduced vision gradients, the cosine decay, the
backgrounded launch that returns before training); several would show in another phase's gate than the owner's (the
swapped media tokens and the recompute plan fail inside the model's forward, the half-converted records, the
backslash paths, the sampler name and the misplaced template fail in the data path, the object-store timeouts fail
when the data path opens the first image, the rewritten checkpoint kills the model build). The public reports read for
them are issue threads of the same conditions (OpenBLAS 'too many memory regions' on many-core hosts, 'failed to map
segment from shared object' under RLIMIT_AS, SIGBUS while loading safetensors from a file that changes under the
mapping, 'No module named _ctypes' with pyenv builds lacking libffi-dev, LLaVA's expand2square and mm_projector
loading, per-token versus summed loss normalisation). Each fault was chosen for being a mechanism no earlier group
has and for how users get there, and was checked only for applying to the green migration and for changing what it
computes (or producing its condition), never for how it would be routed. Like the earlier held-out groups, their
figures are reported apart (``--group heldout8``) and a miss is recorded, never fixed by editing the fault or by a
rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin /
template / collator, the YAML, the launch script); the records, the runtime and the host are not the run's to
rewrite."""

from __future__ import annotations

from msmigrate.testbeds.faults.heldout3 import _in_init, _wrapping_forward
from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine, after_import

_MODELING = ("{modeling}", "{plugin}")
_COLLATOR = ("func_utils/collator.py", "collator.py")
# the qwen2vl registration's media tokens (the qwen3 families register their own plugin name, so this is unique)
_QWEN2VL_TOKENS = 'get_mm_plugin(name="qwen2_vl", image_token="<|image_pad|>", video_token="<|video_pad|>")'
_OPENED = "                    out.append(self._preprocess_image(opened.copy(), **kwargs))\n"
_PADDING = '                batch[key].append(seq + [pad] * n if right else [pad] * n + seq)\n'
_RIGHT = '        right = getattr(self.tokenizer, "padding_side", "right") == "right"\n'
_RECOMPUTE = ("  recompute_plan:\n    apply_modules:\n      - model.visual.blocks.{*}\n"
              "      - model.language_model.layers.{*}\n")
_TORCHRUN = "torchrun $DISTRIBUTED_ARGS "
_TEE = "    2>&1 | tee logs/train_${logfile}.log"

# A Python built by pyenv on a host without libffi-dev: the interpreter starts, but its _ctypes extension was never
# compiled, so the first 'import ctypes' (torch imports it at once) fails
_NO_CTYPES = '''import sys
class _NoCtypes:
    def find_spec(self, name, path=None, target=None):
        if name == "_ctypes":
            raise ModuleNotFoundError("No module named '_ctypes'", name="_ctypes")
        return None
sys.meta_path.insert(0, _NoCtypes())
'''

# The login profile of the cluster sets 'ulimit -v 8000000' (8 GB of address space) for every job: torch's large
# shared libraries cannot be mapped, so importing torch fails the way the dynamic loader reports it
_ADDRESS_SPACE_LIMIT = '''import sys
class _AddressSpace:
    def find_spec(self, name, path=None, target=None):
        if name == "torch._C":
            raise ImportError("/opt/envs/mm/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so: failed to map "
                              "segment from shared object", name=name)
        return None
sys.meta_path.insert(0, _AddressSpace())
'''

# An hourly sync job (rsync --inplace from the training cluster's copy) rewrites model.safetensors in place while the
# ranks have it memory-mapped: the pages under the mapping change size and the first read of a tensor dies of SIGBUS
# (faulthandler's report; no core file written here)
_WEIGHTS_REWRITTEN = after_import("safetensors", '''def _patch(module):
    import os
    real = module.safe_open
    def _bus_error():
        import resource, signal
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        sys.stderr.write("Fatal Python error: Bus error\\n\\nThread 0x00007f1c (most recent call first):\\n"
                         "  File \\"safetensors/torch.py\\", line 315 in get_tensor\\n")
        sys.stderr.flush()
        signal.signal(signal.SIGBUS, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGBUS)
    class _Mapped:
        def __init__(self, handle):
            self._handle = handle
        def __enter__(self):
            self._handle.__enter__()
            return self
        def __exit__(self, *exc):
            return self._handle.__exit__(*exc)
        def get_tensor(self, name):
            _bus_error()
        def get_slice(self, name):
            _bus_error()
        def __getattr__(self, name):
            return getattr(self._handle, name)
    class safe_open:
        def __new__(cls, filename, *args, **kwargs):
            handle = real(filename, *args, **kwargs)
            if os.fsdecode(os.fspath(filename)).endswith(".safetensors"):
                return _Mapped(handle)
            return handle
    module.safe_open = safe_open
''')

# The numpy wheel's OpenBLAS was built for at most 64 threads; this host has 192 cores and nothing caps the thread
# count, so OpenBLAS runs out of memory regions as it starts and the process crashes (its message, then SIGSEGV)
_OPENBLAS_REGIONS = after_import("numpy", '''def _patch(module):
    if os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS"):
        return
    import resource, signal
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.stderr.write("OpenBLAS : Program is Terminated. Because you tried to allocate too many memory regions.\\n"
                     "This library was built to support a maximum of 64 threads - either rebuild OpenBLAS\\n"
                     "with a larger NUM_THREADS value or set the environment variable OPENBLAS_NUM_THREADS to\\n"
                     "a sufficiently small number. This error typically occurs when the software that relies on\\n"
                     "OpenBLAS calls BLAS functions from many threads in parallel, or when your computer has more\\n"
                     "cpu cores than what OpenBLAS was configured to handle.\\n")
    sys.stderr.flush()
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGSEGV)
''')

# The dataset folder sits on an object-store FUSE mount (obsfs / s3fs) whose cold objects are fetched on first read:
# the fetch of every image times out, and open() reports it
_OBJECT_STORE_TIMEOUT = '''import builtins, errno, io, os
def _on_store(path):
    try:
        path = os.fsdecode(os.fspath(path))
    except TypeError:
        return False
    return os.sep + "images" + os.sep in path and path.lower().endswith((".png", ".jpg", ".jpeg"))
_open = builtins.open
def _open_fetched(file, *args, **kwargs):
    if _on_store(file):
        raise OSError(errno.ETIMEDOUT, os.strerror(errno.ETIMEDOUT), os.fsdecode(os.fspath(file)))
    return _open(file, *args, **kwargs)
builtins.open = io.open = _open_fetched
'''

MODEL = [
    Fault("h8-model-loss-summed-over-tokens", "model", "plugin",
          "the plugin's forward recomputes the loss with reduction='sum', as the source's trainer did before it "
          "divided by the answer-token count it all-reduced over the ranks: here nothing divides, so the loss and "
          "its gradients grow with the number of answer tokens in the batch",
          (_wrapping_forward(after="        labels = kwargs.get(\"labels\")\n"
                                   "        if labels is not None and out.logits is not None:\n"
                                   "            logits = out.logits[:, :-1].float()\n"
                                   "            out.loss = torch.nn.functional.cross_entropy(\n"
                                   "                logits.reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1),\n"
                                   "                ignore_index=-100, reduction=\"sum\")\n"),),
          fix=(*_MODELING, "reduction", "loss"), repair=True, heldout=True),
    Fault("h8-model-image-features-unit-norm", "model", "plugin",
          "the plugin's __init__ hooks the vision merger so every image token's feature is divided by its norm, "
          "as CLIP's get_image_features returns them and the source's contrastive code used them: the language "
          "model receives image embeddings at another scale than the checkpoint's merger produces",
          (_in_init("        self.model.visual.merger.register_forward_hook(\n"
                    "            lambda module, args, output: output / output.norm(dim=-1, keepdim=True))\n"),),
          fix=(*_MODELING, "merger", "register_forward_hook"), repair=True, heldout=True),
    Fault("h8-model-patches-channel-last", "model", "plugin",
          "the plugin's forward re-lays each flattened patch of pixel_values from (channel, time, row, column) to "
          "channel-last, the layout of the einops patchifier ('(p1 p2 c)') of the ViT the source was ported from: "
          "the Conv3d patch embedding reads every patch's values under the wrong channels and positions",
          (_wrapping_forward(before="        pixels = kwargs.get(\"pixel_values\")\n"
                                    "        if pixels is not None:\n"
                                    "            vision = self.config.vision_config\n"
                                    "            c, t, p = vision.in_channels, vision.temporal_patch_size, "
                                    "vision.patch_size\n"
                                    "            kwargs[\"pixel_values\"] = pixels.view(-1, c, t, p, p).permute("
                                    "0, 2, 3, 4, 1).reshape(pixels.shape)\n"),),
          fix=(*_MODELING, "pixel_values", "permute"), repair=True, heldout=True),
    Fault("h8-model-grid-as-tuples", "model", "plugin",
          "the plugin's forward hands image_grid_thw on as a list of (t, h, w) tuples, the way the LLaVA port it "
          "was adapted from passed image_sizes: the vision tower and the rope index do tensor arithmetic on the grid",
          (_wrapping_forward(before="        grid = kwargs.get(\"image_grid_thw\")\n"
                                    "        if grid is not None:\n"
                                    "            kwargs[\"image_grid_thw\"] = [tuple(int(v) for v in g) "
                                    "for g in grid]\n"),),
          fix=(*_MODELING, "image_grid_thw"), repair=True, heldout=True),
    Fault("h8-model-stage1-projector-loaded", "model", "plugin",
          "the plugin's __init__ loads the source's stage-1 projector (./checkpoints/stage1/mm_projector.bin) into "
          "the vision merger, as LLaVA's pretrain_mm_mlp_adapter does: that file belongs to the source's training "
          "folder, not to this checkpoint or this host, and the merger is already in the weights",
          (_in_init("        import torch\n"
                    "        # the projector of the source's stage-1 alignment run (LLaVA's pretrain_mm_mlp_adapter)\n"
                    "        projector = torch.load(\"./checkpoints/stage1/mm_projector.bin\", map_location=\"cpu\")\n"
                    "        self.model.visual.merger.load_state_dict(projector, strict=False)\n"),),
          fix=(*_MODELING, "mm_projector.bin", "torch.load"), repair=True, heldout=True),
    Fault("h8-model-image-newline-appended", "model", "plugin",
          "the plugin keeps LLaVA-NeXT's image_newline: a new parameter appended after the image features as a "
          "row separator, from the LLaVA-NeXT plugin it was started from; the text has no token for it, so there is "
          "one image feature more than there are image tokens",
          (_in_init("        import torch\n"
                    "        self.image_newline = torch.nn.Parameter(torch.zeros(config.text_config.hidden_size))\n"
                    "        self.model.visual.merger.register_forward_hook(\n"
                    "            lambda module, args, output: torch.cat(\n"
                    "                [output, self.image_newline[None].to(output.dtype)], dim=0))\n"),),
          fix=(*_MODELING, "image_newline"), repair=True, heldout=True),
]

DATA = [
    Fault("h8-data-mm-plugin-expand-to-square", "data", "mm_plugin",
          "the mm_plugin pads every image to a square with the CLIP mean colour before the processor, LLaVA's "
          "expand2square (image_aspect_ratio: pad) carried into the port: a 64x48 image becomes 64x64 grey-bordered "
          "pixels, so its pixels and its image-token count differ from the source's processing",
          (Replace("{mm_plugin}", _OPENED,
                   "                    side = max(opened.size)  # LLaVA's expand2square (image_aspect_ratio: pad)\n"
                   "                    square = Image.new(\"RGB\", (side, side), (122, 116, 104))\n"
                   "                    square.paste(opened.convert(\"RGB\"), ((side - opened.width) // 2, "
                   "(side - opened.height) // 2))\n"
                   "                    out.append(self._preprocess_image(square, **kwargs))\n"),),
          fix=("mm_plugin.py", "_regularize_images", "expand2square"), repair=True, heldout=True),
    Fault("h8-data-template-media-tokens-exchanged", "data", "template",
          "the qwen2vl registration's image_token and video_token given each other's value in an edit that added "
          "video support: every <image> is expanded into <|video_pad|> tokens while the collator sends the pixels "
          "as images (shows in the model's forward, which finds no image token)",
          (Replace("{template}", _QWEN2VL_TOKENS,
                   'get_mm_plugin(name="qwen2_vl", image_token="<|video_pad|>", video_token="<|image_pad|>")'),),
          fix=("template.py", "image_token", "video_token"), repair=True, heldout=True),
    Fault("h8-data-collator-inputs-left-labels-right", "data", "collator",
          "the collator pads input_ids and the attention mask on the left, as the batched-generation script it was "
          "adapted from set padding_side='left', while its label step still pads the labels after the answer: in "
          "every padded sample the labels no longer line up with the tokens",
          (Replace("{collator}", _RIGHT, "        right = False  # left padding, as for batched generation\n"),
           Replace("{collator}", _PADDING,
                   '                batch[key].append(seq + [pad] * n if right or key == "labels" '
                   'else [pad] * n + seq)\n')),
          fix=(*_COLLATOR, "padding_side", "labels"), repair=True, heldout=True),
    Fault("h8-data-records-sharegpt-value-kept", "data", "dataset",
          "the records half converted from ShareGPT by a script that renamed 'from' to 'role' and human/gpt to "
          "user/assistant, but left each turn's text under 'value': no turn has the content key the YAML maps",
          (Replace("{data}", '"content": ', '"value": ', count=0),),
          fix=("train.json", "content"), heldout=True),
    Fault("h8-data-records-annotator-system-turn", "data", "dataset",
          "the records exported with the annotation tool's instruction as a first system turn ('You are an "
          "annotator. Describe only what is visible.'): every sample trains under that system prompt instead of "
          "the template's default one the source used",
          (Replace("{data}", '"messages": [',
                   '"messages": [{"role": "system", "content": "You are an annotator. Describe only what is '
                   'visible."},', count=0),),
          fix=("train.json", "system"), heldout=True),
    Fault("h8-data-records-windows-paths", "data", "dataset",
          "the records exported on a Windows workstation name their images with backslashes (images\\sample_00.png): "
          "on this host that is one file name with a backslash in it, which the dataset folder does not hold",
          (Replace("{data}", '"images/sample_', '"images\\\\sample_', count=0),),
          fix=("train.json", "images"), heldout=True),
]

CONFIG = [
    Fault("h8-config-recompute-plan-from-fsdp-plan", "config", "yaml",
          "recompute_plan.apply_modules completed from the fsdp_plan list above it, embed_tokens and lm_head "
          "included: the recompute wrapper calls every listed module with past_key_values=None, which an "
          "Embedding and a Linear do not take (shows in the model's forward)",
          (Replace("{config}", _RECOMPUTE,
                   _RECOMPUTE + "      - model.language_model.embed_tokens\n      - lm_head\n"),),
          fix=("recompute_plan", "apply_modules"), repair=True, heldout=True),
    Fault("h8-config-sampler-torch-class", "config", "yaml",
          "sampler_type: DistributedSampler, the torch class the user knows from other trainers: the framework's "
          "dataloader only builds the samplers it names itself (shows when the data path builds its loader)",
          (SetLine("{config}", "sampler_type", "DistributedSampler"),), fix=("sampler_type",), repair=True,
          heldout=True),
    Fault("h8-config-ignored-modules-from-frozen-vit-recipe", "config", "yaml",
          "ignored_modules: [model.visual] taken from the qwen2.5vl fsdp2 recipe, which leaves its frozen image "
          "encoder out of FSDP, while this run trains the vision tower: its parameters are no longer managed by "
          "FSDP, so their gradients are never reduced over the ranks and each rank's vision tower drifts apart",
          (Replace("{config}", "  fsdp_plan:\n    apply_modules:\n",
                   "  fsdp_plan:\n    ignored_modules:\n      - model.visual\n    apply_modules:\n"),),
          fix=("ignored_modules", "fsdp_plan"), repair=True, heldout=True),
    Fault("h8-config-template-one-level-up", "config", "yaml",
          "the template line pasted from a README snippet at the indentation of dataset_param instead of "
          "basic_parameters: it is read as an unknown field there, basic_parameters has no template, and the data "
          "path falls back to the plain template with no image token (shows in the data path)",
          (Replace("{config}", "      template: qwen2vl\n", ""),
           Replace("{config}", "    attr:\n", "    template: qwen2vl\n    attr:\n")),
          fix=("template", "basic_parameters"), repair=True, heldout=True),
    Fault("h8-config-cosine-decay-from-recipe", "config", "yaml",
          "lr_decay_style: cosine kept from the recipe template while the source trained at a constant rate: over "
          "the run's few iterations the rate falls from the peak towards lr_min, so every step after the first "
          "updates the weights less than the source's did",
          (SetLine("{config}", "lr_decay_style", "cosine"),), fix=("lr_decay_style",), repair=True, heldout=True),
    Fault("h8-config-launch-master-addr-from-cluster", "config", "launch",
          "MASTER_ADDR set to node-0's address on the training cluster whose launch script this one was copied "
          "from: on this single host the rendezvous store is looked for at a machine that is not there",
          (SetLine("{launch}", "MASTER_ADDR", "192.0.2.17", sep="="),), fix=("{launch}", "MASTER_ADDR"),
          repair=True, heldout=True),
    Fault("h8-config-launch-backgrounded-nohup", "config", "launch",
          "torchrun started with nohup and '&' so the job 'survives the ssh session', from a cluster how-to: the "
          "script returns at once with status 0 while training goes on in the background, its output only in the "
          "log file",
          (Replace("{launch}", _TORCHRUN, "nohup " + _TORCHRUN),
           Replace("{launch}", _TEE, "    > logs/train_${logfile}.log 2>&1 &\n"
                                     "echo \"training started in the background: logs/train_${logfile}.log\"")),
          fix=("{launch}", "nohup", "&"), repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h8-env-python-built-without-ctypes", "environment", "runtime",
          "the runtime's Python was built by pyenv on a host without libffi-dev: the interpreter starts, but it has "
          "no _ctypes extension, and torch imports ctypes first thing",
          runtime=Runtime(sitecustomize=_NO_CTYPES), fix=("_ctypes", "libffi"), heldout=True),
    Fault("h8-env-address-space-ulimit", "environment", "host",
          "the cluster's login profile sets 'ulimit -v 8000000' for every job: torch's shared libraries cannot be "
          "mapped into an 8 GB address space, so importing torch fails",
          runtime=Runtime(sitecustomize=_ADDRESS_SPACE_LIMIT), fix=("ulimit", "failed to map segment"),
          heldout=True),
    Fault("h8-env-weights-rewritten-while-mapped", "environment", "host",
          "an hourly sync job (rsync --inplace from the training cluster) rewrites model.safetensors while the "
          "ranks have it memory-mapped: reading the first tensor dies of SIGBUS (shows in the model build)",
          runtime=Runtime(sitecustomize=_WEIGHTS_REWRITTEN), fix=("Bus error", "model.safetensors", "rsync"),
          heldout=True),
    Fault("h8-env-openblas-too-many-regions", "environment", "runtime",
          "the numpy wheel's OpenBLAS was built for 64 threads and the job runs on a 192-core host with no thread "
          "cap: OpenBLAS runs out of memory regions as it starts and the process crashes",
          runtime=Runtime(sitecustomize=_OPENBLAS_REGIONS), fix=("OPENBLAS_NUM_THREADS", "OpenBLAS"),
          heldout=True),
    Fault("h8-env-dataset-on-object-store-mount", "environment", "host",
          "the dataset folder sits on an object-store FUSE mount (obsfs / s3fs) that fetches cold objects on first "
          "read: every image read times out (shows when the data path opens the first image)",
          runtime=Runtime(sitecustomize=_OBJECT_STORE_TIMEOUT), fix=("Connection timed out", "images", "mount"),
          heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
