"""Pure rules of a broker's ZooKeeper session: registering, and fencing itself when cut off.

No clock, no store: the broker's session guard (`server/session_guard.py`) gathers the facts
and applies the verdicts; tests drive these with tables.

Registration (`registration_verdict`). `/brokers/ids/<id>` is ephemeral. Creating it may
find it there already:
- it belongs to this broker's own session (a retry, or a watch that delivered a list from
  before the node was made): it is ours, nothing to do. This is told by the node's owner
  session id, never by its content;
- another session holds it with this broker's own endpoints: our previous process, whose
  session has not expired yet (a restart after kill -9). Wait for it, up to the session
  timeout and a margin;
- otherwise another live broker has this id: refuse to start, loudly.

Self-fencing (`fence_deadline_s`, `must_fence`). ZooKeeper expires a session
`zookeeper.session.timeout.ms` after it last heard from the client. kazoo declares the
connection lost after two thirds of that without an answer (its pings go every third), so
when this broker sees SUSPENDED the session may have only a third left. From then on, a
leader still cut off may be replaced at any moment, and it keeps leading a partition only
while it has evidence that nobody else leads it:

- nobody else can be elected: its ISR is itself alone and unclean election is off for the
  topic (the controller then leaves the partition offline rather than elect another
  replica), or it is the only replica;
- or every other member of its ISR is still fetching from it, at its leader epoch, within
  `attest_s`. A replica elected leader stops fetching at once, and the others follow the
  new leader; so this holds while ZooKeeper itself is down or paused (nobody can be elected,
  every broker is cut off, the followers go on fetching) and stops holding moments after a
  new leader is elected when this broker alone is cut off.

Otherwise it stops acting as leader: clients get NOT_LEADER_OR_FOLLOWER and look the leader
up again. Between the election of a new leader and this broker noticing (at most `attest_s`),
an acks=all write to it cannot be acknowledged: its high watermark waits for followers that
no longer fetch from it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import Enum

REGISTRATION_MARGIN_S = 5.0


class Registration(Enum):
    OURS = "ours"
    WAIT = "wait"
    CONFLICT = "conflict"


def registration_verdict(owner_session: int, my_session: int, their_endpoints: list[str] | None,
                         my_endpoints: list[str], waited_s: float, session_timeout_s: float) -> Registration:
    """What to do when `/brokers/ids/<me>` already exists (see the module docstring)."""
    if owner_session == my_session and my_session != 0:
        return Registration.OURS
    if their_endpoints == my_endpoints and waited_s <= session_timeout_s + REGISTRATION_MARGIN_S:
        return Registration.WAIT
    return Registration.CONFLICT


def fence_deadline_s(session_timeout_ms: int) -> float:
    """Seconds after the connection is seen lost when a leader must stop acting as one: the
    last third of the session, less a small margin for the controller's reaction."""
    third = session_timeout_ms / 3000
    return max(0.0, third - min(0.2, third / 4))


def must_fence(disconnected_s: float, deadline_s: float, me: int, replicas: Collection[int],
               isr: Collection[int], unclean_allowed: bool, since_fetch_s: Mapping[int, float],
               attest_s: float) -> bool:
    """True if a leader cut off from ZooKeeper for `disconnected_s` must stop leading.
    `since_fetch_s`: seconds since each follower's last fetch at this leader's epoch."""
    if disconnected_s < deadline_s:
        return False
    others = [r for r in replicas if r != me]
    if not others:
        return False  # the only replica: nobody can be elected in its place
    isr_others = [r for r in isr if r != me]
    if not isr_others:
        return unclean_allowed  # the ISR is this broker alone: a clean election cannot pick another
    return not all(since_fetch_s.get(r, float("inf")) <= attest_s for r in isr_others)


def attest_window_s(replica_fetch_wait_max_ms: int) -> float:
    """How recent a follower's fetch must be to count: a caught-up follower's fetch waits up
    to replica.fetch.wait.max.ms at the leader, so one arrives at least that often."""
    return (2 * replica_fetch_wait_max_ms + 500) / 1000
