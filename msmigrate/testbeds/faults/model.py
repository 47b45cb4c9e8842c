"""Faults in the model plugin (owner ``model``): what a user editing the plugin by hand, or a policy writing it,
gets wrong. Each is fixed in the plugin package (its model module or ``__init__.py``)."""

from __future__ import annotations

from msmigrate.testbeds.faults.injection import Fault, Replace

# Every method a fault adds goes after the class attribute the rules policy's plugin starts its class with.
CLASS_HEAD = "    accepts_loss_kwargs = False\n"
# Every plugin imports the registry it registers with (the rules policy's plugin imports nothing else for sure)
REGISTER_IMPORT = "from mindspeed_mm.fsdp.utils.register import model_register\n"
# The rules policy's plugin defines __init__ (it states the embedding tie at both config levels): its super() call
INIT_SUPER = "        super().__init__(config, *args, **kwargs)\n"


def _method(body: str) -> Replace:
    return Replace("{modeling}", CLASS_HEAD, CLASS_HEAD + body)


def _fix(*also: str) -> tuple[str, ...]:
    """The plugin's model module by file name or the plugin package by path, or a name only that code has."""
    return ("{modeling}", "{plugin}", *also)


FAULTS = [
    Fault("model-register-id-typo", "model", "plugin",
          "the registration decorator names another id than the one the YAML asks for (renamed by hand)",
          (Replace("{modeling}", '@model_register.register("', '@model_register.register("hf_'),),
          fix=_fix()),
    Fault("model-syntax-error", "model", "plugin", "a forward override typed without its colon",
          (_method("    def forward(self, *args, **kwargs)\n        return super().forward(*args, **kwargs)\n\n"),),
          fix=_fix()),
    Fault("model-import-wrong-name", "model", "plugin",
          "the plugin imports a helper class by a name transformers never had (copied from a blog post)",
          (Replace("{modeling}", REGISTER_IMPORT,
                   REGISTER_IMPORT + "from transformers.modeling_utils import PreTrainedModelWithHeads  # noqa: F401\n"),),
          fix=_fix()),
    Fault("model-forward-drops-labels", "model", "plugin",
          "a forward override that swallows labels, so the model returns no loss",
          (_method("    def forward(self, *args, labels=None, **kwargs):\n"
                   "        return super().forward(*args, **kwargs)\n\n"),),
          fix=_fix()),
    Fault("model-loss-normalised-by-zero", "model", "plugin",
          "the loss re-normalised by a token count computed with the wrong ignore index (0 tokens: inf/NaN)",
          (_method("    def forward(self, *args, **kwargs):\n"
                   "        out = super().forward(*args, **kwargs)\n"
                   "        labels = kwargs.get(\"labels\")\n"
                   "        if out.loss is not None and labels is not None:\n"
                   "            out.loss = out.loss * labels.numel() / (labels == -200).sum()\n"
                   "        return out\n\n"),),
          fix=_fix()),
    Fault("model-forward-narrow-signature", "model", "plugin",
          "a forward override with an explicit signature that leaves out the media inputs the batch carries",
          (_method("    def forward(self, input_ids=None, attention_mask=None, labels=None):\n"
                   "        return super().forward(input_ids=input_ids, attention_mask=attention_mask, "
                   "labels=labels)\n\n"),),
          fix=_fix()),
    Fault("model-missing-attribute", "model", "plugin",
          "forward uses a submodule the class never defines (left over from another model's plugin)",
          (_method("    def forward(self, *args, **kwargs):\n"
                   "        out = super().forward(*args, **kwargs)\n"
                   "        out.loss = out.loss + 0.0 * self.mm_projector.weight.sum()\n"
                   "        return out\n\n"),),
          fix=_fix("mm_projector")),
    Fault("model-loss-detached", "model", "plugin",
          "the loss detached for logging and returned detached: backward has no graph",
          (_method("    def forward(self, *args, **kwargs):\n"
                   "        out = super().forward(*args, **kwargs)\n"
                   "        if out.loss is not None:\n"
                   "            out.loss = out.loss.detach()\n"
                   "        return out\n\n"),),
          fix=_fix()),
    Fault("model-register-commented-out", "model", "plugin",
          "the registration decorator commented out while debugging and never put back",
          (Replace("{modeling}", '@model_register.register("', '# @model_register.register("'),),
          fix=_fix("model_register")),
    Fault("model-constant-loss", "model", "plugin",
          "a debugging stub left in forward: the loss no longer depends on the weights",
          (_method("    def forward(self, *args, **kwargs):\n"
                   "        out = super().forward(*args, **kwargs)\n"
                   "        if out.loss is not None:\n"
                   "            out.loss = out.logits.sum() * 0.0 + 2.5\n"
                   "        return out\n\n"),),
          fix=_fix()),
    Fault("model-config-attribute", "model", "plugin",
          "__init__ adds a head sized by a config attribute this model's config does not have",
          # (in the plugin's own __init__: a second __init__ added to the class would be shadowed by it)
          (Replace("{modeling}", INIT_SUPER, INIT_SUPER +
                   "        self.aux_head = __import__(\"torch\").nn.Linear(config.projector_hidden_size, 1)\n"),),
          fix=_fix("projector_hidden_size")),
    Fault("model-half-pixel-values", "model", "plugin",
          "forward casts the pixel values to fp16 while the weights stay fp32 (copied from an inference script)",
          (_method("    def forward(self, *args, **kwargs):\n"
                   "        if kwargs.get(\"pixel_values\") is not None:\n"
                   "            kwargs[\"pixel_values\"] = kwargs[\"pixel_values\"].half()\n"
                   "        return super().forward(*args, **kwargs)\n\n"),),
          fix=_fix()),
]
