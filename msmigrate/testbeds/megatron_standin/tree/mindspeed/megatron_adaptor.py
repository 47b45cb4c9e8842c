"""Stand-in of MindSpeed's adaptor. The real one imports torch_npu at import time and patches Megatron for the NPU;
here it only hands back the parsed MindSpeed arguments (none on the stand-in)."""
import argparse


def get_mindspeed_args():
    return argparse.Namespace()
