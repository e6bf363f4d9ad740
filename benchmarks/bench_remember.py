"""Superseded by ``memevict bench`` (loader/memevict/bench/), which this runs."""

import sys

from memevict.cli import main

if __name__ == "__main__":  # the bench's worker processes import this file again
    main(["bench", *sys.argv[1:]], prog_name="memevict")
