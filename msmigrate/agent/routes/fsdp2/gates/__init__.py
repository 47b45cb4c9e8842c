"""The FSDP2 plugin route's gates G1–G6 (G0 runs inside the prepare node)."""

from msmigrate.agent.routes.fsdp2.gates.config_gate import gate_config
from msmigrate.agent.routes.fsdp2.gates.data_gate import gate_data
from msmigrate.agent.routes.fsdp2.gates.model_gate import gate_model
from msmigrate.agent.routes.fsdp2.gates.training import gate_distributed, gate_functional, gate_reliability

GATES = {"G1": gate_model, "G2": gate_data, "G3": gate_config, "G4": gate_functional, "G5": gate_reliability,
         "G6": gate_distributed}
