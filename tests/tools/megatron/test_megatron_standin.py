"""The Megatron-route stand-in works as a target: its converter's HF -> Megatron -> HF round trip gives the same
tensors, the Megatron-layout checkpoint loads strictly into the model model_provider builds, and the example launch
script trains on CPU (2 gloo ranks). Everything runs in subprocesses: the stand-in's packages (megatron,
mindspeed_mm, checkpoint) must not mix with msmigrate's process or the FSDP2 stand-in's."""
import socket
import subprocess
import sys

import pytest

from msmigrate.testbeds.megatron_standin import EXAMPLE

ROUNDTRIP = """
import sys, torch
from safetensors.torch import load_file
HF = sys.argv[1]
from checkpoint.convert_cli import main as cli


def main(argv):
    sys.argv = ["mm-convert", *argv]
    cli()


par = ["--cfg.parallel_config.llm_pp_layers", "[[2]]", "--cfg.parallel_config.vit_pp_layers", "[[2]]",
       "--cfg.parallel_config.tp_size", "1"]
flat = ["--cfg.parallel_config.llm_pp_layers", "[2]", "--cfg.parallel_config.vit_pp_layers", "[2]",
        "--cfg.parallel_config.tp_size", "1"]  # mm_to_hf takes per-stage counts, as the real one does
main(["Qwen2_5_VLConverter", "hf_to_mm", "--cfg.mm_dir", "mm", "--cfg.hf_config.hf_dir", HF, *par])
main(["Qwen2_5_VLConverter", "mm_to_hf", "--cfg.mm_dir", "mm", "--cfg.hf_config.hf_dir", HF,
      "--cfg.save_hf_dir", "back", *flat])
a, b = load_file(HF + "/model.safetensors"), load_file("back/model.safetensors")
mg = torch.load("mm/release/mp_rank_00/model_optim_rng.pt", weights_only=False)["model"]
print(len(a), len(mg), sorted(set(a) ^ set(b)), [k for k in a if not torch.equal(a[k], b[k])])
print(tuple(mg["text_decoder.decoder.layers.0.self_attention.linear_qkv.weight"].shape))
"""

LOAD = """
import argparse, torch
from megatron.training.global_vars import set_args
from mindspeed_mm.configs.config import merge_mm_args
import pretrain_vlm
args = argparse.Namespace(mm_model="{model}", mm_data="", mm_tool="", tensor_model_parallel_size=1,
                          pipeline_model_parallel_size=1, context_parallel_size=1)
merge_mm_args(args); set_args(args)
model = pretrain_vlm.model_provider()
state = torch.load("mm/release/mp_rank_00/model_optim_rng.pt", weights_only=False)["model"]
print(model.load_state_dict(state, strict=True))
"""


def _py(root, code, *args):
    return subprocess.run([sys.executable, "-c", code, *args], cwd=root, capture_output=True, text=True, timeout=300)


def test_converter_round_trip_and_strict_load(standin_copy):
    res = _py(standin_copy, ROUNDTRIP, EXAMPLE["hf_dir"])
    assert res.returncode == 0, res.stderr[-2000:]
    counts, qkv = res.stdout.strip().splitlines()[-2:]
    assert counts == "57 43 [] []"  # per LLM layer q,k,v (w+b) -> 2 and gate+up -> 1; per ViT layer gate+up (w+b) -> 2
    assert qkv == "(128, 64)"  # (4 query heads + 2 x 2 kv heads) x head_dim 16
    res = _py(standin_copy, LOAD.format(model=EXAMPLE["model_json"]))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "All keys matched successfully" in res.stdout


def test_converter_refuses_what_the_standin_cannot_split(standin_copy):
    code = ROUNDTRIP.replace('"--cfg.parallel_config.tp_size", "1"]\nflat', '"--cfg.parallel_config.tp_size", "2"]\nflat')
    assert code != ROUNDTRIP
    res = _py(standin_copy, code, EXAMPLE["hf_dir"])
    assert res.returncode != 0 and "tp_size 1 and one pipeline stage only" in res.stderr


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.integration
def test_example_script_trains_on_cpu(standin_copy):
    res = _py(standin_copy, ROUNDTRIP, EXAMPLE["hf_dir"])
    assert res.returncode == 0, res.stderr[-2000:]
    (standin_copy / EXAMPLE["mm_dir"]).parent.mkdir(parents=True, exist_ok=True)
    (standin_copy / "mm").rename(standin_copy / EXAMPLE["mm_dir"])
    env_path = f"{sys.executable.rsplit('/', 1)[0]}:/usr/bin:/bin"
    run = subprocess.run(["bash", EXAMPLE["script"]], cwd=standin_copy, capture_output=True, text=True, timeout=600,
                         env={"PATH": env_path, "MASTER_PORT": str(_free_port()), "HOME": str(standin_copy)})
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    iters = [ln for ln in out.splitlines() if ln.lstrip().startswith("iteration")]
    assert len(iters) == 6 and "loaded checkpoint from ckpt/mm_path/tiny_qwen2_5_vl" in out
    assert (standin_copy / "save_dir/iter_0000006/mp_rank_00/model_optim_rng.pt").is_file()
