"""The maintainer's review of a delivery (agent/delivery_review.py): each check can fail on a planted defect, and a
clean delivery passes with a diff against the example it derives from. The end-to-end runs assert the same review
on their real deliveries (tests/agent/test_rules_e2e.py, test_rules_open_world.py)."""

from __future__ import annotations

from pathlib import Path

import git

from msmigrate.agent.routes.fsdp2.delivery_review import measured_literals, review_delivery

EXAMPLE = """# training settings
training:
  load: ./ckpt/hf_path/Example
  plugin:
    - mindspeed_mm/fsdp/models/example
"""
EXAMPLE_SH = """source /usr/local/Ascend/cann/set_env.sh
NPUS_PER_NODE=16
NNODES=8
torchrun trainer.py examples/example/example_config.yaml
"""
PLAN = {"similar_case": "examples/example/example_config.yaml", "config_path": "examples/fam/fam_config.yaml",
        "script_path": "examples/fam/finetune_fam.sh", "launch_size": {"nproc_per_node": 2, "nnodes": 1},
        "media_expansion": {"per_image": [{"count": 4, "text": "<img><img><img><img>"}],
                            "processor_kwargs": {"patch_size": 7, "num_image_tokens": 4}}}


def _repo(tmp_path: Path, source: Path, files: dict[str, str]) -> tuple[Path, str]:
    root = tmp_path / "target"
    (root / "examples" / "example").mkdir(parents=True)
    (root / "examples" / "example" / "example_config.yaml").write_text(EXAMPLE)
    (root / "examples" / "example" / "finetune_example.sh").write_text(EXAMPLE_SH)
    repo = git.Repo.init(root)
    repo.git.add(A=True)
    repo.git.commit("-m", "base", "--no-gpg-sign", author="t <t@t>")
    base = repo.head.commit.hexsha
    repo.git.checkout("-b", "msmigrate/run-1")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    repo.git.add(A=True)
    repo.git.commit("-m", "delivery", "--no-gpg-sign", author="t <t@t>")
    return root, base


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "user" / "model"
    source.mkdir(parents=True)
    (source / "model.safetensors").write_bytes(b"")
    return source


def test_a_clean_delivery_passes_and_shows_its_diff(tmp_path):
    source = _source(tmp_path)
    good = {"examples/fam/fam_config.yaml": EXAMPLE.replace("./ckpt/hf_path/Example", str(source))
            .replace("example", "fam") + "  init_model_with_meta_device: true\n",
            "examples/fam/finetune_fam.sh": EXAMPLE_SH.replace("=16", "=2").replace("=8", "=1")
            .replace("examples/example/example_config.yaml", "examples/fam/fam_config.yaml")}
    root, base = _repo(tmp_path, source, good)
    review = review_delivery(root, base, "msmigrate/run-1", plan=PLAN, source=source, data_path=None, run_id="run-1")
    assert review["problems"] == []
    assert "+NPUS_PER_NODE=2" in review["diffs"]["examples/fam/finetune_fam.sh"]
    assert f"+  load: {source}" in review["diffs"]["examples/fam/fam_config.yaml"]


def test_every_check_fails_on_its_defect(tmp_path):
    source = _source(tmp_path)
    bad = {"examples/fam/fam_config.yaml": "training:\n  init_model_with_meta_device: true\n"
                                           "  cache_dir: /tmp/scratch/run-1/cache\n",
           "examples/fam/finetune_fam.sh": EXAMPLE_SH,
           "mindspeed_mm/fsdp/models/fam/plugin.py": 'expansion = "<img><img><img><img>"\npatch_size = 7\n'}
    root, base = _repo(tmp_path, source, bad)
    problems = review_delivery(root, base, "msmigrate/run-1", plan=PLAN, source=source, data_path=None,
                               run_id="run-1")["problems"]
    text = "\n".join(problems)
    assert "absolute path(s) outside the spec's source and data: ['/tmp/scratch/run-1/cache']" in text
    assert "holds the run id run-1" in text
    assert "expansion of a sample image (4 media tokens)" in text and "processor setting patch_size = 7" in text
    assert "launches 16 process(es) per node on 8 node(s), the spec asks 2 on 1" in text
    assert "trains from a random init" in text
    # the example's own toolkit path is inherited, not a finding
    assert "/usr/local/Ascend" not in text


def test_literals_only_in_code_for_settings():
    exp = PLAN["media_expansion"]
    assert measured_literals("README.md", "patch_size = 7", exp) == []
    assert measured_literals("x.py", "self.patch_size = getattr(cfg, 'patch_size', None)", exp) == []


def test_a_converted_checkpoint_under_the_run_is_the_delivery_s_weights(tmp_path):
    source = _source(tmp_path)
    converted = tmp_path / "runs" / "run-1" / "converted_weights"
    plan = {**PLAN, "weights": {"folder": str(converted)}}
    script = (EXAMPLE_SH.replace("=16", "=2").replace("=8", "=1")
              .replace("examples/example/example_config.yaml", "examples/fam/fam_config.yaml"))

    def review(load, name):
        cfg = EXAMPLE.replace("./ckpt/hf_path/Example", str(load)).replace("example", "fam") \
            + "  init_model_with_meta_device: true\n"
        root, base = _repo(tmp_path / name, source,
                           {"examples/fam/fam_config.yaml": cfg, "examples/fam/finetune_fam.sh": script})
        return review_delivery(root, base, "msmigrate/run-1", plan=plan, source=source, data_path=None,
                               run_id="run-1")["problems"]

    converted.mkdir(parents=True)
    (converted / "model.safetensors").write_bytes(b"")
    assert review(converted, "converted") == []  # its path (with the run id) is the one the plan wrote
    assert any(f"training.load names {source}, but transformers converts" in p for p in review(source, "source"))


def test_a_work_branch_that_cannot_be_read_is_said_in_the_report_not_a_crash(tmp_path):
    from types import SimpleNamespace

    from msmigrate.agent.report import _review

    ctx = SimpleNamespace(target=tmp_path / "gone", source=tmp_path, data_path=None, work_branch="msmigrate/x",
                          run_id="r1")
    state = {"artifacts": {"base_commit": "0" * 40}, "plan": {"config_path": "examples/x/x.yaml"}}
    found = _review(SimpleNamespace(ctx=ctx), state)
    assert found["problems"] == [] and found["skipped"].startswith("the work branch cannot be read")
