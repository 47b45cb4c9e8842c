"""The eval harness: tasks (suite.py), hard scorers and soft measures (scorers.py), trials (runner.py), pass@k and
the leaderboard (leaderboard.py). ``msmigrate eval SUITE --policy rules|llm|replay --trials K``."""
