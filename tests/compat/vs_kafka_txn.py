"""Idempotence and transaction cases of the differential test against Apache Kafka
(test_vs_kafka.py).

Each sends over raw frames what an idempotent or transactional producer, or an admin client,
sends. Versions: those a current Java client sends to brokers that finalize transaction.version
2, as both do: InitProducerId v5, EndTxn v5 (it bumps the epoch), TxnOffsetCommit v5, Produce v12
(a transactional batch adds its partition to the transaction, KIP-890 part 2);
DescribeTransactions, DescribeProducers v0 and ListTransactions v1. Where the client uses the
transaction version 1 requests (AddPartitionsToTxn v3, the last a client sends; AddOffsetsToTxn
v4; EndTxn v4; Produce v11), the case says so. Produce v12 and ListTransactions v1 are the
highest Samsa serves; Kafka 4.4 also serves Produce v13 (topic ids) and ListTransactions v2
(KIP-1152's transactional id pattern).

Producer ids are reduced to "the same as before" / "a new one", epochs to their difference from
the first: both are the broker's to choose.
"""

from __future__ import annotations

import time
from typing import Any

from samsa.protocol.records import build_batch
from samsa.protocol.schema import Msg
from tests.compat.vs_kafka import COORDINATOR_NOT_READY, CaseSet, client, coordinator, name, produce, topic
from tests.rawclient import RawClient

case = CaseSet()


def init_pid(c: RawClient, tid: str | None, pid: int = -1, epoch: int = -1, timeout: int = 60000) -> Msg:
    """InitProducerId v5, retried while the broker is not ready to answer (Kafka answers
    COORDINATOR_LOAD_IN_PROGRESS until its first block of producer ids has come from the
    controller)."""
    if tid is not None:
        coordinator(c, tid, 1)
    deadline = time.monotonic() + 30
    while True:
        r = c.request(22, 5, {"transactional_id": tid, "transaction_timeout": timeout, "producer_id": pid,
                              "producer_epoch": epoch})
        if r.error_code not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
            return r
        time.sleep(0.05)  # (a retriable error: what a client does)


def txn_produce(c: RawClient, topic: str, records: bytes, tid: str, version: int = 12, partition: int = 0) -> Any:
    """Produce of a transactional batch, retried on NOT_LEADER_OR_FOLLOWER, which Kafka sometimes
    answers for a while to a batch its leader must verify with the transaction coordinator
    (retriable: a client retries it)."""
    deadline = time.monotonic() + 30
    while True:
        r = produce(c, topic, records, version=version, transactional_id=tid, partition=partition)
        if r.error_code != NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


NOT_LEADER_OR_FOLLOWER = 6


def records(pid: int, epoch: int, seq: int, count: int = 1, transactional: bool = False) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(None, b"v%d" % i, [], now) for i in range(count)], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, transactional=transactional)


def add_partitions(c: RawClient, tid: str, pid: int, epoch: int, partitions: dict[str, list[int]],
                   version: int = 3) -> dict[str, int]:
    """AddPartitionsToTxn (v3 and below: one transaction): {"topic-partition": error}."""
    resp = c.request(24, version, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                                   "v3_and_below_producer_epoch": epoch,
                                   "v3_and_below_topics": [{"name": t, "partitions": ps}
                                                           for t, ps in partitions.items()]})
    return dict(sorted((f"{_LABELS.get(t.name, t.name)}-{p.partition_index}", int(p.partition_error_code))
                       for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition))


def end_txn(c: RawClient, tid: str, pid: int, epoch: int, commit: bool, version: int = 5) -> Msg:
    return c.request(26, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                   "committed": commit})


def describe_txn(c: RawClient, tid: str) -> Msg:
    """DescribeTransactions v0 of one transactional id."""
    (s,) = c.request(65, 0, {"transactional_ids": [tid]}).transaction_states
    return s


def settled(c: RawClient, tid: str) -> Msg:
    """DescribeTransactions until the transaction is no longer Prepare*: its markers written."""
    deadline = time.monotonic() + 30
    while (s := describe_txn(c, tid)).transaction_state.startswith("Prepare"):
        assert time.monotonic() < deadline, s
        time.sleep(0.02)  # markers are written in the background: nothing a client can await
    return s


# topic names in results: each case's own random names, replaced by what they are
_LABELS: dict[str, str] = {}


def _label(t: str, label: str) -> str:
    _LABELS[t] = label
    return t


# --------------------------------------------------------------------------- producer ids


@case("InitProducerId v5: without a transactional id, with one, again (the epoch bumped), with the current id and "
      "epoch (KIP-360), with an old epoch, with another producer id, a timeout over transaction.max.timeout.ms")
def case_init_producer_id(b: str) -> dict[str, Any]:
    with client(b) as c:
        tid = name()
        idem = init_pid(c, None)
        first = init_pid(c, tid)
        pid, epoch = first.producer_id, first.producer_epoch

        def rel(r: Msg) -> tuple[int, str, int]:
            who = "same" if r.producer_id == pid else "none" if r.producer_id < 0 else "new"
            return int(r.error_code), who, r.producer_epoch - epoch if r.producer_id >= 0 else r.producer_epoch
        out: dict[str, Any] = {"idempotent: (error, id given, epoch)": (int(idem.error_code), idem.producer_id >= 0,
                                                                        idem.producer_epoch),
                               "transactional: (error, epoch)": (int(first.error_code), epoch)}
        out["again: (error, producer id, epoch - first)"] = rel(again := init_pid(c, tid))
        out["with the current id and epoch"] = rel(bumped := init_pid(c, tid, pid, again.producer_epoch))
        out["with an old epoch"] = rel(init_pid(c, tid, pid, epoch))
        out["with another producer id"] = rel(init_pid(c, tid, pid + 1000, bumped.producer_epoch))
        out["timeout 900001 ms"] = rel(init_pid(c, name(), timeout=900001))
        out["idempotent, with its id and epoch: (error, the same id, epoch)"] = (
            lambda r: (int(r.error_code), r.producer_id == idem.producer_id, r.producer_epoch))(
            init_pid(c, None, idem.producer_id, idem.producer_epoch))
        return out


# --------------------------------------------------------------------------- idempotent produce


@case("Idempotent Produce v12: sequences 0, 3 (in order), 7 (a gap), 3 again (the last batch), 0 again (an "
      "earlier one), the next epoch from 0 and from 5, an old epoch, a producer id the partition has never seen")
def case_idempotent_produce(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = topic(c)
        r = init_pid(c, None)
        pid, epoch = r.producer_id, r.producer_epoch

        def send(seq: int, count: int = 3, e: int = epoch, p: int = pid) -> tuple[int, int]:
            ans = produce(c, t, records(p, e, seq, count), version=12)
            return int(ans.error_code), int(ans.base_offset)
        return {"seq 0": send(0), "seq 3": send(3), "seq 7": send(7), "seq 3 again": send(3),
                "seq 0 again": send(0), "seq 6": send(6), "epoch + 1, seq 5": send(5, e=epoch + 1),
                "epoch + 1, seq 0": send(0, e=epoch + 1), "old epoch, seq 9": send(9), "unknown producer, seq 4":
                    send(4, p=pid + 1000), "unknown producer, seq 0": send(0, p=pid + 1001)}


# --------------------------------------------------------------------------- transactions


@case("AddPartitionsToTxn v3 (as a client using transaction version 1 sends): with the current epoch, an old one "
      "(fenced), v1 with the old one, a newer one, an unknown producer id, an unknown transactional id, an unknown "
      "topic beside a known one")
def case_add_partitions(b: str) -> dict[str, Any]:
    with client(b) as c:
        t, unknown = _label(topic(c, 2), "t"), _label(name(), "unknown")
        tid = name()
        first = init_pid(c, tid)
        r = init_pid(c, tid)
        pid, epoch = r.producer_id, r.producer_epoch
        return {"epoch - 1": add_partitions(c, tid, pid, first.producer_epoch, {t: [0]}),
                "v1, epoch - 1": add_partitions(c, tid, pid, first.producer_epoch, {t: [0]}, version=1),
                "epoch + 1": add_partitions(c, tid, pid, epoch + 1, {t: [0]}),
                "unknown producer id": add_partitions(c, tid, pid + 1000, epoch, {t: [0]}),
                "unknown transactional id": add_partitions(c, name(), pid, epoch, {t: [0]}),
                "unknown topic beside a known one": add_partitions(c, tid, pid, epoch, {t: [0], unknown: [0]}),
                "current epoch": add_partitions(c, tid, pid, epoch, {t: [0, 1]}),
                "state": describe_txn(c, tid).transaction_state}


@case("EndTxn with no transaction begun: v4 and v5, commit and abort (v5 may abort: a client using transaction "
      "version 2 cannot know whether a Produce began one); retries and other epochs after it; a committed "
      "transaction then ended again")
def case_end_txn(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = topic(c)
        tid = name()
        r = init_pid(c, tid)
        pid, epoch = r.producer_id, r.producer_epoch

        def v5(e: int, commit: bool) -> tuple[int, int | None]:
            """(error, epoch answered - the first)"""
            r = end_txn(c, tid, pid, e, commit)
            return int(r.error_code), (r.producer_epoch - epoch if r.producer_id == pid else None)

        def v4(e: int, commit: bool) -> int:
            return int(end_txn(c, tid, pid, e, commit, 4).error_code)

        def state() -> tuple[str, int, bool]:
            s = settled(c, tid)
            return s.transaction_state, s.producer_epoch - epoch, s.transaction_start_time > 0
        out: dict[str, Any] = {"v4 commit, none begun": v4(epoch, True), "v4 abort, none begun": v4(epoch, False),
                               "v5 commit, none begun": v5(epoch, True), "v5 abort, none begun": v5(epoch, False),
                               "then: (state, epoch - first, start time set)": state()}
        e1 = epoch + 1 if out["v5 abort, none begun"][0] == 0 else epoch
        out["v5 abort retried (the epoch before)"] = v5(epoch, False)
        out["v5 commit, the epoch before"] = v5(epoch, True)
        out["v5 commit, the epoch now"] = v5(e1, True)
        out["v4 abort, the epoch now"] = v4(e1, False)
        out["v4 abort, the epoch before"] = v4(epoch, False)
        out["v5 abort, a newer epoch"] = v5(e1 + 1, False)
        out["unknown transactional id"] = int(end_txn(c, name(), pid, e1, True).error_code)
        produced = txn_produce(c, t, records(pid, e1, 0, transactional=True), tid)
        out["transactional Produce v12"] = int(produced.error_code)
        out["commit"] = v5(e1, True)
        e2 = e1 + 1 if out["commit"][0] == 0 else e1
        out["after the commit"] = state()
        out["commit retried (the epoch before)"] = v5(e1, True)
        out["abort, the epoch before"] = v5(e1, False)
        out["commit, the epoch now"] = v5(e2, True)
        out["abort, the epoch now"] = v5(e2, False)
        out["finally"] = state()
        return out


@case("A transactional batch to a partition never added: Produce v11 (transaction version 1: verified against "
      "the coordinator), v12 (version 2: the partition added), v12 with a newer epoch; the transaction's partitions; "
      "plain batches of the same producer")
def case_produce_not_added(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = _label(topic(c, 2), "t")
        tid = name()
        r = init_pid(c, tid)
        pid, epoch = r.producer_id, r.producer_epoch
        out: dict[str, Any] = {}
        for version in (9, 11):
            ans = txn_produce(c, t, records(pid, epoch, 0, transactional=True), tid, version)
            out[f"v{version}"] = (int(ans.error_code), int(ans.base_offset))
        out["state after v11"] = describe_txn(c, tid).transaction_state
        ans = txn_produce(c, t, records(pid, epoch, 0, transactional=True), tid)
        out["v12"] = (int(ans.error_code), int(ans.base_offset))
        ans = txn_produce(c, t, records(pid, epoch + 5, 0, transactional=True), tid, partition=1)
        out["v12, a newer epoch, partition 1"] = (int(ans.error_code), int(ans.base_offset))
        s = describe_txn(c, tid)
        out["transaction: (state, partitions)"] = (s.transaction_state, sorted(
            (_LABELS.get(x.topic, x.topic), sorted(x.partitions)) for x in s.topics))
        ans = produce(c, t, records(pid, epoch, 1, transactional=False), version=12)
        out["a plain batch of the same producer, next sequence"] = int(ans.error_code)
        ans = produce(c, t, records(pid, epoch, 0, transactional=False), version=12)
        out["a plain batch repeating the transactional one's sequence"] = (int(ans.error_code), int(ans.base_offset))
        return out


@case("DescribeTransactions v0: an unknown id; Empty after InitProducerId; Ongoing with its partitions; "
      "after the commit")
def case_describe_transactions(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = _label(topic(c, 2), "t")
        tid = name()
        r = init_pid(c, tid, timeout=45000)
        pid, epoch = r.producer_id, r.producer_epoch

        def desc(s: Msg) -> tuple[int, str, int, bool, int, bool, list[Any]]:
            return (int(s.error_code), s.transaction_state, int(s.transaction_timeout), s.producer_id == pid,
                    s.producer_epoch - epoch, s.transaction_start_time > 0,
                    sorted((_LABELS.get(x.topic, x.topic), sorted(x.partitions)) for x in s.topics))
        unknown = describe_txn(c, name())
        out: dict[str, Any] = {"unknown: (error, state)": (int(unknown.error_code), unknown.transaction_state)}
        out["after InitProducerId: (error, state, timeout, id, epoch - first, started, partitions)"] = desc(
            describe_txn(c, tid))
        add_partitions(c, tid, pid, epoch, {t: [0, 1]})
        out["after AddPartitionsToTxn"] = desc(describe_txn(c, tid))
        end_txn(c, tid, pid, epoch, True)
        out["after EndTxn v5 commit"] = desc(settled(c, tid))
        return out


@case("ListTransactions v1: filtered by state (Ongoing, Empty, an unknown state), by producer id, by duration "
      "(longer than an hour)")
def case_list_transactions(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = topic(c)
        empty, ongoing = name(), name()
        init_pid(c, empty)
        r = init_pid(c, ongoing)
        assert add_partitions(c, ongoing, r.producer_id, r.producer_epoch, {t: [0]}) == {f"{t}-0": 0}
        mine = {empty: "empty", ongoing: "ongoing"}

        def listed(states: list[str] | None = None, pids: list[int] | None = None,
                   duration: int = -1) -> tuple[int, list[str], dict[str, str]]:
            resp = c.request(66, 1, {"state_filters": states or [], "producer_id_filters": pids or [],
                                     "duration_filter": duration})
            return int(resp.error_code), list(resp.unknown_state_filters), dict(sorted(
                (mine[s.transactional_id], s.transaction_state) for s in resp.transaction_states
                if s.transactional_id in mine))
        return {"all": listed(), "Ongoing": listed(["Ongoing"]), "Empty": listed(["Empty"]),
                "Bogus": listed(["Bogus"]), "the ongoing's producer id": listed(pids=[r.producer_id]),
                "longer than an hour": listed(duration=3_600_000)}


@case("DescribeProducers v0: a partition with an idempotent and a transactional producer; a partition the "
      "topic does not have; an unknown topic")
def case_describe_producers(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = topic(c)
        idem = init_pid(c, None)
        assert produce(c, t, records(idem.producer_id, idem.producer_epoch, 0, 3), version=12).error_code == 0
        tid = name()
        tx = init_pid(c, tid)
        assert add_partitions(c, tid, tx.producer_id, tx.producer_epoch, {t: [0]}) == {f"{t}-0": 0}
        assert txn_produce(c, t, records(tx.producer_id, tx.producer_epoch, 0, 2, transactional=True),
                           tid).error_code == 0
        labels = {idem.producer_id: "idempotent", tx.producer_id: "transactional"}

        def described(topic_name: str, partition: int) -> tuple[int, dict[str, Any]]:
            resp = c.request(61, 0, {"topics": [{"name": topic_name, "partition_indexes": [partition]}]})
            p = resp.topics[0].partitions[0]
            return int(p.error_code), dict(sorted((labels.get(a.producer_id, "other"), (
                a.producer_epoch, a.last_sequence, a.last_timestamp > 0, a.coordinator_epoch,
                a.current_txn_start_offset)) for a in p.active_producers))
        out: dict[str, Any] = {
            "partition 0: (epoch, last sequence, timestamp set, coordinator epoch, transaction start)":
                described(t, 0)}
        end_txn(c, tid, tx.producer_id, tx.producer_epoch, False)
        settled(c, tid)
        out["after the abort"] = described(t, 0)
        out["partition 5"] = described(t, 5)
        out["unknown topic"] = described(name(), 0)
        return out


@case("TxnOffsetCommit v5 in a transaction (version 2: no AddOffsetsToTxn), then OffsetFetch v9 with "
      "require_stable (UNSTABLE_OFFSET_COMMIT) and without; after the commit; with an old epoch")
def case_txn_offset_commit(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = topic(c)
        tid, group = name(), name()
        r = init_pid(c, tid)
        pid, epoch = r.producer_id, r.producer_epoch
        coordinator(c, group)
        assert txn_produce(c, t, records(pid, epoch, 0, transactional=True), tid).error_code == 0

        def txn_commit(e: int, offset: int) -> list[int]:
            resp = c.request(28, 5, {"transactional_id": tid, "group_id": group, "producer_id": pid,
                                     "producer_epoch": e, "generation_id": -1, "member_id": "",
                                     "group_instance_id": None, "topics": [{"name": t, "partitions": [
                                         {"partition_index": 0, "committed_offset": offset,
                                          "committed_leader_epoch": -1, "committed_metadata": "tx"}]}]})
            return [int(p.error_code) for x in resp.topics for p in x.partitions]

        def fetched(stable: bool) -> tuple[int, list[Any]]:
            resp = c.request(9, 9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                                "topics": [{"name": t, "partition_indexes": [0]}]}],
                                    "require_stable": stable})
            g = resp.groups[0]
            return int(g.error_code), [(int(p.committed_offset), p.metadata, int(p.error_code))
                                       for x in g.topics for p in x.partitions]
        out: dict[str, Any] = {"TxnOffsetCommit": txn_commit(epoch, 1), "fetch, require_stable": fetched(True),
                               "fetch": fetched(False), "transaction": describe_txn(c, tid).transaction_state}
        committed = end_txn(c, tid, pid, epoch, True)
        settled(c, tid)
        out["fetch after the commit"] = fetched(True)
        out["TxnOffsetCommit with the epoch before EndTxn"] = txn_commit(epoch, 2)
        out["with the new epoch"] = txn_commit(committed.producer_epoch, 2)
        out["fetch, require_stable, that offset pending"] = fetched(True)
        return out
