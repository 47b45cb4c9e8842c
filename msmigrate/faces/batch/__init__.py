"""``msmigrate batch``: many migrations, agent slots and accelerator launch slots limited separately.

The launch slots themselves live below the faces, in ``msmigrate.agent.launch_slots``, because the training gate
acquires one before each launch; outside a batch (no ``MSMIGRATE_LAUNCH_SLOTS_DIR`` in the environment) that is a
no-op."""
