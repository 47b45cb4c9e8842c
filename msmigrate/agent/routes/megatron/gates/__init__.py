"""The Megatron route's gates per slot G1–G6 (the plan's backend picks this table: backend_route.route_gates)."""

from msmigrate.agent.routes.megatron.gates.config_gate import gate_megatron_config
from msmigrate.agent.routes.megatron.gates.data_gate import gate_megatron_data
from msmigrate.agent.routes.megatron.gates.slots import (gate_megatron_distributed, gate_megatron_functional,
                                                         gate_megatron_model, gate_megatron_reliability)

GATES = {"G1": gate_megatron_model, "G2": gate_megatron_data, "G3": gate_megatron_config,
         "G4": gate_megatron_functional, "G5": gate_megatron_reliability, "G6": gate_megatron_distributed}
