"""Test beds: the stand-in MindSpeed-MM target (``standin``) and the known-model source fixtures (``fixtures``).
Tests, the demo and the eval harness build on them; they import nothing of the agent, its tools or its faces."""
