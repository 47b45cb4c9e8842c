"""Gates are code (DESIGN decision 2): each returns a record that passes only on evidence it collected itself.

What both routes' gates share lives here (``evidence``: one evidence item). The gates themselves live with their
route: ``agent/routes/fsdp2/gates`` (the plugin route) and ``agent/routes/megatron/gates`` (the Megatron route), each
with its table of slots G1–G6; G0 runs inside the prepare node. The plan's backend picks the table
(``agent/backend_route.route_gates``)."""
