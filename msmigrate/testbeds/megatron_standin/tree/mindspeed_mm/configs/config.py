"""The three JSON files a Megatron launch names (--mm-data, --mm-model, --mm-tool), read into attribute objects
that pretrain_vlm.py reaches as ``args.mm.model`` / ``args.mm.data`` / ``args.mm.tool``."""
import json
import os

import yaml


class ConfigReader:
    """A JSON object as attributes; nested objects become ConfigReaders too."""

    def __init__(self, config_dict: dict) -> None:
        for k, v in config_dict.items():
            self.__dict__[k] = ConfigReader(v) if isinstance(v, dict) else v

    def to_dict(self) -> dict:
        return {k: v.to_dict() if isinstance(v, ConfigReader) else v for k, v in self.__dict__.items()}

    def get(self, key, default):
        return self.__dict__.get(key, default)


class MMConfig:
    def __init__(self, files: dict) -> None:
        for name, path in files.items():
            if path == "":
                continue
            real_path = os.path.realpath(path)
            with open(real_path, encoding="utf-8") as f:
                # a .yaml file holds one section per name (model / data / tool), a .json file just this one
                config = yaml.safe_load(f)[name] if real_path.endswith(".yaml") else json.load(f)
            setattr(self, name, ConfigReader(config))


def _add_mm_args(parser):
    group = parser.add_argument_group(title="multimodel")
    group.add_argument("--mm-data", type=str, default="")
    group.add_argument("--mm-model", type=str, default="")
    group.add_argument("--mm-tool", type=str, default="")
    return parser


def mm_extra_args_provider(parser):
    return _add_mm_args(parser)


def merge_mm_args(args):
    args.mm = MMConfig({"data": args.mm_data, "model": args.mm_model, "tool": args.mm_tool})
