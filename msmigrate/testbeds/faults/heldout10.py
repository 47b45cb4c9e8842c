"""The tenth held-out group (``h10-``): faults written blind by someone who never read the classifier, the failure
catalog, the owner rules, the routing code, the gate code, the routing tests or any routing result, and never ran the
classifier, ``msmigrate verify`` or the routing bench on them while writing. They were written from the green qwen2_vl
stand-in migration's delivered files (the plugin package, the YAML, the launch script, the source's records), the
stand-in target's data path and trainer (template, mm_plugin, collator, dataset conversion, sampler, loss, trainer and
its checkpoint load), the installed transformers and torch, the fault machinery (injection.py) and the earlier groups'
fault lists (read only for their ids and stories, to leave out every mechanism they already cover), from how public VLM
porting, fine-tuning and launching reports go wrong: a plugin that imports torch_npu and its transfer_to_npu at module
level as the NPU port's scripts do, the per-head q/k norms of the Qwen3 attention the plugin was started from, a vision
tower handed one attention span over the whole batch's patches (the packed-sequence call of a fused varlen kernel), the
deepstack merge of the Qwen3-VL plugin kept in a Qwen2-VL port, grouped-query heads expanded for an attention kernel
that took none, and the inference wrapper's mask over the embedding rows past the tokenizer's vocabulary kept in
training; an mm_plugin that crops every image to whole 28-pixel cells the way the source's loader did, one that writes a
newline after each image the LLaVA way ('<image>\\n'), a template whose assistant header moved into the answer slot
(the Jinja template's layout), a collator whose padding loop pads the input ids with the label pad value, records whose
export appended the reviewer's verdict as a last assistant turn, records that name their images by the annotation
server's URLs; a YAML that pins data_parallel_size from a single-device recipe, that names the registry's text
pretraining collator, whose attr maps videos to the images column (a pasted line), that lists the training file twice
to run more epochs in the step budget, that keeps a preference-tuning recipe's stage: dpo; a launch script that calls
the torchrun of another user's conda environment by its absolute path, and one that asks torchrun for one process per
'gpu' (torchrun's CUDA keyword); a device held by another job's process, a toolkit newer than the host's driver, an
output pipe whose reader died (EPIPE on a rank's next print), a staging folder under /tmp whose images the tmpfiles
cleaner removed, and a torch_npu built for the previous torch that torch's backend autoloading imports with torch.

Some fail loudly, some only change numbers (the q/k norms, the cross-image vision attention, the deepstack merge, the
vocabulary mask, the cropped images, the newline after each image, the assistant header trained as answer text, the
pretraining collator, the training file listed twice); several would show in another phase's gate than the owner's
(the collator's pad value fails inside the model's embedding, the expanded k/v heads fail at the weights load, the
reviewer's turn empties the dataset, the videos mapping and stage fail in the data path, the removed images fail when
the data path opens the first image, the device and driver conditions fail when a rank sets its device). The public
reports read for them are issue threads of the same conditions ('No module named torch_npu' from ported scripts,
'all CUDA-capable devices are busy or unavailable' / NPU 'device is occupied', 'driver version is insufficient',
'Failed to load the backend extension' with TORCH_DEVICE_BACKEND_AUTOLOAD, 'BrokenPipeError: [Errno 32]' when a
log reader exits, files under /tmp removed by systemd-tmpfiles, 'size mismatch for k_proj' after a config edit,
'Cuda is not available' from torchrun's --nproc_per_node gpu, 'index out of range in self' from -100 in input_ids,
LLaMA-Factory's dataset repetition and stage options). Each fault was chosen for being a mechanism no earlier group
has and for how users get there, and was checked only for applying to the green migration and for changing what it
computes (or producing its condition), never for how it would be routed. Like the earlier held-out groups, their
figures are reported apart (``--group heldout10``) and a miss is recorded, never fixed by editing the fault or by a
rule keyed on its text.

``repair`` marks the faults whose fix lies in the run's own artifacts (the plugin, the data path's mm_plugin / template
/ collator, the YAML, the launch script); the records, the runtime and the host are not the run's to rewrite."""

from __future__ import annotations

from msmigrate.testbeds.faults.heldout3 import _in_init
from msmigrate.testbeds.faults.injection import Fault, Replace, Runtime, SetLine, after_import

_MODELING = ("{modeling}", "{plugin}")
_COLLATOR = ("func_utils/collator.py", "collator.py")
_SUPER_INIT = "        super().__init__(config, *args, **kwargs)\n"
_REGISTER_IMPORT = "from mindspeed_mm.fsdp.utils.register import model_register\n"
_EXPANSION = "self.vision_bos_token + self.image_token * n + self.vision_eos_token"
_RGB_RETURN = '        return image if image.mode == "RGB" else image.convert("RGB")\n'
# the qwen2vl registration's user and assistant slots (its name makes the anchor unique among the families sharing
# the same slots)
_QWEN2VL_SLOTS = ('name="qwen2vl",\n    params=RegisterParams(\n        format_user=StringFormatter('
                  'slots=["<|im_start|>user\\n{{content}}<|im_end|>\\n<|im_start|>assistant\\n"]),\n'
                  '        format_assistant=StringFormatter(slots=["{{content}}<|im_end|>\\n"]),\n')
_TORCHRUN = "torchrun $DISTRIBUTED_ARGS "

# Another job's process holds the device (the node is in exclusive compute mode, or a rank of an earlier run was never
# reaped): setting a rank's device fails (the simulation stands in at torch.accelerator, which the trainer calls)
_DEVICE_OCCUPIED = after_import("torch", '''def _patch(module):
    if os.environ.get("RANK") is None:
        return
    def set_device_index(device, /):
        raise RuntimeError("npu set device failed: aclrtSetDevice(device_id_) returned 507033: device " + str(device)
                           + " is in use by another process (pid 183204, exclusive mode)")
    module.accelerator.set_device_index = set_device_index
    module.accelerator.set_device_idx = set_device_index
''')

# The runtime's toolkit (CANN 8.1, installed with the environment) needs a newer driver than the host carries: the
# first device call of a rank fails in the runtime's initialisation
_DRIVER_TOO_OLD = after_import("torch", '''def _patch(module):
    if os.environ.get("RANK") is None:
        return
    def set_device_index(device, /):
        raise RuntimeError("npu init failed: aclInit returned 500002: the installed driver (23.0.3) is older than "
                           "this toolkit (CANN 8.1.RC1) requires (>= 24.1.0); upgrade the driver or install a "
                           "matching toolkit")
    module.accelerator.set_device_index = set_device_index
    module.accelerator.set_device_idx = set_device_index
''')

# The job's output goes through the host's job wrapper to a log shipper that exited: the pipe a rank's stdout is has no
# reader, so the rank's next print fails with EPIPE (Python ignores SIGPIPE and raises BrokenPipeError)
_STDOUT_READER_GONE = '''import os
if os.environ.get("RANK") is not None:
    _r, _w = os.pipe()
    os.close(_r)
    os.dup2(_w, 1)
    os.close(_w)
'''

# The dataset was staged under /tmp, where systemd-tmpfiles' age rule removed the image files nobody had opened for
# ten days (the records file, read by the last check, stayed): opening an image fails
_TMP_CLEANED = after_import("PIL.Image", '''def _patch(module):
    import errno
    real = module.open
    def open(fp, *args, **kwargs):
        if isinstance(fp, (str, os.PathLike)) and os.fspath(fp).lower().endswith((".png", ".jpg", ".jpeg")):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", os.fspath(fp))
        return real(fp, *args, **kwargs)
    module.open = open
''')

# A torch_npu built for the previous torch release stayed in the runtime after torch was upgraded: torch imports the
# out-of-tree backends registered through its entry point at the end of its own import, and that import fails
_STALE_BACKEND_AUTOLOAD = after_import("torch", '''def _patch(module):
    if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") == "0":
        return
    cause = ImportError("/opt/envs/mm/lib/python3.11/site-packages/torch_npu/lib/libtorch_npu.so: undefined symbol: "
                        "_ZN3c1021throwNullDataPtrErrorEv")
    raise RuntimeError("Failed to load the backend extension: torch_npu. You can disable extension auto-loading "
                       "with TORCH_DEVICE_BACKEND_AUTOLOAD=0.") from cause
''')

MODEL = [
    Fault("h10-model-torch-npu-imported", "model", "plugin",
          "the plugin module imports torch_npu and torch_npu.contrib.transfer_to_npu at its top, as the NPU port's "
          "scripts it was copied from do to redirect .cuda() calls: the plugin itself never needs them, and on a "
          "runtime without torch_npu importing the plugin fails",
          (Replace("{modeling}", _REGISTER_IMPORT,
                   "import torch_npu  # noqa: F401\n"
                   "from torch_npu.contrib import transfer_to_npu  # noqa: F401\n\n" + _REGISTER_IMPORT),),
          fix=(*_MODELING, "torch_npu", "transfer_to_npu"), repair=True, heldout=True),
    Fault("h10-model-qk-norm-from-qwen3", "model", "plugin",
          "the plugin was started from the Qwen3 plugin and keeps its per-head RMSNorm of the queries and keys "
          "(q_norm / k_norm) in every language-model attention layer: Qwen2-VL's attention has none, the checkpoint "
          "holds no weights for them, and every attention score is computed on normalised heads",
          (_in_init("        # per-head q / k norms of the Qwen3 attention\n"
                    "        from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRMSNorm\n\n"
                    "        text = config.get_text_config(decoder=True)\n"
                    "        head_dim = text.hidden_size // text.num_attention_heads\n"
                    "        for layer in self.model.language_model.layers:\n"
                    "            attn = layer.self_attn\n"
                    "            attn.q_norm = Qwen2VLRMSNorm(head_dim, eps=text.rms_norm_eps)\n"
                    "            attn.k_norm = Qwen2VLRMSNorm(head_dim, eps=text.rms_norm_eps)\n"
                    "            for proj, norm in ((attn.q_proj, attn.q_norm), (attn.k_proj, attn.k_norm)):\n"
                    "                proj.register_forward_hook(\n"
                    "                    lambda m, i, o, norm=norm: norm(o.view(*o.shape[:-1], -1, "
                    "norm.weight.numel())).flatten(-2))\n"),),
          fix=(*_MODELING, "q_norm", "k_norm"), repair=True, heldout=True),
    Fault("h10-model-vision-one-attention-span", "model", "plugin",
          "the plugin wraps the vision tower's forward to hand it one attention span over all the batch's patches "
          "(cu_seqlens [0, N]), the packed call of the NPU port whose fused varlen attention took one sequence per "
          "call: every image's patches now attend to the other images' patches of the batch",
          (_in_init("        # one packed attention span for the fused varlen kernel\n"
                    "        import torch\n\n"
                    "        visual = self.model.visual\n"
                    "        visual_forward = visual.forward\n\n"
                    "        def packed_forward(hidden_states, grid_thw, **kwargs):\n"
                    "            total = int(grid_thw.prod(-1).sum())\n"
                    "            kwargs[\"cu_seqlens\"] = torch.tensor([0, total], dtype=torch.int32, "
                    "device=hidden_states.device)\n"
                    "            return visual_forward(hidden_states, grid_thw, **kwargs)\n\n"
                    "        visual.forward = packed_forward\n"),),
          fix=(*_MODELING, "cu_seqlens", "visual"), repair=True, heldout=True),
    Fault("h10-model-deepstack-from-qwen3vl", "model", "plugin",
          "the plugin keeps the deepstack merge of the Qwen3-VL plugin it was started from: the image features are "
          "added again to the hidden states at the image positions after each of the first decoder layers. Qwen2-VL "
          "has no deepstack, so every image position carries its features several times over",
          (_in_init("        # deepstack: the visual features re-injected into the first decoder layers\n"
                    "        stash = {}\n"
                    "        image_token_id = config.image_token_id\n\n"
                    "        def keep_image_positions(module, args):\n"
                    "            stash[\"mask\"] = args[0] == image_token_id\n\n"
                    "        def keep_image_features(module, args, output):\n"
                    "            stash[\"features\"] = output.pooler_output\n\n"
                    "        def deepstack_add(module, args, output):\n"
                    "            hidden = output[0] if isinstance(output, tuple) else output\n"
                    "            mask, features = stash.get(\"mask\"), stash.get(\"features\")\n"
                    "            if mask is None or features is None or int(mask.sum()) != features.shape[0]:\n"
                    "                return output\n"
                    "            hidden = hidden.clone()\n"
                    "            hidden[mask] = hidden[mask] + features.to(hidden.dtype)\n"
                    "            return (hidden, *output[1:]) if isinstance(output, tuple) else hidden\n\n"
                    "        self.model.language_model.embed_tokens.register_forward_pre_hook(keep_image_positions)\n"
                    "        self.model.visual.register_forward_hook(keep_image_features)\n"
                    "        for layer in self.model.language_model.layers[:3]:\n"
                    "            layer.register_forward_hook(deepstack_add)\n"),),
          fix=(*_MODELING, "deepstack", "register_forward_hook"), repair=True, heldout=True),
    Fault("h10-model-kv-heads-expanded", "model", "plugin",
          "the plugin's __init__ sets num_key_value_heads to num_attention_heads before the model is built, because "
          "the fused attention kernel of the sibling port took no grouped-query heads: the k / v projections are "
          "built for twice the heads the checkpoint has, and its weights no longer fit them",
          (Replace("{modeling}", _SUPER_INIT,
                   "        text = config.get_text_config(decoder=True)\n"
                   "        # the fused attention kernel takes no grouped-query heads: one k / v head per query head\n"
                   "        text.num_key_value_heads = text.num_attention_heads\n" + _SUPER_INIT),),
          fix=(*_MODELING, "num_key_value_heads"), repair=True, heldout=True),
    Fault("h10-model-vocab-padding-masked", "model", "plugin",
          "the plugin keeps the inference wrapper's guard that sets the logits of the embedding rows past the "
          "tokenizer's vocabulary (the rows the checkpoint pads its vocabulary with) to -inf, so sampling never picks "
          "them: in training the softmax of every position loses those rows, and the loss is another function of "
          "the weights than the source's",
          (_in_init("        # never predict the padded embedding rows (the inference wrapper's guard)\n"
                    "        import torch\n"
                    "        from transformers import AutoTokenizer\n\n"
                    "        known = len(AutoTokenizer.from_pretrained(config._name_or_path))\n\n"
                    "        def mask_padded_rows(module, args, output):\n"
                    "            padded = torch.arange(output.size(-1), device=output.device) >= known\n"
                    "            return output.masked_fill(padded, float(\"-inf\"))\n\n"
                    "        self.lm_head.register_forward_hook(mask_padded_rows)\n"),),
          fix=(*_MODELING, "lm_head", "-inf"), repair=True, heldout=True),
]

DATA = [
    Fault("h10-data-mm-plugin-crop-to-patch-cells", "data", "mm_plugin",
          "the mm_plugin crops every image down to whole 28-pixel cells (patch 14 times merge 2) around its centre "
          "before the processor, as the source's own loader cut the edges off: a 64x48 image loses a third of its "
          "rows, and the pixels and the image-token count differ from the processor's own resize",
          (Replace("{mm_plugin}", _RGB_RETURN,
                   "        # whole 28-pixel cells (patch 14 x merge 2), cut around the centre as the source's loader did\n"
                   "        cell = 28\n"
                   "        width = max(cell, image.width // cell * cell)\n"
                   "        height = max(cell, image.height // cell * cell)\n"
                   "        left, top = (image.width - width) // 2, (image.height - height) // 2\n"
                   "        image = image.crop((left, top, left + width, top + height))\n" + _RGB_RETURN),),
          fix=("mm_plugin.py", "_preprocess_image", "crop"), repair=True, heldout=True),
    Fault("h10-data-mm-plugin-newline-after-image", "data", "mm_plugin",
          "the mm_plugin writes a newline after each expanded image, LLaVA's '<image>\\n' convention from the "
          "plugin it was copied from: every prompt carries a token between <|vision_end|> and the question that "
          "Qwen2-VL's chat template never puts there",
          (Replace("{mm_plugin}", _EXPANSION, _EXPANSION + " + \"\\n\""),),
          fix=("mm_plugin.py", "vision_eos_token"), repair=True, heldout=True),
    Fault("h10-data-template-assistant-header-in-answer-slot", "data", "template",
          "the qwen2vl registration was tidied to the Jinja template's layout, where each message opens with its own "
          "role header: '<|im_start|>assistant\\n' moved from the end of the user slot to the start of the assistant "
          "slot. The prompt text is the same, but the header is now part of every answer's labels, so the model is "
          "trained to write it",
          (Replace("{template}", _QWEN2VL_SLOTS,
                   'name="qwen2vl",\n    params=RegisterParams(\n        format_user=StringFormatter('
                   'slots=["<|im_start|>user\\n{{content}}<|im_end|>\\n"]),\n'
                   '        format_assistant=StringFormatter(slots=["<|im_start|>assistant\\n{{content}}'
                   '<|im_end|>\\n"]),\n'),),
          fix=("template.py", "format_user", "format_assistant"), repair=True, heldout=True),
    Fault("h10-data-collator-input-ids-padded-ignore-index", "data", "collator",
          "the collator's padding loop was 'simplified' to pad the input ids with the label pad value (-100) as it "
          "pads the labels: every padded position of a shorter sample holds -100, which is no token id (shows in the "
          "model's embedding lookup when a batch is padded)",
          (Replace("{collator}", '("input_ids", pad_id)', '("input_ids", self.label_pad_token_id)'),),
          fix=(*_COLLATOR, "input_ids", "pad_token_id"), repair=True, heldout=True),
    Fault("h10-data-records-reviewer-verdict-turn", "data", "dataset",
          "the annotation tool's export appends the reviewer's verdict ('Approved.') to each conversation as one more "
          "assistant turn after the answer: no conversation alternates user / assistant to its end any more, so the "
          "conversion drops every sample",
          (Replace("{data}", 'background."\n   }\n  ],',
                   'background."\n   },\n   {\n    "role": "assistant",\n    "content": "Approved."\n   }\n  ],',
                   count=0),),
          fix=("train.json", "messages"), heldout=True),
    Fault("h10-data-records-image-urls", "data", "dataset",
          "the records were exported from the annotation server with each image named by its URL there "
          "(https://annotate.internal/data/upload/7/sample_00.png) instead of its path in the dataset folder: no "
          "image can be opened on the training host",
          (Replace("{data}", '"images/sample_', '"https://annotate.internal/data/upload/7/sample_', count=0),),
          fix=("train.json", "images"), heldout=True),
]

CONFIG = [
    Fault("h10-config-data-parallel-size-from-one-device-recipe", "config", "yaml",
          "parallel.data_parallel_size: 1 kept from the single-device recipe the parallel block was copied from, "
          "where it was written out: the framework derives the data-parallel size from the world size, and on the "
          "two-rank launch the pinned value contradicts it (shows when the arguments are parsed)",
          (Replace("{config}", "  tensor_parallel_size: 1\n", "  tensor_parallel_size: 1\n  data_parallel_size: 1\n"),),
          fix=("data_parallel_size",), repair=True, heldout=True),
    Fault("h10-config-collator-text-pretrain", "config", "yaml",
          "collator_id: llm_pretrain, picked from the registered collators as 'the one for training from "
          "scratch': it keeps the input ids only and trains every token, so the images never reach the model, the "
          "prompt and the image placeholders are trained as answers, and the run still goes through",
          (SetLine("{config}", "collator_id", "llm_pretrain"),), fix=("collator_id",), repair=True, heldout=True),
    Fault("h10-config-attr-videos-pasted-from-images", "config", "yaml",
          "a videos line added under attr by duplicating the images line and forgetting to change its value "
          "(videos: images): every sample's images are read as its videos too, which no <video> placeholder asks for "
          "and no video processor takes (shows when the data path converts its records)",
          (Replace("{config}", "      images: images\n", "      images: images\n      videos: images\n"),),
          fix=("videos", "attr"), repair=True, heldout=True),
    Fault("h10-config-dataset-listed-twice", "config", "yaml",
          "the training file listed twice under basic_parameters.dataset (LLaMA-Factory's way of repeating a small "
          "dataset) 'so two epochs fit the step budget': every sample is in the dataset twice, the sampler can draw "
          "the same sample twice in one step, and the run no longer sees the source's data order",
          (Replace("{config}", "      dataset: ", "      dataset:\n        - &TRAIN_FILE "),
           Replace("{config}", "/train.json\n", "/train.json\n        - *TRAIN_FILE\n")),
          fix=("dataset",), repair=True, heldout=True),
    Fault("h10-config-stage-dpo-from-preference-recipe", "config", "yaml",
          "basic_parameters.stage: dpo kept from the preference-tuning recipe the data block was copied from: the "
          "records are supervised conversations, and the dataset builder of this route only builds the sft stage "
          "(shows when the data path builds its dataset)",
          (Replace("{config}", "      template: qwen2vl\n", "      template: qwen2vl\n      stage: dpo\n"),),
          fix=("stage",), repair=True, heldout=True),
    Fault("h10-config-launch-torchrun-of-other-env", "config", "launch",
          "the torchrun line calls /home/chen/miniconda3/envs/mm-2406/bin/torchrun, the absolute path in the "
          "colleague's script this one was copied from: that environment is not on this host, so the launcher "
          "cannot be started (and where it exists it would run another Python and torch than the runtime's)",
          (Replace("{launch}", _TORCHRUN, "/home/chen/miniconda3/envs/mm-2406/bin/" + _TORCHRUN),),
          fix=("{launch}", "torchrun"), repair=True, heldout=True),
    Fault("h10-config-launch-nproc-gpu-keyword", "config", "launch",
          "--nproc_per_node gpu, torchrun's keyword for 'one process per visible GPU' from its documentation, put "
          "in place of the device count: torchrun counts CUDA devices for it, and on an accelerator host without "
          "CUDA it refuses to start any rank",
          (Replace("{launch}", "--nproc_per_node $NPUS_PER_NODE", "--nproc_per_node gpu"),),
          fix=("{launch}", "nproc_per_node", "NPUS_PER_NODE"), repair=True, heldout=True),
]

ENVIRONMENT = [
    Fault("h10-env-device-occupied", "environment", "host",
          "another job's process holds the device (the node runs in exclusive mode, and a rank of an earlier run "
          "was never reaped): a rank cannot set its device",
          runtime=Runtime(sitecustomize=_DEVICE_OCCUPIED),
          fix=("in use by another process", "device", "exclusive"), heldout=True),
    Fault("h10-env-toolkit-newer-than-driver", "environment", "runtime",
          "the runtime was built with a newer accelerator toolkit (CANN 8.1) than the host's driver supports: the "
          "first device call of a rank fails in the toolkit's initialisation",
          runtime=Runtime(sitecustomize=_DRIVER_TOO_OLD), fix=("driver", "toolkit", "CANN"), heldout=True),
    Fault("h10-env-output-pipe-reader-gone", "environment", "host",
          "the job's output is piped by the host's job wrapper to a log shipper that exited: the ranks' stdout is a "
          "pipe with no reader, and a rank's next print fails with EPIPE (BrokenPipeError)",
          runtime=Runtime(sitecustomize=_STDOUT_READER_GONE), fix=("Broken pipe", "log shipper", "stdout"),
          heldout=True),
    Fault("h10-env-tmp-cleaner-removed-images", "environment", "host",
          "the dataset was staged under /tmp, where the host's systemd-tmpfiles age rule removed the image files no "
          "one had opened for ten days: the records are there, the images cannot be opened (shows when the data "
          "path opens the first image)",
          runtime=Runtime(sitecustomize=_TMP_CLEANED), fix=("systemd-tmpfiles", "/tmp", "No such file or directory"),
          heldout=True),
    Fault("h10-env-stale-torch-npu-autoloaded", "environment", "runtime",
          "torch was upgraded in the runtime while the torch_npu built for the previous release stayed: torch "
          "imports the accelerator backends registered through its entry point at the end of its own import, and "
          "that import fails (the known workaround is TORCH_DEVICE_BACKEND_AUTOLOAD=0, the fix a matching torch_npu)",
          runtime=Runtime(sitecustomize=_STALE_BACKEND_AUTOLOAD),
          fix=("torch_npu", "TORCH_DEVICE_BACKEND_AUTOLOAD"), heldout=True),
]

FAULTS = [*MODEL, *DATA, *CONFIG, *ENVIRONMENT]
