"""Multimodal plugins: expand media placeholders (<image>/<video>/<audio>) into model media tokens before
tokenisation, and turn media lists into processor tensors in the collator. Registry: PLUGINS + get_mm_plugin.

Contract kept with the real framework (checked by tests/standin/test_conformance_realmm.py): plugins are
dataclasses with fields image_token / video_token / audio_token / expand_mm_tokens; ``process_messages`` takes
(messages, images, videos, audios, processor); ``get_mm_inputs`` takes the collator's 8 arguments (images, videos,
audios, imglens, vidlens, audlens, batch_ids, processor); ``_get_mm_inputs(images, videos, audios, processor)`` is
the shared helper that regularises images (RGB, pixel bounds) and runs the processor's image processor."""
import math
import os
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from PIL import Image

IMAGE_PLACEHOLDER = os.getenv("IMAGE_PLACEHOLDER", "<image>")
VIDEO_PLACEHOLDER = os.getenv("VIDEO_PLACEHOLDER", "<video>")
AUDIO_PLACEHOLDER = os.getenv("AUDIO_PLACEHOLDER", "<audio>")


@dataclass
class MMPluginMixin:
    image_token: Optional[str]
    video_token: Optional[str]
    audio_token: Optional[str]
    expand_mm_tokens: bool = True

    def _validate_input(self, processor, images, videos, audios) -> None:
        """The model must take the media it is given, and a model with a media token needs that processor part."""
        image_processor = getattr(processor, "image_processor", None)
        if len(images) != 0 and self.image_token is None:
            raise ValueError("This model does not support image input. Please check whether the correct `template` is used.")
        if len(videos) != 0 and self.video_token is None:
            raise ValueError("This model does not support video input. Please check whether the correct `template` is used.")
        if len(audios) != 0 and self.audio_token is None:
            raise ValueError("This model does not support audio input. Please check whether the correct `template` is used.")
        if self.image_token is not None and processor is None:
            raise ValueError("Processor was not found, please check and update your model file.")
        if self.image_token is not None and image_processor is None:
            raise ValueError("Image processor was not found, please check and update your model file.")
        # (the real check fires for any model with a video token; the stand-in only when videos are given, because
        # transformers 5.x video processors need torchvision, which this project does not install)
        if len(videos) != 0 and getattr(processor, "video_processor", None) is None:
            raise ValueError("Video processor was not found, please check and update your model file.")

    @staticmethod
    def _validate_messages(messages, images, videos, audios) -> None:
        for placeholder, media, kind in ((IMAGE_PLACEHOLDER, images, "images"), (VIDEO_PLACEHOLDER, videos, "videos"),
                                         (AUDIO_PLACEHOLDER, audios, "audios")):
            if sum(m["content"].count(placeholder) for m in messages) != len(media):
                raise ValueError(f"The number of {kind} does not match the number of {placeholder} tokens in {messages}.")

    @staticmethod
    def _preprocess_image(image, image_max_pixels: int, image_min_pixels: int, **kwargs):
        """Scale into [min, max] pixels (aspect kept), RGB."""
        for bound, too_far in ((image_max_pixels, lambda a: a > image_max_pixels),
                               (image_min_pixels, lambda a: a < image_min_pixels)):
            area = image.width * image.height
            if too_far(area):
                scale = math.sqrt(bound / area)
                image = image.resize((int(image.width * scale), int(image.height * scale)),
                                     resample=Image.Resampling.NEAREST)
        return image if image.mode == "RGB" else image.convert("RGB")

    def _regularize_images(self, images, **kwargs) -> Dict[str, List[Any]]:
        out = []
        for image in images:
            if isinstance(image, dict):
                image = image.get("path")
            if isinstance(image, str):
                with Image.open(image) as opened:
                    out.append(self._preprocess_image(opened.copy(), **kwargs))
            elif isinstance(image, Image.Image):
                out.append(self._preprocess_image(image, **kwargs))
            else:
                raise ValueError(f"Expect input is a list of images, but got {type(image)}.")
        return {"images": out}

    def _get_mm_inputs(self, images, videos, audios, processor, imglens=None) -> Dict[str, Any]:
        mm_inputs = {}
        if len(images) != 0:
            images = self._regularize_images(
                images,
                image_max_pixels=getattr(processor, "image_max_pixels", 768 * 768),
                image_min_pixels=getattr(processor, "image_min_pixels", 32 * 32),
            )["images"]
            mm_inputs.update(processor.image_processor(images, return_tensors="pt"))
        return mm_inputs


@dataclass
class BasePlugin(MMPluginMixin):
    """No media expansion."""

    def process_messages(self, messages: List[Dict[str, str]], images, videos, audios, processor) -> List[Dict[str, str]]:
        self._validate_input(processor, images, videos, audios)
        return messages

    def process_token_ids(self, input_ids, labels, images, videos, audios, tokenizer, processor):
        self._validate_input(processor, images, videos, audios)
        return input_ids, labels

    def get_mm_inputs(self, images, videos, audios, imglens, vidlens, audlens, batch_ids, processor) -> Dict[str, Any]:
        """Batched media tensors for the forward; ``*lens`` count media per sample, batch_ids are the token ids."""
        self._validate_input(processor, images, videos, audios)
        return self._get_mm_inputs(images, videos, audios, processor)


@dataclass
class Qwen2VLPlugin(BasePlugin):
    """<image> -> vision_bos + image_token * (t*h*w / merge^2) + vision_eos (grid from the image processor)."""
    vision_bos_token: str = "<|vision_start|>"
    vision_eos_token: str = "<|vision_end|>"

    def process_messages(self, messages, images, videos, audios, processor):
        self._validate_input(processor, images, videos, audios)
        self._validate_messages(messages, images, videos, audios)
        messages = deepcopy(messages)
        merge = getattr(processor.image_processor, "merge_size") ** 2
        grids = self._get_mm_inputs(images, videos, audios, processor).get("image_grid_thw", []) \
            if self.expand_mm_tokens else [None] * len(images)
        used = 0
        for message in messages:
            content = message["content"]
            while IMAGE_PLACEHOLDER in content:
                n = int(grids[used].prod()) // merge if self.expand_mm_tokens else 1
                content = content.replace(IMAGE_PLACEHOLDER,
                                          self.vision_bos_token + self.image_token * n + self.vision_eos_token, 1)
                used += 1
            message["content"] = content
        return messages


@dataclass
class Qwen3VLPlugin(Qwen2VLPlugin):
    """Same expansion for images; Qwen3-VL adds timestamps for videos (video is not supported in the stand-in)."""


@dataclass
class GLM4VPlugin(Qwen2VLPlugin):
    vision_bos_token: str = "<|begin_of_image|>"
    vision_eos_token: str = "<|end_of_image|>"


PLUGINS = {
    "base": BasePlugin,
    "qwen2_vl": Qwen2VLPlugin,
    "qwen3_vl": Qwen3VLPlugin,
    "glm4.1v": GLM4VPlugin,
}


def get_mm_plugin(name: str, image_token: Optional[str] = None, video_token: Optional[str] = None,
                  audio_token: Optional[str] = None) -> BasePlugin:
    if name not in PLUGINS:
        raise ValueError(f"Multimodal plugin `{name}` not found.")
    return PLUGINS[name](image_token, video_token, audio_token)
