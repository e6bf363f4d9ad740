"""``memevict simulate``: replay an agent transcript longer than the window
through FIFO, LRU and memevict on one server, and report what each kept.

  transcript  the events of a transcript, and the reader of a JSONL log
  generator   the built-in seeded workload
  policies    FIFO, LRU and memevict runners, and the --grid policies
  replay      the replay of each policy and what is measured
  report      the summary table and the JSON
  plot        retention over turns, per policy (matplotlib)
"""

from memevict.simulate.generator import generate
from memevict.simulate.policies import memevict_policies
from memevict.simulate.replay import Outcome, Simulation, simulate
from memevict.simulate.transcript import BadTranscript, Transcript, read_jsonl

__all__ = [
    "BadTranscript",
    "Outcome",
    "Simulation",
    "Transcript",
    "generate",
    "memevict_policies",
    "read_jsonl",
    "simulate",
]
