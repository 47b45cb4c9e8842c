"""``msmigrate batch``: many migrations, agent slots and accelerator launch slots limited separately.

Gates that launch training acquire a launch slot first::

    from msmigrate.agent.batch import launch_slots
    with launch_slots():
        run the launch

Outside a batch (no ``MSMIGRATE_LAUNCH_SLOTS_DIR`` in the environment) it is a no-op."""

from msmigrate.agent.batch.slots import launch_slots

__all__ = ["launch_slots"]
