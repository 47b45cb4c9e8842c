"""Multimodal plugins: expand media placeholders (<image>/<video>/<audio>) into model media tokens before
tokenisation, and turn media lists into processor tensors in the collator. Registry: PLUGINS + get_mm_plugin."""
import math
import os
from typing import Any, Dict, List, Optional

IMAGE_PLACEHOLDER = os.environ.get("IMAGE_PLACEHOLDER", "<image>")
VIDEO_PLACEHOLDER = os.environ.get("VIDEO_PLACEHOLDER", "<video>")
AUDIO_PLACEHOLDER = os.environ.get("AUDIO_PLACEHOLDER", "<audio>")


def _load_image(image):
    from PIL import Image
    if isinstance(image, str):
        image = Image.open(image)
    return image.convert("RGB")


class BasePlugin:
    """No media expansion; validates that the model supports the media it is given."""

    def __init__(self, image_token: Optional[str], video_token: Optional[str], audio_token: Optional[str]):
        self.image_token = image_token
        self.video_token = video_token
        self.audio_token = audio_token
        self.expand_mm_tokens = True

    def _validate_input(self, processor, images, videos, audios):
        if len(images) != 0 and self.image_token is None:
            raise ValueError("This model does not support image input. Please check whether the correct template is used.")
        if len(videos) != 0 and self.video_token is None:
            raise ValueError("This model does not support video input. Please check whether the correct template is used.")
        if len(audios) != 0 and self.audio_token is None:
            raise ValueError("This model does not support audio input. Please check whether the correct template is used.")
        if (images or videos or audios) and processor is None:
            raise ValueError("Processor was not found, please check and update your model file.")
        if images and getattr(processor, "image_processor", None) is None:
            raise ValueError("Image processor was not found, please check and update your model file.")
        if videos:
            raise ValueError("Video processor was not found, please check and update your model file.")

    def _validate_messages(self, messages, images, videos, audios):
        count = sum(m["content"].count(IMAGE_PLACEHOLDER) for m in messages)
        if count != len(images):
            raise ValueError(f"The number of images does not match the number of {IMAGE_PLACEHOLDER} tokens in {messages}.")

    def process_messages(self, messages: List[Dict[str, str]], images, videos, audios, processor) -> List[Dict[str, str]]:
        self._validate_input(processor, images, videos, audios)
        return messages

    def get_mm_inputs(self, images, videos, audios, processor) -> Dict[str, Any]:
        self._validate_input(processor, images, videos, audios)
        return {}


class Qwen2VLPlugin(BasePlugin):
    """<image> -> <|vision_start|> + image_token * (t*h*w / merge^2) + <|vision_end|> (grid from the image processor)."""
    vision_start, vision_end = "<|vision_start|>", "<|vision_end|>"

    def _image_inputs(self, images, processor):
        image_processor = processor.image_processor
        return image_processor(images=[_load_image(i) for i in images], return_tensors="pt")

    def process_messages(self, messages, images, videos, audios, processor):
        self._validate_input(processor, images, videos, audios)
        self._validate_messages(messages, images, videos, audios)
        if not images:
            return [dict(m) for m in messages]
        merge = getattr(processor.image_processor, "merge_size", 2) ** 2
        grids = iter(self._image_inputs(images, processor)["image_grid_thw"].tolist())
        out = []
        for message in messages:
            content = message["content"]
            while IMAGE_PLACEHOLDER in content:
                n = math.prod(next(grids)) // merge if self.expand_mm_tokens else 1
                content = content.replace(IMAGE_PLACEHOLDER, self.vision_start + "{{image}}" * n + self.vision_end, 1)
            out.append({**message, "content": content.replace("{{image}}", self.image_token)})
        return out

    def get_mm_inputs(self, images, videos, audios, processor):
        self._validate_input(processor, images, videos, audios)
        return dict(self._image_inputs(images, processor)) if images else {}


class Qwen3VLPlugin(Qwen2VLPlugin):
    """Same expansion for images; Qwen3-VL adds timestamps for videos (video is not supported in the stand-in)."""


class GLM4VPlugin(Qwen2VLPlugin):
    vision_start, vision_end = "<|begin_of_image|>", "<|end_of_image|>"


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
