"""Reports: one self-contained HTML page per run, plus an index of runs."""
