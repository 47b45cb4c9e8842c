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


TP2 = """
import sys, torch
from safetensors.torch import load_file
HF, TP = sys.argv[1], sys.argv[2]
from checkpoint.convert_cli import main as cli


def main(argv):
    sys.argv = ["mm-convert", *argv]
    cli()


def par(nested):
    layers = "[[2]]" if nested else "[2]"
    return ["--cfg.parallel_config.llm_pp_layers", layers, "--cfg.parallel_config.vit_pp_layers", layers,
            "--cfg.parallel_config.tp_size", TP]


main(["Qwen2_5_VLConverter", "hf_to_mm", "--cfg.mm_dir", "mm", "--cfg.hf_config.hf_dir", HF, *par(True)])
main(["Qwen2_5_VLConverter", "mm_to_hf", "--cfg.mm_dir", "mm", "--cfg.hf_config.hf_dir", HF,
      "--cfg.save_hf_dir", "back", *par(False)])
a, b = load_file(HF + "/model.safetensors"), load_file("back/model.safetensors")
print(sorted(set(a) ^ set(b)), [k for k in a if not torch.equal(a[k], b[k])])
ranks = [torch.load(f"mm/release/mp_rank_0{r}/model_optim_rng.pt", weights_only=False)["model"] for r in range(2)]
L = "text_decoder.decoder.layers.0."
q, k, v = (a[f"model.layers.0.self_attn.{x}_proj.weight"] for x in "qkv")
# rank r holds KV group r whole: its 2 query heads, its key head, its value head (head_dim 16)
print(all(torch.equal(ranks[r][L + "self_attention.linear_qkv.weight"],
                      torch.cat([q[32 * r:32 * r + 32], k[16 * r:16 * r + 16], v[16 * r:16 * r + 16]])) for r in range(2)))
g, u = a["model.layers.0.mlp.gate_proj.weight"], a["model.layers.0.mlp.up_proj.weight"]
h = g.shape[0] // 2
print(all(torch.equal(ranks[r][L + "mlp.linear_fc1.weight"], torch.cat([g[h * r:h * r + h], u[h * r:h * r + h]]))
          for r in range(2)))
o = a["model.layers.0.self_attn.o_proj.weight"]
print(all(torch.equal(ranks[r][L + "self_attention.linear_proj.weight"], o[:, 32 * r:32 * r + 32]) for r in range(2)))
print(all(torch.equal(ranks[r][L + "input_layernorm.weight"], a["model.layers.0.input_layernorm.weight"])
          for r in range(2)))
"""


def test_converter_splits_for_tensor_parallelism_in_the_real_layout(standin_copy):
    res = _py(standin_copy, TP2, EXAMPLE["hf_dir"], "2")
    assert res.returncode == 0, res.stderr[-2000:]
    # round trip identical; column-parallel qkv by whole KV group, fc1 by gate/up blocks, row-parallel proj by
    # columns, norms copied
    assert res.stdout.strip().splitlines()[-5:] == ["[] []", "True", "True", "True", "True"]
    assert sorted(p.name for p in (standin_copy / "mm" / "release").iterdir()) == ["mp_rank_00", "mp_rank_01"]


def test_converter_refuses_splits_that_cut_a_kv_group_or_a_stage(standin_copy):
    res = _py(standin_copy, TP2, EXAMPLE["hf_dir"], "4")  # the tiny model has 2 KV groups
    assert res.returncode != 0 and "KV groups (2) do not divide by tp_size 4" in res.stderr
    code = ROUNDTRIP.replace('"[[2]]", "--cfg.parallel_config.vit_pp_layers"', '"[[1, 1]]", "--cfg.parallel_config.vit_pp_layers"')
    assert code != ROUNDTRIP
    res = _py(standin_copy, code, EXAMPLE["hf_dir"])  # two text stages, one ViT stage
    assert res.returncode != 0 and "need one count per stage" in res.stderr
    code = ROUNDTRIP.replace('"[[2]]", "--cfg.parallel_config.vit_pp_layers", "[[2]]"',
                             '"[[1, 2]]", "--cfg.parallel_config.vit_pp_layers", "[[2, 0]]"')
    res = _py(standin_copy, code, EXAMPLE["hf_dir"])  # 3 text layers for a 2-layer decoder
    assert res.returncode != 0 and "text pipeline layers [1, 2] sum to 3, the model has 2" in res.stderr
    code = ROUNDTRIP.replace('"[[2]]", "--cfg.parallel_config.vit_pp_layers", "[[2]]"',
                             '"[[1], [1]]", "--cfg.parallel_config.vit_pp_layers", "[[2]]"')
    res = _py(standin_copy, code, EXAMPLE["hf_dir"])  # 2 virtual stages for the text, 1 for the ViT
    assert res.returncode != 0 and "the same number of virtual stages" in res.stderr


PP2 = TP2.split("def par(nested):")[0] + """
def par(nested):
    text, vit = ("[[1, 1]]", "[[2, 0]]") if nested else ("[1, 1]", "[2, 0]")
    return ["--cfg.parallel_config.llm_pp_layers", text, "--cfg.parallel_config.vit_pp_layers", vit,
            "--cfg.parallel_config.tp_size", TP]


main(["Qwen2_5_VLConverter", "hf_to_mm", "--cfg.mm_dir", "mm", "--cfg.hf_config.hf_dir", HF, *par(True)])
main(["Qwen2_5_VLConverter", "mm_to_hf", "--cfg.mm_dir", "mm", "--cfg.hf_config.hf_dir", HF,
      "--cfg.save_hf_dir", "back", *par(False)])
a, b = load_file(HF + "/model.safetensors"), load_file("back/model.safetensors")
print(sorted(set(a) ^ set(b)), [k for k in a if not torch.equal(a[k], b[k])])
st = [[torch.load(f"mm/release/mp_rank_0{r}_00{s}/model_optim_rng.pt", weights_only=False)["model"]
       for r in range(2)] for s in range(2)]
names = [sorted(st[s][0]) for s in range(2)]
T, V = "text_decoder.decoder.layers.", "image_encoder.encoder.blocks.layers."
# stage 0: the whole ViT (both blocks, patch embedding, projector) and text layer 0 with the embedding
print(sorted({n[len(T):].split(".")[0] for n in names[0] if n.startswith(T)}),
      sorted({n[len(V):].split(".")[0] for n in names[0] if n.startswith(V)}),
      any(n.startswith("image_encoder.projector.") for n in names[0]),
      any(n.startswith("text_decoder.embedding.") for n in names[0]),
      any(n.startswith("text_decoder.output_layer.") for n in names[0]))
# stage 1: text layer 1 renumbered 0, the final norm and output layer; nothing of the ViT
print(sorted({n[len(T):].split(".")[0] for n in names[1] if n.startswith(T)}),
      any(n.startswith("image_encoder.") for n in names[1]),
      any(n.startswith("text_decoder.decoder.final_layernorm.") for n in names[1]),
      any(n.startswith("text_decoder.embedding.") for n in names[1]))
# what stage 1 holds as its layer 0 is HF layer 1, split by TP like every stage
o = a["model.layers.1.self_attn.o_proj.weight"]
print(all(torch.equal(st[1][r][T + "0.self_attention.linear_proj.weight"], o[:, 32 * r:32 * r + 32]) for r in range(2)))
"""


def test_converter_splits_for_pipeline_stages_in_the_real_layout(standin_copy):
    res = _py(standin_copy, PP2, EXAMPLE["hf_dir"], "2")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-4:] == ["[] []", "['0'] ['0', '1'] True True False",
                                                   "['0'] False True False", "True"]
    assert sorted(p.name for p in (standin_copy / "mm" / "release").iterdir()) == [
        "mp_rank_00_000", "mp_rank_00_001", "mp_rank_01_000", "mp_rank_01_001"]


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


VPP = TP2.split("def par(nested):")[0] + """
layers = ["--cfg.parallel_config.llm_pp_layers", "[[1, 0], [0, 1]]", "--cfg.parallel_config.vit_pp_layers",
          "[[2, 0], [0, 0]]", "--cfg.parallel_config.tp_size", TP]
main(["Qwen2_5_VLConverter", "hf_to_mm", "--cfg.mm_dir", "mm", "--cfg.hf_config.hf_dir", HF, *layers])
T, V = "text_decoder.decoder.layers.", "image_encoder.encoder.blocks.layers."
for s in range(2):
    ck = torch.load(f"mm/release/mp_rank_00_00{s}/model_optim_rng.pt", weights_only=False)
    for key in sorted(k for k in ck if k.startswith("model")):
        names = ck[key]
        print(s, key, sorted({n[len(T):].split(".")[0] for n in names if n.startswith(T)}),
              len({n for n in names if n.startswith(V)}) > 0, any(n.startswith("text_decoder.embedding.") for n in names),
              any(n.startswith("text_decoder.output_layer.") for n in names))
a = load_file(HF + "/model.safetensors")
ck = torch.load("mm/release/mp_rank_00_001/model_optim_rng.pt", weights_only=False)
# rank 1's second virtual stage (flat stage 3) holds HF text layer 1, renumbered 0
print(torch.equal(ck["model1"][T + "0.self_attention.linear_proj.weight"], a["model.layers.1.self_attn.o_proj.weight"]))
"""


def test_converter_writes_virtual_pipeline_stages_in_the_real_layout(standin_copy):
    """pp=2 x vpp=2: virtual stage v of rank p is flat stage v * pp + p, saved in rank p's file as model<v> (the
    real save_by_vpp); the embedding on the first flat stage with text layers, the output layer on the last."""
    res = _py(standin_copy, VPP, EXAMPLE["hf_dir"], "1")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-5:] == [
        "0 model0 ['0'] True True False", "0 model1 [] False False False",
        "1 model0 [] False False False", "1 model1 ['0'] False False True", "True"]
