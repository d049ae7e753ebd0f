"""Nemeses: faults as operations, recorded in the history and always healed.

schedule.py    the seeded plan (--nemesis, --nemesis-interval, --nemesis-targets)
targets.py     roles found from the cluster: leader:K, controller, coordinators, ...
partitions.py  grudges: halves, majority/minority, isolate, bridge, ring, one-way, client cuts
pause.py, kill.py, netem.py   the other faults
power.py       power cuts: kill, then lose what was never fsynced (harness/powerfs.py)
faults.py      one step -> ledger entry + fault, recorded as invoke/info of "nemesis"
ledger.py      faults in force, on disk, so a crashed run can be healed
heal.py        heal one entry; heal_leftovers(lab) after a crash
runner.py      NemesisRunner: the background schedule `gregor run` drives
options.py     add_nemesis_arguments(parser)
"""
