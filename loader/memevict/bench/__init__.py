"""``memevict bench``: memevict side by side with its peers, in one run, on one server.

Peers: raw ZADD (the floor for a write), the seed article's client-side
functions (memevict.seed), a do-nothing script with remember's KEYS and ARGV,
a floor script making only the commands an evicting remember needs, a
MemoryStore call of a fixed-reply script, and memevict (peers.py). Every
target of the performance issues is a ratio measured within the run, over
interleaved rounds (see timing.py); the modules hold one measurement each:

  footprint   T5  server memory per memory vs a sorted-set member
  single      T1, P1, P2, P3  remember() on a full store, one client, in the
              default mode and in each; T6, P4 remember_many
  concurrent  T1, P3  the same from many client processes
  sizes       T2, T3 and the plot: decay, evict and remember against store size
  blocking    T4  how long any script call blocks the server at the largest size
  budget      T7  an evicting remember() with token budgets and groups vs without
  window      T8  window() at many hot memories, with and without a token budget
"""

from memevict.bench.report import Results, table, to_json
from memevict.bench.suite import BenchConfig, run_bench

__all__ = ["BenchConfig", "Results", "run_bench", "table", "to_json"]
