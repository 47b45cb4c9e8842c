"""A rank ended by SIGKILL is named from torchrun's failure table (recorded from a real-scale internvl's 2-rank
training parity on this host, where the kernel's out-of-memory killer ended rank 0 and torchrun then SIGTERMed
rank 1); a rank that failed otherwise is not."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "msmigrate" / "tools" / "probes"))
from _ranks import killed_by_sigkill  # noqa: E402

TABLE = """Failures:
[1]:
  time      : 2026-12-06_18:18:14
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 26987)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 26987
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-06_18:18:11
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -9 (pid: 26986)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 26986
"""


def test_the_rank_the_oom_killer_ended_is_named():
    assert killed_by_sigkill(TABLE) == [0]


def test_a_rank_that_raised_is_not_called_killed():
    assert killed_by_sigkill(TABLE.replace("exitcode  : -9", "exitcode  : 1")) == []
