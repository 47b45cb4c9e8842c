"""Base classes for custom (non-transformers) models on the plugin route."""
from abc import ABC, abstractmethod

import torch


class BaseModel(ABC):
    """Custom models are built from the whole `ModelArguments` object (plus any extra YAML keys under `model:`)."""

    @classmethod
    @abstractmethod
    def from_pretrained(cls, config):
        """Build and load weights from `config.model_name_or_path`."""

    @classmethod
    @abstractmethod
    def _from_config(cls, config):
        """Build with random/empty weights (used under meta-device init)."""


class WeightInitMixin:
    """`init_weights()` re-initialises every parameter after meta-device materialisation (children first)."""

    def _init_weights(self, module, std=0.02):
        name = type(module).__name__.lower()
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, torch.nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif "norm" in name:
            for pname, param in module.named_parameters(recurse=False):
                (torch.nn.init.ones_ if "weight" in pname else torch.nn.init.zeros_)(param)
        else:
            for pname, param in module.named_parameters(recurse=False):
                if "bias" in pname:
                    torch.nn.init.zeros_(param)
                else:
                    torch.nn.init.normal_(param, mean=0.0, std=std)
        module._is_initialized = True

    @torch.no_grad()
    def init_weights(self):
        for module in reversed(list(self.modules())):  # post-order-ish: children before parents
            if not getattr(module, "_is_initialized", False):
                self._init_weights(module)
