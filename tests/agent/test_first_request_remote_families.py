"""The first LLM request of a run on each remote-code family added for issue 31 (what a blind player sees first,
through scripts/llm_relay.py): the plan and the model-phase prompt state that source's own training contract —
where the loss is computed, the label convention, which positions its own pipeline trains (measured), the data
format its loader reads, the tag and media tokens it writes, and (DeepSeek-VL2) that its own processor makes the
pixels. The endpoint answers 503 and the run ends there with a report (no retries), so only the prompt is tested."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai_server import ScriptedChatServer  # noqa: E402

from msmigrate.agent.config import LLMSettings, RunSpec, Settings  # noqa: E402
from msmigrate.agent.runner import Run  # noqa: E402

pytestmark = pytest.mark.integration

EXPECTED = {
    "qwen_vl_chat": [
        "the source's own training code: finetune.py",
        "loss computed at: the model's forward (.loss): the training code overrides no compute_loss",
        "label convention: aligned (modeling_qwen.py:",
        "the training code sets on its tokenizer: tokenizer.pad_token_id = tokenizer.eod_id",
        "the trained stretches ['<|im_end|>\\n<|im_start|>', '<|im_end|>\\n<|im_start|>', "
        "'The image shows a grey square on a white background.<|im_end|>\\n']",
        "the tag tokens it writes: ['<|im_start|>', '<|im_end|>', '<img>', '<imgpad>', '</img>']",
        "'conversations'",
        "the source's chat template takes string content only",
        "the source's forward (modeling_qwen.py:163) takes no image argument",
    ],
    "deepseek_vl_v2": [
        "the source's own training code: finetune/dataset.py, finetune/train.py",
        "loss computed at: finetune/train.py:17 VLTrainer.compute_loss",
        "forward call: kwargs — `model(**inputs)`",
        "reads records with keys ['conversation', 'images']",
        "media runs [27] of ['<image>']",
        "the tag tokens it writes: ['<｜begin▁of▁sentence｜>', '<|User|>', '<image>', '<|Assistant|>', "
        "'<｜end▁of▁sentence｜>']",
        "processing_deepseek_vl_v2.py:",
        "builds the processor around the loaded DeepseekVLV2Processor itself",
        "images_seq_mask=None, images_spatial_crop=None, labels=None",
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_first_request_states_the_sources_own_training_contract(name, tmp_path):
    from msmigrate.testbeds.fixtures import build_source
    from msmigrate.testbeds.standin import write_standin

    source = build_source(name, tmp_path / "sources" / name)
    target = write_standin(tmp_path / "target")
    with ScriptedChatServer({}, fail_first=1000) as server:
        spec = RunSpec(source=source, target=target, model_name=name, policy="llm",
                       llm=LLMSettings(base_url=server.base_url, model="scripted", timeout_s=30,
                                       max_transport_retries=0))
        run = Run(spec, f"{name}-first", Settings(runs_dir=tmp_path / "runs", llm_api_key="sk-test"))
        try:
            final = run.drive()
        finally:
            run.close()
    assert server.requests, final.get("exit_detail")
    prompt = next(m["content"] for m in server.requests[0]["messages"] if m["role"] == "user")
    assert prompt.startswith(f"# Phase: model — migrating `{name}`")
    missing = [fact for fact in EXPECTED[name] if fact not in prompt]
    assert not missing, missing
    assert "could not derive" not in prompt  # every derivation on these sources ran
    run_dir = tmp_path / "runs" / f"{name}-first"
    assert (run_dir / "verification_report.md").is_file() and (run_dir / "evidence.json").is_file()
