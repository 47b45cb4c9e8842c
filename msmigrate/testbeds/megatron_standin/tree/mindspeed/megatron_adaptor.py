"""Stand-in of MindSpeed's adaptor. The real one imports torch_npu at import time and patches Megatron for the NPU;
the stand-in patches nothing."""
from mindspeed.args_utils import get_mindspeed_args  # noqa: F401  (pretrain_vlm.py imports it from here)
