"""Properties of the whole check on simulated Kafka histories.

In one batch:
1. A valid history (concurrent clients, idempotent sends, transactions that
   commit or abort, info outcomes, assign and subscribe with rebalances, a
   complete drain) gets no anomaly at all and the verdict `valid`.
2. One planted mutation (a lost read, a duplicate offset, an aborted read,
   a poll that goes back, a poll out of order, a poll that skips) is
   reported under its name, on its key and value, as bad (poll order is
   permitted when the run subscribes).

Spark jobs cost seconds each, so each Hypothesis example is a batch of
independent simulated runs on disjoint keys and processes, checked in one
Spark pass; a failure names the seed and parameters of the run at fault.
"""

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import simkafka  # noqa: E402

from checkers.check import check_dir  # noqa: E402

pytestmark = pytest.mark.spark

RUN = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 2**32 - 1),
        "ops": st.integers(5, 40),
        "keys": st.integers(1, 3),
        "concurrency": st.integers(1, 4),
        "max_poll": st.integers(1, 4),
    }
)

# Each example is one Spark check of a batch of ~10-20 runs (a minute or more
# here); GREGOR_PROPERTY_EXAMPLES=20 for a deeper search than CI can afford.
SETTINGS = settings(
    max_examples=int(os.environ.get("GREGOR_PROPERTY_EXAMPLES", "1")),
    deadline=None,
    derandomize=False,
    suppress_health_check=list(HealthCheck),
)


def _check(tmp_path, sims, subscribe, spark):
    events, keys, offsets = simkafka.combine(sims)
    run = simkafka.write(tmp_path, events, simkafka.combined_test_json(keys, subscribe))
    return check_dir(run, spark, max_examples=100_000, progress=lambda *_: None), offsets


@SETTINGS
@given(
    valid_runs=st.lists(RUN, min_size=4, max_size=8),
    mutated_runs=st.lists(RUN, min_size=len(simkafka.MUTATIONS), max_size=len(simkafka.MUTATIONS) + 3),
    subscribe=st.booleans(),
    data=st.data(),
)
def test_valid_runs_stay_silent_and_each_planted_anomaly_is_found(
    spark, tmp_path_factory, valid_runs, mutated_runs, subscribe, data
):
    sims = [simkafka.simulate(**run, subscribe=subscribe) for run in valid_runs]
    names = list(simkafka.MUTATIONS)
    planted = []
    for number, run in enumerate(mutated_runs):
        mutation = names[number % len(names)]
        # The history must offer a place for the mutation: reseed until it does.
        for attempt in range(50):
            sim = simkafka.simulate(
                **dict(run, seed=run["seed"] + attempt, ops=max(run["ops"], 20)), subscribe=subscribe, abort_one=True
            )
            key = data.draw(st.integers(0, sim.keys - 1), label="key") if attempt == 0 else 0
            expected = simkafka.MUTATIONS[mutation](sim, key)
            if expected is not None:
                break
        assert expected is not None, f"{mutation}: no history offered a place for it"
        planted.append((len(sims), mutation, run["seed"] + attempt, expected))
        sims.append(sim)
    results, offsets = _check(tmp_path_factory.mktemp("run"), sims, subscribe, spark)
    anomalies = results["anomalies"]
    width = max(s.keys for s in sims)

    # 1. No anomaly at all on the keys of the valid runs.
    valid_keys = {offsets[i] + k for i in range(len(valid_runs)) for k in range(width)}
    false_alarms = {
        name: sorted({e.get("key") for e in entry["examples"]} & valid_keys) for name, entry in anomalies.items()
    }
    false_alarms = {name: keys for name, keys in false_alarms.items() if keys}
    assert not false_alarms, (
        f"false alarms {false_alarms} in valid runs with seeds "
        f"{[r['seed'] for r in valid_runs]} (subscribe={subscribe})"
    )

    # 2. Every planted anomaly under its name, key and value.
    for number, mutation, seed, (name, key, value) in planted:
        key += offsets[number]
        where = f"{mutation} (seed {seed}, subscribe={subscribe}) should give {name} on key {key}"
        assert name in anomalies, f"{where}; found only {sorted(anomalies)}"
        # Poll-order anomalies are permitted when a group subscribes.
        permitted = subscribe and name in ("nonmonotonic-poll", "poll-skip")
        assert anomalies[name]["allowed"] is permitted, where
        matches = [
            e
            for e in anomalies[name]["examples"]
            if e.get("key") == key and (value is None or e.get("value") == value or value in (e.get("values") or []))
        ]
        assert matches, f"{where}, value {value}; examples: {anomalies[name]['examples']}"
    assert results["verdict"] == "invalid"
