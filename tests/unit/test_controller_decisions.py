"""Tables for the controller's and replica manager's pure decisions (Kafka's semantics)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from samsa.controller.decisions import (
    WAIT,
    AssignmentError,
    ElectionResult,
    FollowerState,
    acks_all_satisfied,
    assign_replicas,
    can_join_isr,
    check_enough_replicas,
    elect_for_controlled_shutdown,
    elect_for_reassignment,
    elect_leader,
    needs_preferred_election,
    new_high_watermark,
    offline_election,
    out_of_sync_replicas,
    preferred_leader,
    rack_alternated_brokers,
    reassignment_complete,
    reassignment_plan,
)
from samsa.protocol.errors import ErrorCode

# ------------------------------------------------------------------------------ elections


@pytest.mark.parametrize(
    "assignment, isr, live, unclean, expected",
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, False, (1, False)),
        ([1, 2, 3], [1, 2, 3], {2, 3}, False, (2, False)),  # first dead -> next in order
        ([1, 2, 3], [3, 2], {1, 2, 3}, False, (2, False)),  # assignment order, not ISR order
        ([1, 2, 3], [3], {1, 2, 3}, False, (3, False)),
        ([1, 2, 3], [3], {1, 2}, False, (None, False)),  # ISR all dead, clean only
        ([1, 2, 3], [3], {1, 2}, True, (1, True)),  # unclean: first live in assignment
        ([1, 2, 3], [3], {2}, True, (2, True)),
        ([1, 2, 3], [], {1, 2, 3}, False, (None, False)),  # empty ISR
        ([1, 2, 3], [], {2, 3}, True, (2, True)),
        ([1, 2, 3], [1, 2, 3], set(), False, (None, False)),  # all dead
        ([1, 2, 3], [1, 2, 3], set(), True, (None, False)),
        ([1, 2], [4, 2], {1, 2, 4}, False, (2, False)),  # ISR member outside assignment ignored
        ([1, 2], [4], {4}, True, (None, False)),  # never elects outside the assignment
        ([], [1], {1}, True, (None, False)),
    ],
)
def test_elect_leader(
    assignment: list[int], isr: list[int], live: set[int], unclean: bool,
    expected: tuple[int | None, bool],
) -> None:
    assert elect_leader(assignment, isr, live, unclean) == expected


@pytest.mark.parametrize(
    "assignment, isr, live, unclean, expected",
    [
        ([1, 2, 3], [1, 2, 3], {2, 3}, False, ElectionResult(2, [2, 3])),
        ([1, 2, 3], [3, 1, 2], {1, 3}, False, ElectionResult(1, [3, 1])),
        ([1, 2, 3], [3], {1, 2}, True, ElectionResult(1, [1], True)),
        ([1, 2, 3], [3], {1, 2}, False, ElectionResult(None, [3])),
    ],
)
def test_offline_election_isr(
    assignment: list[int], isr: list[int], live: set[int], unclean: bool,
    expected: ElectionResult,
) -> None:
    assert offline_election(assignment, isr, live, unclean) == expected


@pytest.mark.parametrize(
    "current, assignment, isr, live, preferred, needed",
    [
        (1, [1, 2, 3], [1, 2, 3], {1, 2, 3}, 1, False),  # already the preferred leader
        (2, [1, 2, 3], [1, 2, 3], {1, 2, 3}, 1, True),
        (2, [1, 2, 3], [2, 3], {1, 2, 3}, None, False),  # preferred not in ISR yet
        (2, [1, 2, 3], [1, 2, 3], {2, 3}, None, False),  # preferred dead
        (None, [1, 2, 3], [1], {1}, 1, True),  # offline partition whose preferred is back
        (5, [1, 2, 3], [1, 2, 3], {1, 2, 3}, 1, True),  # leader not in assignment
        (None, [], [], set(), None, False),
    ],
)
def test_preferred_leader(
    current: int | None, assignment: list[int], isr: list[int], live: set[int],
    preferred: int | None, needed: bool,
) -> None:
    assert preferred_leader(assignment, isr, live) == preferred
    assert needs_preferred_election(current, assignment, isr, live) is needed


@pytest.mark.parametrize(
    "assignment, isr, live, shutting_down, expected",
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}, 2),
        ([1, 2, 3], [1, 3], {1, 2, 3}, {1}, 3),  # 2 is not in the ISR
        ([1, 2, 3], [1], {1, 2, 3}, {1}, None),  # nobody else in sync: never unclean
        ([1, 2, 3], [1, 2, 3], {1, 3}, {1}, 3),  # 2 dead
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 2}, 3),  # two brokers shutting down
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, set(), 1),
        ([1, 2, 3], [], {1, 2, 3}, {1}, None),
    ],
)
def test_elect_for_controlled_shutdown(
    assignment: list[int], isr: list[int], live: set[int], shutting_down: set[int],
    expected: int | None,
) -> None:
    assert elect_for_controlled_shutdown(assignment, isr, live, shutting_down) == expected


@pytest.mark.parametrize(
    "target, isr, live, expected",
    [
        ([4, 5, 6], [1, 2, 4, 5, 6], {1, 2, 4, 5, 6}, 4),
        ([4, 5, 6], [1, 2, 5, 6], {1, 2, 4, 5, 6}, 5),
        ([4, 5, 6], [1, 2, 4, 5, 6], {1, 2, 5}, 5),
        ([4, 5, 6], [1, 2], {1, 2, 4, 5, 6}, None),
    ],
)
def test_elect_for_reassignment(
    target: list[int], isr: list[int], live: set[int], expected: int | None
) -> None:
    assert elect_for_reassignment(target, isr, live) == expected


# ------------------------------------------------------------------------------------ ISR

LAG = 30_000


@pytest.mark.parametrize(
    "isr, state, leader_leo, now, expected",
    [
        # caught up to the leader's LEO: in sync however long ago it last "caught up"
        ([1, 2], {2: FollowerState(100, 0)}, 100, 1_000_000, set()),
        # behind, but caught up within the lag time
        ([1, 2], {2: FollowerState(90, 980_000)}, 100, 1_000_000, set()),
        # behind for exactly the lag time: still in sync (strictly greater drops it)
        ([1, 2], {2: FollowerState(90, 970_000)}, 100, 1_000_000, set()),
        ([1, 2], {2: FollowerState(90, 969_999)}, 100, 1_000_000, {2}),
        # two followers, one stuck
        ([1, 2, 3], {2: FollowerState(100, 0), 3: FollowerState(5, 0)}, 100, LAG + 1, {3}),
        # no state for an ISR follower: out of sync
        ([1, 2, 3], {2: FollowerState(100, 0)}, 100, 0, {3}),
        # the leader itself is never out of sync, even with stale or no state
        ([1], {}, 100, 10**9, set()),
        ([1, 2], {1: FollowerState(0, 0), 2: FollowerState(100, 0)}, 100, 10**9, set()),
        ([], {}, 100, 0, set()),
    ],
)
def test_out_of_sync_replicas(
    isr: list[int], state: dict[int, FollowerState], leader_leo: int, now: int,
    expected: set[int],
) -> None:
    assert out_of_sync_replicas(1, isr, state, leader_leo, now, LAG) == expected


@pytest.mark.parametrize(
    "follower_leo, hw, epoch_start, expected",
    [
        (100, 100, 50, True),
        (120, 100, 50, True),
        (99, 100, 50, False),  # below the HW
        (100, 100, 101, False),  # has nothing of this leader's epoch yet
        (101, 100, 101, True),
        (0, 0, 0, True),  # empty log, fresh leader
        (100, 100, None, False),  # epoch start unknown
    ],
)
def test_can_join_isr(follower_leo: int, hw: int, epoch_start: int | None, expected: bool) -> None:
    assert can_join_isr(follower_leo, hw, epoch_start) is expected


@pytest.mark.parametrize(
    "current_hw, leader_leo, isr, follower_leo, expected",
    [
        (0, 10, [1], {}, 10),  # leader alone: HW = its LEO
        (0, 10, [1, 2, 3], {2: 7, 3: 9}, 7),
        (0, 10, [1, 2, 3], {2: 10, 3: 10}, 10),
        (5, 10, [1, 2], {2: 3}, 5),  # never backwards
        (5, 10, [1, 2], {2: 5}, 5),
        (8, 4, [1], {}, 8),  # leader LEO below HW (after truncation race): HW stays
        (0, 10, [1, 2], {2: 12}, 10),  # a follower cannot be ahead of the leader's min
        (0, 10, [1, 2, 3], {2: 9}, 0),  # ISR follower 3 unknown: hold the HW
        (4, 10, [1, 2, 3], {2: 9}, 4),
        (0, 10, [1, 2], {2: 6, 4: 1}, 6),  # non-ISR followers do not count
        (0, 10, [2], {2: 6}, 6),  # leader's own id absent from the ISR list: still counted
        (0, 10, [], {}, 10),
    ],
)
def test_new_high_watermark(
    current_hw: int, leader_leo: int, isr: list[int], follower_leo: dict[int, int],
    expected: int,
) -> None:
    assert new_high_watermark(current_hw, leader_leo, isr, follower_leo, leader=1) == expected


def test_new_high_watermark_never_decreases_over_a_sequence() -> None:
    rng = random.Random(7)
    hw = 0
    for _ in range(500):
        leader_leo = rng.randrange(0, 1000)
        followers = {2: rng.randrange(0, 1000), 3: rng.randrange(0, 1000)}
        new = new_high_watermark(hw, leader_leo, [1, 2, 3], followers, leader=1)
        assert new >= hw
        assert new == hw or new == min(leader_leo, *followers.values())
        hw = new


# ------------------------------------------------------------------------------ acks=all


@pytest.mark.parametrize(
    "acks, isr_size, min_isr, expected",
    [
        (-1, 1, 2, ErrorCode.NOT_ENOUGH_REPLICAS),
        (-1, 2, 2, None),
        (-1, 3, 2, None),
        (-1, 0, 1, ErrorCode.NOT_ENOUGH_REPLICAS),
        (1, 1, 2, None),  # acks=1 is never refused for a small ISR
        (0, 1, 3, None),
    ],
)
def test_check_enough_replicas(
    acks: int, isr_size: int, min_isr: int, expected: ErrorCode | None
) -> None:
    assert check_enough_replicas(acks, isr_size, min_isr) == expected


@pytest.mark.parametrize(
    "required, hw, isr_size, min_isr, expected",
    [
        (10, 9, 3, 2, WAIT),
        (10, 9, 1, 2, WAIT),  # not there yet: wait, even with a small ISR
        (10, 10, 3, 2, None),
        (10, 15, 2, 2, None),
        (10, 10, 1, 2, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),  # ISR shrank while waiting
        (10, 10, 1, 1, None),
    ],
)
def test_acks_all_satisfied(
    required: int, hw: int, isr_size: int, min_isr: int, expected: object
) -> None:
    assert acks_all_satisfied(required, hw, isr_size, min_isr) == expected


# ---------------------------------------------------------------------- replica assignment

DOC_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
RACKS_6 = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


@pytest.mark.parametrize(
    "racks, expected",
    [
        (DOC_RACKS, [0, 3, 1, 5, 4, 2]),  # AdminUtils doc comment
        ({b: r for b, r in DOC_RACKS.items() if b != 5}, [0, 3, 1, 4, 2]),
        ({0: "rack1", 1: "rack1", 2: "rack1", 3: "rack2", 4: "rack2", 5: "rack2",
          6: "rack3", 7: "rack3", 8: "rack3"}, [0, 3, 6, 1, 4, 7, 2, 5, 8]),
        ({}, []),
    ],
)
def test_rack_alternated_brokers(racks: dict[int, str], expected: list[int]) -> None:
    assert rack_alternated_brokers(racks) == expected


def test_rack_aware_doc_example() -> None:
    # AdminUtils' doc comment: 6 brokers on 3 racks, 7 partitions, RF 3, start 0.
    assert assign_replicas(DOC_RACKS, 7, 3, 0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
        6: [0, 4, 2],  # second round: followers shifted, not [0, 3, 1] again
    }


def test_rack_unaware_doc_example() -> None:
    # AdminUtils' doc table and Kafka's testReplicaAssignment: 5 brokers, 10 partitions, RF 3.
    assert assign_replicas({b: None for b in range(5)}, 10, 3, 0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }


def test_brokers_sorted_by_id_and_start_and_shift_apart() -> None:
    brokers = {30: None, 10: None, 20: None}
    assert assign_replicas(brokers, 3, 2, 0, 0) == {0: [10, 20], 1: [20, 30], 2: [30, 10]}
    assert assign_replicas(brokers, 3, 2, 1, 0) == {0: [20, 30], 1: [30, 10], 2: [10, 20]}
    assert assign_replicas(brokers, 3, 2, 0, 1) == {0: [10, 30], 1: [20, 10], 2: [30, 20]}


def _check_distribution(
    assignment: dict[int, list[int]], racks: dict[int, str], rf: int, *,
    leaders_even: bool = True, replicas_even: bool = True, rack_aware: bool = True,
) -> None:
    """Kafka's checkReplicaDistribution: distinct brokers per partition; each partition on
    min(rf, racks) racks; optionally even leader and replica counts over brokers."""
    num_racks = len(set(racks.values()))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        if rack_aware:
            assert len({racks[b] for b in replicas}) == min(rf, num_racks)
    n = len(racks)
    if leaders_even:
        leaders = Counter(r[0] for r in assignment.values())
        assert sorted(leaders[b] for b in racks) == [len(assignment) // n] * n
    if replicas_even:
        counts = Counter(b for r in assignment.values() for b in r)
        assert sorted(counts[b] for b in racks) == [len(assignment) * rf // n] * n


@pytest.mark.parametrize(
    "racks, partitions, rf, start, kwargs",
    [
        (RACKS_6, 6, 3, 2, {}),
        (RACKS_6, 6, 3, None, {}),
        (RACKS_6, 13, 3, 0, {"leaders_even": False, "replicas_even": False}),
        ({0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 3, None,
         {"replicas_even": False}),
        (RACKS_6, 12, 2, None, {}),
        (RACKS_6, 6, 2, None, {}),
        ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, None, {}),
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1", 6: "rack1",
          7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}, 96, 3, None, {}),
        ({0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}, 6, 4, 2,
         {"leaders_even": False, "replicas_even": False, "rack_aware": False}),
    ],
)
def test_rack_aware_distribution(
    racks: dict[int, str], partitions: int, rf: int, start: int | None, kwargs: dict[str, bool]
) -> None:
    for seed in range(5):  # several random starts when start is None
        assignment = assign_replicas(racks, partitions, rf, start, rng=random.Random(seed))
        assert sorted(assignment) == list(range(partitions))
        _check_distribution(assignment, racks, rf, **kwargs)


def test_rack_aware_expansion_numbers_new_partitions() -> None:
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assignment = assign_replicas(racks, 12, 2, start_partition_id=12, rng=random.Random(1))
    assert sorted(assignment) == list(range(12, 24))
    _check_distribution(assignment, racks, 2)


@pytest.mark.parametrize(
    "racks, rf, racks_per_partition",
    [
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}, 5, 3),
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}, 2, 2),
        ({b: "rack1" for b in range(6)}, 3, 1),
    ],
)
def test_more_or_fewer_replicas_than_racks(
    racks: dict[int, str], rf: int, racks_per_partition: int
) -> None:
    assignment = assign_replicas(racks, 6, rf, rng=random.Random(3))
    for replicas in assignment.values():
        assert len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == racks_per_partition


def test_single_rack_spreads_leaders() -> None:
    racks = {b: "rack1" for b in range(6)}
    assignment = assign_replicas(racks, 6, 3, rng=random.Random(0))
    assert Counter(r[0] for r in assignment.values()) == Counter(range(6))


def test_random_start_is_used_when_not_given() -> None:
    brokers = {b: None for b in range(5)}
    starts = {assign_replicas(brokers, 1, 1, rng=random.Random(s))[0][0] for s in range(50)}
    assert len(starts) > 1
    assert assign_replicas(brokers, 5, 3)  # default RNG works


@pytest.mark.parametrize(
    "brokers, partitions, rf, code, message",
    [
        ({0: None, 1: None}, 1, 3, ErrorCode.INVALID_REPLICATION_FACTOR, "larger than available"),
        ({}, 1, 1, ErrorCode.INVALID_REPLICATION_FACTOR, "larger than available"),
        ({0: None}, 1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "larger than 0"),
        ({0: None}, 0, 1, ErrorCode.INVALID_PARTITIONS, "partitions"),
        ({0: "r1", 1: None, 2: "r2"}, 3, 2, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "Not all brokers have rack information"),
    ],
)
def test_assign_replicas_errors(
    brokers: dict[int, str | None], partitions: int, rf: int, code: ErrorCode, message: str
) -> None:
    with pytest.raises(AssignmentError, match=message) as info:
        assign_replicas(brokers, partitions, rf, 0)
    assert isinstance(info.value, ValueError)
    assert info.value.error_code == code


# ---------------------------------------------------------------------------- reassignment


@pytest.mark.parametrize(
    "current, target, replicas, adding, removing",
    [
        ([1, 2, 3], [4, 5, 6], [4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3]),
        ([1, 2, 3], [1, 2, 4], [1, 2, 4, 3], [4], [3]),
        ([1, 2, 3], [3, 2, 1], [3, 2, 1], [], []),  # reorder only
        ([1, 2, 3], [1, 2, 3], [1, 2, 3], [], []),
        ([1, 2], [1, 2, 3], [1, 2, 3], [3], []),  # raise RF
        ([1, 2, 3], [2], [2, 1, 3], [], [1, 3]),  # lower RF
    ],
)
def test_reassignment_plan(
    current: list[int], target: list[int], replicas: list[int], adding: list[int],
    removing: list[int],
) -> None:
    plan = reassignment_plan(current, target)
    assert (plan.replicas, plan.adding, plan.removing) == (replicas, adding, removing)
    assert plan.no_op is (current == target)


@pytest.mark.parametrize("target", [[], [1, 1, 2]])
def test_reassignment_plan_rejects_bad_targets(target: list[int]) -> None:
    with pytest.raises(AssignmentError) as info:
        reassignment_plan([1, 2], target)
    assert info.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


@pytest.mark.parametrize(
    "target, isr, expected",
    [([4, 5], [1, 2, 4, 5], True), ([4, 5], [1, 2, 4], False), ([4], [4], True)],
)
def test_reassignment_complete(target: list[int], isr: list[int], expected: bool) -> None:
    assert reassignment_complete(target, isr) is expected
