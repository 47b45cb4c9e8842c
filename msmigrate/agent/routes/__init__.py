"""The two migration routes of MindSpeed-MM, one folder each (DESIGN: same graph, same gate slots, the plan's
``backend`` picks the route):

- ``fsdp2/``: the FSDP2 plugin route (``mindspeed_mm/fsdp/train/trainer.py``): the drafted YAML, the plugin
  templates, the rules policy's phases, gates G1–G6 (parity probes, torchrun launches);
- ``megatron/``: the Megatron route (``pretrain_vlm.py``): the plan's component matching and new-component design,
  the drafted model JSON / data JSON / launch script, the rules policy's phases, gates G1–G6, the report section.

What they share stays below them: ``agent/gates/evidence.py``, ``agent/policies`` (base, steps),
``agent/backend_route.py`` (which route a spec needs), ``tools/`` (``tools/megatron`` holds the Megatron checks and
their runtime probes). A route never imports the other route (``tests/test_layers.py``)."""
