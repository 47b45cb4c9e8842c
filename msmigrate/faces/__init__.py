"""The top floor: the ways a person drives the agent. ``cli`` (the one module that registers every command),
``chat``, ``batch``, ``eval`` (the eval harness and its suites), ``demo``, and ``run_hook`` (the faces' test hook).
Nothing below imports from here."""
