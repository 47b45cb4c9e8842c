"""MindSpeed's own arguments (none on the stand-in)."""
import argparse


def get_mindspeed_args(get_defaults=False):
    return argparse.Namespace()
