"""One generated Megatron-route stand-in per session (read-only use; tests that edit copy it)."""
import shutil
from pathlib import Path

import pytest

from msmigrate.testbeds.megatron_standin import write_megatron_standin


@pytest.fixture(scope="session")
def megatron_standin(tmp_path_factory) -> Path:
    return write_megatron_standin(tmp_path_factory.mktemp("mstandin") / "MindSpeed-MM", git_init=False)


@pytest.fixture
def standin_copy(megatron_standin, tmp_path) -> Path:
    dest = tmp_path / "MindSpeed-MM"
    shutil.copytree(megatron_standin, dest)
    return dest
