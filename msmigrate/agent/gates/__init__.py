"""Gates are code (DESIGN decision 2): each returns a record that passes only on evidence it collected itself.
G0 runs inside the prepare node; G1–G6 are looked up here."""

from msmigrate.agent.gates.config_gate import gate_config
from msmigrate.agent.gates.data_gate import gate_data
from msmigrate.agent.gates.megatron_config_gate import gate_megatron_config
from msmigrate.agent.gates.megatron_data_gate import gate_megatron_data
from msmigrate.agent.gates.megatron_slots import (gate_megatron_distributed, gate_megatron_functional,
                                                  gate_megatron_model, gate_megatron_reliability)
from msmigrate.agent.gates.model_gate import gate_model
from msmigrate.agent.gates.training import gate_distributed, gate_functional, gate_reliability

GATES = {"G1": gate_model, "G2": gate_data, "G3": gate_config, "G4": gate_functional, "G5": gate_reliability,
         "G6": gate_distributed}
# The Megatron route's gates per slot (the plan's backend picks the table: agent/backend_route.route_gates)
MEGATRON_GATES = {"G1": gate_megatron_model, "G2": gate_megatron_data, "G3": gate_megatron_config,
                  "G4": gate_megatron_functional, "G5": gate_megatron_reliability, "G6": gate_megatron_distributed}
