"""The drain's TruncationWatch: a key whose log ends below the offset the
drain waits for is given up only once everything there is has been read
and the end has stayed put for the grace period."""

from workloads.drain import TruncationWatch


def test_a_log_that_ends_below_the_target_is_declared_truncated_after_the_grace():
    watch = TruncationWatch(grace_s=5)
    assert watch.see(3, position=100, end=100, target=120, now=0.0) is None
    assert watch.see(3, position=100, end=100, target=120, now=4.9) is None
    seen = watch.see(3, position=100, end=100, target=120, now=5.0)
    assert seen == {"key": 3, "end_offset": 100, "acked_offset": 120, "waited_s": 5.0}


def test_an_end_that_moves_restarts_the_grace():
    watch = TruncationWatch(grace_s=5)
    watch.see(1, position=10, end=10, target=50, now=0.0)
    assert watch.see(1, position=11, end=11, target=50, now=6.0) is None
    assert watch.see(1, position=11, end=11, target=50, now=10.9) is None
    assert watch.see(1, position=11, end=11, target=50, now=11.0)["end_offset"] == 11


def test_unread_records_or_an_end_past_the_target_are_never_truncation():
    watch = TruncationWatch(grace_s=1)
    for now in (0.0, 2.0, 4.0):
        assert watch.see(0, position=90, end=100, target=120, now=now) is None  # still reading
        assert watch.see(1, position=130, end=130, target=120, now=now) is None  # target exists
        assert watch.see(2, position=None, end=100, target=120, now=now) is None
        assert watch.see(4, position=100, end=None, target=120, now=now) is None  # no leader


def test_an_end_at_the_target_itself_is_truncation():
    """The drain waits for its position to pass the target offset, i.e. for an
    end of at least target + 1; an end equal to the target means that record is gone."""
    watch = TruncationWatch(grace_s=1)
    watch.see(0, position=120, end=120, target=120, now=0.0)
    assert watch.see(0, position=120, end=120, target=120, now=1.0)["acked_offset"] == 120
