"""How the target's trainer materialises a meta-built model, read from its code: the model prompt's buffer advice
follows it (the stand-in's ``model.to_empty`` vs the real framework's parameters-only ``to_empty_if_needed``; the old
text said "recompute them in init_weights", which a resumed load never calls)."""

from __future__ import annotations

from pathlib import Path

from msmigrate.agent.handoff import compact_target
from msmigrate.prompts.render import render
from msmigrate.prompts.sample_state import sample_vars
from msmigrate.tools.repo_reader.trainer_facts import meta_init_facts

STANDIN = Path(__file__).resolve().parents[2] / "msmigrate" / "testbeds" / "standin" / "tree"


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text, encoding="utf-8")


def test_the_standin_trainer_keeps_buffers_as_the_real_one_does():
    # it used to call Module.to_empty (every tensor emptied, a plugin override run): the real trainer never does
    facts = meta_init_facts(STANDIN)
    assert facts["storage"] == "to_empty_if_needed" and facts["buffers_kept"] is True
    assert facts["defined_in"] == "mindspeed_mm/fsdp/utils/utils.py"
    assert facts["init_weights"] == "only without training.load"


def test_a_trainer_that_calls_module_to_empty_is_read_as_emptying_every_tensor(tmp_path):
    write(tmp_path, "mindspeed_mm/fsdp/train/trainer.py",
          "def get_model(model, args):\n"
          "    model.to_empty(device='cpu')\n"
          "    if args.training.load is None:\n"
          "        model.init_weights()\n")
    facts = meta_init_facts(tmp_path)
    assert facts["storage"] == "Module.to_empty" and facts["buffers_kept"] is False


def test_a_parameters_only_storage_call_keeps_buffers(tmp_path):
    # the shape of the real framework's trainer, in other words than its own
    write(tmp_path, "mindspeed_mm/fsdp/train/trainer.py",
          "from mindspeed_mm.fsdp.utils.utils import to_empty_if_needed, init_model_weights\n"
          "def get_model(model, args):\n"
          "    if args.training.load is None:\n"
          "        to_empty_if_needed(model, device='cpu')\n"
          "        init_model_weights(model)\n"
          "    else:\n"
          "        to_empty_if_needed(model, device='cpu')\n")
    write(tmp_path, "mindspeed_mm/fsdp/utils/utils.py",
          "import torch\n"
          "def to_empty_if_needed(model, device):\n"
          "    def fresh(t):\n"
          "        return torch.empty_like(t, device=device) if isinstance(t, torch.nn.Parameter) else t\n"
          "    return model._apply(fresh)\n")
    facts = meta_init_facts(tmp_path)
    assert facts == {"storage": "to_empty_if_needed", "at": "mindspeed_mm/fsdp/train/trainer.py:4",
                     "init_weights": "only without training.load", "defined_in": "mindspeed_mm/fsdp/utils/utils.py",
                     "buffers_kept": True}
    # a to_empty_if_needed that empties every tensor is not taken for one that keeps buffers
    write(tmp_path, "mindspeed_mm/fsdp/utils/utils.py",
          "def to_empty_if_needed(model, device):\n    return model.to_empty(device=device)\n")
    assert meta_init_facts(tmp_path)["buffers_kept"] is False


def model_prompt(meta_init) -> str:
    values = sample_vars("model", live_index=False)
    values["target_summary"] = compact_target({"ids": {}, "headline": "", "meta_init": meta_init})
    return render("model", **values)


def test_the_model_contract_follows_the_targets_trainer(tmp_path):
    standin = model_prompt(meta_init_facts(STANDIN))
    assert "`to_empty` override on\n  your class never runs" in standin
    emptying = model_prompt({"storage": "Module.to_empty", "at": "t.py:2", "buffers_kept": False,
                             "init_weights": "only without training.load"})
    assert "calls `model.to_empty(device=...)`" in emptying and "rebuild non-persistent buffers" in emptying
    for text in (standin, emptying):
        assert "never rely on `init_weights` for a buffer" in text
        assert "init_weights()` must re-initialise and recompute" not in text  # the advice that pointed the wrong way
    real = model_prompt({"storage": "to_empty_if_needed", "at": "t.py:1", "buffers_kept": True,
                         "init_weights": "only without training.load"})
    assert "`to_empty` override on\n  your class never runs" in real and "in `__init__` from\n  the config" in real
    unknown = model_prompt(None)
    assert "was not found" in unknown and "a resumed load may skip it" in unknown


def test_the_standins_storage_call_keeps_buffers_and_never_runs_a_to_empty_override():
    """What the real ``to_empty_if_needed`` does, checked on the stand-in's own: parameters fresh, buffers as built."""
    import sys

    import torch
    from accelerate import init_empty_weights

    sys.path.insert(0, str(STANDIN))
    try:
        from mindspeed_mm.fsdp.utils.utils import init_model_weights, to_empty_if_needed
    finally:  # the stand-in's package must not stay importable in this test process
        sys.path.remove(str(STANDIN))
        for name in [n for n in sys.modules if n == "mindspeed_mm" or n.startswith("mindspeed_mm.")]:
            del sys.modules[name]

    class Rotary(torch.nn.Module):
        overridden = False

        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)
            self.register_buffer("inv_freq", torch.arange(1.0, 3.0), persistent=False)

        def to_empty(self, *, device, recurse=True):
            Rotary.overridden = True
            return super().to_empty(device=device, recurse=recurse)

        def init_weights(self):
            torch.nn.init.ones_(self.proj.weight)

    with init_empty_weights():
        model = Rotary()
    assert model.proj.weight.device.type == "meta" and model.inv_freq.device.type == "cpu"
    to_empty_if_needed(model, device="cpu")
    assert model.proj.weight.device.type == "cpu" and isinstance(model.proj.weight, torch.nn.Parameter)
    assert model.inv_freq.tolist() == [1.0, 2.0] and not Rotary.overridden
    model._is_hf_initialized = True
    init_model_weights(model)
    assert model.proj.weight.eq(1).all() and model._is_hf_initialized is False
