from typing import List, Literal, Optional

from pydantic import Field

from mindspeed_mm.config.arguments.base_args import BaseArguments


class StaticProfileParam(BaseArguments):
    level: str = "level1"
    with_stack: bool = False
    with_memory: bool = False
    record_shapes: bool = False
    with_cpu: bool = False
    save_path: str = "./profiling"
    start_step: int = 10
    end_step: int = 11
    data_simplification: bool = False
    aic_metrics_type: str = "PipeUtilization"
    analyse_flag: bool = True


class ProfileArguments(BaseArguments):
    enable: bool = False
    profile_type: str = "static"
    ranks: List[int] = Field(default_factory=lambda: [0])
    static_param: StaticProfileParam = Field(default_factory=StaticProfileParam)


class MemoryProfileArguments(BaseArguments):
    enable: bool = False
    start_step: int = 1
    end_step: int = 2
    save_path: str = "./memory_snapshot"
    dump_ranks: List[int] = Field(default_factory=lambda: [0])
    stacks: Literal["python", "all"] = "all"
    max_entries: Optional[int] = None
    mem_info: bool = False


class ToolsArguments(BaseArguments):
    profile: ProfileArguments = Field(default_factory=ProfileArguments)
    memory_profile: MemoryProfileArguments = Field(default_factory=MemoryProfileArguments)
