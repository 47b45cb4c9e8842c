"""Basic data arguments, dataset attribute mapping (LLaMA-Factory style), format converters and tokenizer loading."""
import logging
import os
from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import Field

from mindspeed_mm.config.arguments.base_args import BaseArguments

logger = logging.getLogger(__name__)
IGNORE_INDEX = -100


class DataArguments(BaseArguments):
    cache_dir: Optional[str] = None
    template: Optional[str] = Field(default=None, description="Registered template name (TEMPLATES).")
    chat_template: Optional[str] = Field(default=None, description="Jinja file; has priority over `template`.")
    enable_thinking: Optional[bool] = True
    dataset_dir: str = Field(default="data", description="Root for relative media paths.")
    dataset: Optional[Union[str, List[str]]] = Field(default=None, description="Local JSON file(s), comma list ok.")
    cutoff_len: int = 1024
    train_on_prompt: bool = False
    mask_history: bool = False
    streaming: bool = False
    overwrite_cache: bool = False
    preprocessing_batch_size: int = 1000
    preprocessing_num_workers: Optional[int] = None
    max_samples: Optional[int] = None
    tool_format: Optional[str] = None
    val_dataset: Optional[str] = None
    val_max_samples: Optional[int] = None
    val_rate: Optional[float] = None
    packing: Optional[bool] = None
    neat_packing: bool = False
    preprocess_on_fly: bool = False
    async_preprocess: bool = False
    async_preprocess_buffer_size: Optional[int] = None
    stage: Optional[str] = None


class DatasetAttr(BaseArguments):
    """Keys = framework concepts, values = the names used in your JSON."""
    ranking: bool = False
    formatting: Literal["alpaca", "sharegpt", "multimodal_tool", "openai"] = "sharegpt"
    system: Optional[str] = None
    images: Optional[str] = None
    videos: Optional[str] = None
    audios: Optional[str] = None
    prompt: Optional[str] = None
    query: Optional[str] = None
    response: Optional[str] = None
    history: Optional[str] = None
    messages: Optional[str] = "conversations"
    tools: Optional[str] = None
    role_tag: Optional[str] = "from"
    content_tag: Optional[str] = "value"
    user_tag: Optional[str] = "human"
    assistant_tag: Optional[str] = "gpt"
    observation_tag: Optional[str] = "observation"
    function_tag: Optional[str] = "function_call"
    system_tag: Optional[str] = "system"
    chosen: Optional[str] = None
    rejected: Optional[str] = None


def _media(example, key, attr, dataset_dir):
    if not key or not example.get(key):
        return []
    items = example[key] if isinstance(example[key], list) else [example[key]]
    out = []
    for item in items:
        path = os.path.join(dataset_dir, item)
        if os.path.isfile(path):
            out.append(path)
        else:
            logger.warning(f"Media {item} does not exist in `media_dir`. Use original path.")
            out.append(item)
    return out


def convert_sharegpt(example: Dict[str, Any], attr: DatasetAttr, data_args: DataArguments) -> Dict[str, Any]:
    """-> {_prompt: [...], _response: [...], _system, _images, _videos, _audios} with roles user/assistant."""
    tag_map = {attr.user_tag: "user", attr.assistant_tag: "assistant", attr.observation_tag: "observation"}
    messages = example[attr.messages]
    system = example.get(attr.system, "") if attr.system else ""
    if attr.system_tag and messages and messages[0][attr.role_tag] == attr.system_tag:
        system, messages = messages[0][attr.content_tag], messages[1:]
    odd, even = (attr.user_tag, attr.observation_tag), (attr.assistant_tag, attr.function_tag)
    aligned, broken = [], False
    for turn, message in enumerate(messages):
        accepted = odd if turn % 2 == 0 else even
        if message[attr.role_tag] not in accepted:
            logger.warning(f"Skipping sample: invalid role tag at turn {turn} "
                           f"(got '{message[attr.role_tag]}', expected one of {accepted}).")
            broken = True
            break
        aligned.append({"role": tag_map.get(message[attr.role_tag], "assistant"),
                        "content": message[attr.content_tag]})
    if broken or len(aligned) % 2 != 0 or not aligned:
        prompt, response = [], []
    else:
        prompt, response = aligned[:-1], aligned[-1:]
    return {"_prompt": prompt, "_response": response, "_system": system,
            "_images": _media(example, attr.images, attr, data_args.dataset_dir),
            "_videos": _media(example, attr.videos, attr, data_args.dataset_dir),
            "_audios": _media(example, attr.audios, attr, data_args.dataset_dir)}


DATASET_CONVERTERS = {"sharegpt": convert_sharegpt}


def register_dataset_converter(name: str, converter) -> None:
    if name in DATASET_CONVERTERS:
        raise ValueError(f"Dataset converter {name} already exists.")
    DATASET_CONVERTERS[name] = converter


def get_dataset_converter(name: str):
    if name not in DATASET_CONVERTERS:
        raise ValueError(f"Dataset converter {name} not found.")
    return DATASET_CONVERTERS[name]


MEDIA_SETTINGS = ("image_max_pixels", "image_min_pixels", "image_do_pan_and_scan", "crop_to_patches",
                  "video_max_pixels", "video_min_pixels", "video_fps", "video_maxlen", "audio_sampling_rate",
                  "use_audio_in_video")


class _ImageOnlyProcessor:
    """Processor assembled from tokenizer + image processor when AutoProcessor cannot load (e.g. no torchvision
    for the video processor). Stand-in simplification; the real loader only warns and continues."""

    def __init__(self, tokenizer, image_processor):
        self.tokenizer = tokenizer
        self.image_processor = image_processor


def load_tokenizer(model_args) -> Dict[str, Any]:
    """{'tokenizer': ..., 'processor': ... or None} from `preprocess_parameters.model_name_or_path` (local only)."""
    from transformers import AutoImageProcessor, AutoProcessor, AutoTokenizer

    path = model_args.model_name_or_path
    tokenizer = AutoTokenizer.from_pretrained(path, use_fast=model_args.use_fast_tokenizer,
                                              split_special_tokens=model_args.split_special_tokens,
                                              trust_remote_code=model_args.trust_remote_code, local_files_only=True)
    try:
        processor = AutoProcessor.from_pretrained(path, trust_remote_code=model_args.trust_remote_code,
                                                  local_files_only=True)
    except Exception as e:  # third-party loader failures of every kind are only warnings here
        try:
            processor = _ImageOnlyProcessor(tokenizer, AutoImageProcessor.from_pretrained(path, local_files_only=True))
        except Exception:
            logger.warning(f"Processor was not found: {e}.")
            processor = None
    if processor is not None and not hasattr(processor, "image_processor"):
        processor = None  # a bare tokenizer came back
    if processor is not None:
        # the plugins read the data settings off the processor (getattr with their own defaults), so the YAML's
        # preprocess_parameters reach the resize only through these attributes, as in the real loader
        for key in MEDIA_SETTINGS:
            setattr(processor, key, getattr(model_args, key))
    return {"tokenizer": tokenizer, "processor": processor}


def update_tokenizer_with_chat_template(tokenizer, chat_template_path: str):
    with open(chat_template_path, "r", encoding="utf-8") as f:
        tokenizer.chat_template = f.read()
    return tokenizer
