"""``memevict simulate``: replay an agent transcript longer than the window
through FIFO, LRU and memevict on one server, and report what each kept and
which of the transcript's questions its window could answer.

  transcript  the events and questions of a transcript, and the reader of a JSONL log
  labels      a labeler's importance for the turns a transcript leaves unlabelled
  generator   the built-in seeded workload (one session)
  sessions    the built-in multi-session conversation, with questions
  policies    FIFO, LRU and memevict runners, the --grid policies, hindsight's windows
  replay      the replay of each policy and what is measured
  report      the summary table and the JSON, of one transcript or several
  plot        retention over turns, per policy (matplotlib)
"""

from memevict.simulate.generator import generate
from memevict.simulate.labels import alabel_transcript, label_transcript
from memevict.simulate.policies import memevict_policies
from memevict.simulate.replay import Answer, Answers, Outcome, Simulation, hindsight, simulate
from memevict.simulate.transcript import BadTranscript, Question, Transcript, read_jsonl

__all__ = [
    "Answer",
    "Answers",
    "BadTranscript",
    "Outcome",
    "Question",
    "Simulation",
    "Transcript",
    "alabel_transcript",
    "generate",
    "hindsight",
    "label_transcript",
    "memevict_policies",
    "read_jsonl",
    "simulate",
]
