from typing import Optional

from pydantic import Field

from mindspeed_mm.config.arguments.base_args import BaseArguments


class ProcessorArguments(BaseArguments):
    model_name_or_path: Optional[str] = Field(default=None, description="Tokenizer/processor folder (not the weights).")
    use_fast_tokenizer: bool = True
    split_special_tokens: bool = False
    image_resolution: int = 512
    video_resolution: int = 128
    image_max_pixels: int = 589824
    image_min_pixels: int = 1024
    video_max_pixels: int = 65536
    video_min_pixels: int = 256
    video_fps: float = 2.0
    video_maxlen: int = 128
    image_do_pan_and_scan: bool = False
    crop_to_patches: bool = False
    use_audio_in_video: bool = False
    audio_sampling_rate: int = 16000
    trust_remote_code: bool = False
