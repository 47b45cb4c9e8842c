"""The config_schema probe over a tiny params tree written like the real one: pydantic models whose fields are
declared with ``dataclasses.field`` (the real repo's style), a plain dataclass sub-config, a data sub-schema
imported under an alias from ``func_utils/convert.py``, and a package ``__init__`` that needs NON_MEGATRON=true."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from msmigrate.tools.runtime import run_probe
from msmigrate.tools.yaml_validator import schema_from_target, validate_config
from msmigrate.tools.yaml_validator.schema import all_paths, type_label, iter_paths

FILES = {
    "mindspeed_mm/__init__.py": """
        import os
        if os.environ.get("NON_MEGATRON", "").lower() != "true":
            import megatron  # noqa: F401  (the real package imports Megatron patches unless NON_MEGATRON=true)
    """,
    "mindspeed_mm/config/__init__.py": "",
    "mindspeed_mm/config/arguments/__init__.py": "",
    "mindspeed_mm/config/arguments/base_args.py": """
        from pydantic import BaseModel

        class BaseArguments(BaseModel):
            class Config:
                extra = "allow"
                validate_assignment = True
    """,
    "mindspeed_mm/fsdp/__init__.py": "",
    "mindspeed_mm/fsdp/data/__init__.py": "",
    "mindspeed_mm/fsdp/data/data_utils/__init__.py": "",
    "mindspeed_mm/fsdp/data/data_utils/func_utils/__init__.py": "",
    "mindspeed_mm/fsdp/data/data_utils/func_utils/convert.py": """
        from dataclasses import field
        from typing import Literal, Optional
        from mindspeed_mm.config.arguments.base_args import BaseArguments

        class DatasetAttr(BaseArguments):
            messages: Optional[str] = field(default="conversations")
            formatting: Literal["alpaca", "sharegpt", "multimodal_tool", "openai"] = field(default="sharegpt")

        class DataArguments(BaseArguments):
            template: Optional[str] = field(default=None, metadata={"help": "template name"})
            cutoff_len: int = field(default=1024)
    """,
    "mindspeed_mm/fsdp/data/data_utils/func_utils/model_args.py": """
        from dataclasses import field
        from typing import Optional
        from mindspeed_mm.config.arguments.base_args import BaseArguments

        class ProcessorArguments(BaseArguments):
            model_name_or_path: Optional[str] = field(default=None)
    """,
    "mindspeed_mm/fsdp/params/__init__.py": "",
    "mindspeed_mm/fsdp/params/data_args.py": """
        from dataclasses import field
        from typing import Optional
        from mindspeed_mm.config.arguments.base_args import BaseArguments
        from mindspeed_mm.fsdp.data.data_utils.func_utils.convert import DataArguments as BasicArgs, DatasetAttr
        from mindspeed_mm.fsdp.data.data_utils.func_utils.model_args import ProcessorArguments

        class DataSetArguments(BaseArguments):
            dataset_type: str = field(metadata={"help": "registered id"})
            basic_parameters: BasicArgs = field(default_factory=BasicArgs)
            preprocess_parameters: Optional[ProcessorArguments] = field(default_factory=ProcessorArguments)
            attr: DatasetAttr = field(default_factory=DatasetAttr)

        class DataloaderArguments(BaseArguments):
            dataloader_mode: str = field(metadata={"help": "mode"})
            shuffle: Optional[bool] = field(metadata={"help": "shuffle"})
            num_workers: int = field(default=2)

        class DataArguments(BaseArguments):
            dataset_param: DataSetArguments = field(default_factory=DataSetArguments)
            val_dataset_param: Optional[DataSetArguments] = field(default=None)
            dataloader_param: DataloaderArguments = field(default_factory=DataloaderArguments)
    """,
    "mindspeed_mm/fsdp/params/training_args.py": """
        import os
        from dataclasses import dataclass, field
        from typing import List, Literal, Optional, Union
        from mindspeed_mm.config.arguments.base_args import BaseArguments

        @dataclass
        class QuantizeConfig:
            recipe_name: Optional[str] = None
            apply_modules: List[str] = field(default_factory=list)

        class ScalePlan(BaseArguments):
            match: str = field(metadata={"help": "regex"})
            scale: float = field(default=1.0)

        class TrainingArguments(BaseArguments):
            lr: float = field(default=5e-5)
            plugin: List[str] = field(default_factory=list)
            optimizer: Literal["adamw", "muon"] = field(default="adamw")
            init_lora_weights: Union[bool, Literal["gaussian", "pissa"]] = field(default=True)
            lr_scaling_plan: Optional[List[ScalePlan]] = field(default=None)
            quantization_plan: QuantizeConfig = field(default_factory=QuantizeConfig)
            fully_shard_parallel_size: Union[str, int] = field(default="auto")

            def model_post_init(self, __context):
                self.local_rank = int(os.environ["LOCAL_RANK"])  # like the real one: fails outside torchrun
    """,
    "mindspeed_mm/fsdp/params/argument.py": """
        from dataclasses import field
        from mindspeed_mm.config.arguments.base_args import BaseArguments
        from mindspeed_mm.fsdp.params.data_args import DataArguments
        from mindspeed_mm.fsdp.params.training_args import TrainingArguments

        class Arguments(BaseArguments):
            data: DataArguments = field(default_factory=DataArguments)
            training: TrainingArguments = field(default_factory=TrainingArguments)
    """,
}


@pytest.fixture(scope="module")
def params_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mini_target")
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def probed(params_root) -> dict:
    result = run_probe(sys.executable, "config_schema", ["--target-root", str(params_root)], timeout=120)
    assert result.ok, (result.error, result.data.get("stderr_tail"))
    return result.data["result"]


def test_probe_walks_real_style_models(probed):
    schema = probed["schema"]
    assert probed["schema_version"] == 1 and schema["class"] == "Arguments"
    fields = dict(iter_paths(schema))
    ds = fields["data.dataset_param.dataset_type"]
    assert ds["required"] is True and ds["type"] == {"kind": "str"}
    assert fields["data.dataloader_param.shuffle"]["required"] is True  # Optional without default: still required
    assert type_label(fields["data.dataloader_param.shuffle"]["type"]) == "Optional[bool]"
    assert fields["data.dataloader_param.num_workers"]["default"] == 2
    assert fields["data.dataset_param.attr.formatting"]["type"]["choices"] == ["alpaca", "sharegpt",
                                                                               "multimodal_tool", "openai"]
    assert fields["data.dataset_param.basic_parameters"]["type"]["module"].endswith("func_utils.convert")
    assert type_label(fields["training.init_lora_weights"]["type"]) == "bool | Literal['gaussian', 'pissa']"
    assert fields["training.plugin"]["default"] == []
    assert fields["training.quantization_plan"]["type"]["extra"] == "forbid"  # plain dataclass
    assert "training.quantization_plan.apply_modules" in fields
    assert fields["training.lr_scaling_plan[].match"]["required"] is True
    assert type_label(fields["training.fully_shard_parallel_size"]["type"]) == "str | int"
    assert fields["data.val_dataset_param"]["default"] is None


def test_schema_drives_the_validator(probed):
    text = "data:\n  dataset_param: {dataset_type: x}\n  dataloader_param: {dataloader_mode: sampler}\n" \
           "training:\n  optimizer: sgd\n  lr_scaling_plan:\n  - scale: 2\n  pluginn: []\n"
    got = {(f["code"], f["path"]) for f in validate_config(text, schema=probed).data["findings"]}
    assert got >= {("missing-required", "data.dataloader_param.shuffle"), ("bad-literal", "training.optimizer"),
                   ("missing-required", "training.lr_scaling_plan[0].match"), ("unknown-key", "training.pluginn")}


def test_probe_reports_import_errors(params_root, tmp_path):
    result = run_probe(sys.executable, "config_schema",
                       ["--target-root", str(params_root), "--root-class", "mindspeed_mm.fsdp.params.nope:Arguments"])
    assert not result.ok and "ModuleNotFoundError" in result.error
    bare = run_probe(sys.executable, "config_schema", ["--target-root", str(tmp_path)])
    assert not bare.ok and "No module named 'mindspeed_mm'" in bare.error


def test_schema_from_target_caches_per_commit(params_root, tmp_path):
    git = ["git", "-C", str(params_root)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"], check=True)
    first = schema_from_target(params_root, sys.executable, cache_dir=tmp_path)
    assert first.ok and first.data["cached"] is False
    assert len(list(tmp_path.glob("config_schema_*.json"))) == 1
    second = schema_from_target(params_root, sys.executable, cache_dir=tmp_path)
    assert second.ok and second.data["cached"] is True
    assert all_paths(second.data["schema"]) == all_paths(first.data["schema"])
