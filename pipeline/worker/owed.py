"""What a normalize agent's delivered batches still owe: their session states' and
fleet counts' changelog records, the item chunks they dropped, and their records'
acknowledgements.

A batch's output is delivered first (pipeline.worker.checkpoint); its new session states
are then written to the local table at once, but their changelog records ride in the
agent's next delivery, with the next batch's output, instead of a delivery of their
own. The chunks a batch dropped go one delivery later still, after the states that no
longer name them. A batch's records are acknowledged only once its states are
delivered (faust_door.hold_ack, release_acks). Measured (`canonflow bench --latency`):
the two deliveries after each batch's output (states, then drops), each a round trip
and on the embedded broker two, were 15-65 ms of every batch, 60-90% of its time.

The invariant is kept as it was (STATE NEVER AHEAD OF WHAT WAS PUBLISHED): a state goes
in a delivery after the one that delivered its events, and a changelog partition is
written by one agent, one delivery at a time, in order. A worker that dies with states
owed has not acknowledged their records: they are read again after the restart, and are
either below the stored watermark or translated again into the same events (the same
eventIds). An agent with nothing more to deliver delivers what it owes after
FLUSH_AFTER_SECONDS on its own; the idle and stall scans deliver it before they read the
table; a stopping agent delivers it before it stops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pipeline.worker.faust_door import ChangelogRecord, note_persisted
from pipeline.worker.output import Abandoned, OutputProducer, Record

log = logging.getLogger("canonflow")

#: An agent that delivered nothing for this long delivers what it owes on its own. Long
#: enough for the next batch of a busy agent to take it (batches follow one another
#: within the batch window and a fetch), short enough that an idle agent's records are
#: acknowledged (their offsets committed) at once.
FLUSH_AFTER_SECONDS = 0.05


class Owed:
    """One agent's debts (see the module doc). Every method is called under the lock the
    agent shares with its scans (checkpoint.Sessions.lock)."""

    def __init__(self, tables: Any, sink: OutputProducer, name: str,
                 release: Callable[[Iterable[Any]], None], counted: Sequence[Any] = ()):
        # tables: the agent's checkpoint.Tables (its sessions' and items' tables);
        # counted: the fleet stage's tables, whose records a batch's count owes too
        self.tables, self.sink, self.name = tables, sink, name
        self.persisted = [tables.items, tables.sessions, *counted]
        self.release = release  # acknowledges held records (faust_door.release_acks)
        self.states: list[ChangelogRecord] = []  # the last batch's, written locally
        self.held: list[Any] = []  # that batch's records, acknowledged with its states
        self.dropped: list[ChangelogRecord] = []  # its chunks' tombstones: after its states
        self.ready: list[ChangelogRecord] = []  # tombstones whose states are delivered
        self.last = time.monotonic()  # when the agent last delivered
        self._timer: asyncio.Task[None] | None = None

    def __bool__(self) -> bool:
        return bool(self.states or self.held or self.dropped or self.ready)

    def owe(self, states: list[ChangelogRecord], dropped: list[ChangelogRecord],
            held: list[Any]) -> None:
        """A batch whose output was just delivered (`deliver`) owes `states` and
        `dropped`, and holds `held` until they are delivered."""
        self.states, self.dropped, self.held = states, dropped, held

    def owe_counts(self, records: list[ChangelogRecord]) -> None:
        """The fleet stage's changelog records of the batch that owes its states (its
        count, after `owe`): delivered with them, before its records are acknowledged."""
        self.states.extend(records)

    async def deliver(self, records: list[Record], puts: list[ChangelogRecord]) -> None:
        """Deliver `records` (a batch's output, with `puts`, the chunks it wrote) with
        what is owed: the tombstones ready before them, the states after. Then the
        states' records are acknowledged, and the last batch's tombstones are ready."""
        if puts and (self.ready or self.dropped):  # a chunk dropped, then written again
            again = {put[2] for put in puts}
            self.ready = [r for r in self.ready if r[2] not in again]
            self.dropped = [r for r in self.dropped if r[2] not in again]
        records = [*self.ready, *records, *self.states]
        if records:
            ends = await self.sink.publish(records, self.name, exact_ends=self.sink.exact_ends)
            note_persisted(self.persisted, ends)
        self.release(self.held)
        self.ready, self.dropped, self.states, self.held = self.dropped, [], [], []
        self.last = time.monotonic()

    async def flush(self) -> None:
        """Deliver everything owed (two deliveries when chunks were dropped)."""
        while self:
            await self.deliver([], [])

    def schedule(self, lock: asyncio.Lock, given_up: Callable[[], Any]) -> None:
        """Make sure what is owed is delivered FLUSH_AFTER_SECONDS after the agent's last
        delivery, if no batch has delivered it by then. `given_up` is called when the
        worker stops while that delivery is being sent again."""
        if self and (self._timer is None or self._timer.done()):
            self._timer = asyncio.ensure_future(self._flush_when_idle(lock, given_up))

    async def _flush_when_idle(self, lock: asyncio.Lock, given_up: Callable[[], Any]) -> None:
        while self:
            wait = self.last + FLUSH_AFTER_SECONDS - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            async with lock:
                # a batch that held the lock meanwhile delivered (and owes its own): its
                # debt waits for the next batch, or for the agent to be idle
                if self.last + FLUSH_AFTER_SECONDS > time.monotonic():
                    continue
                try:
                    await self.flush()
                except Abandoned:
                    given_up()
                    return

    async def settle(self, lock: asyncio.Lock) -> None:
        """Deliver what is owed as the agent stops (one attempt: a delivery that fails
        leaves the records unacknowledged, read again after the restart)."""
        if self._timer is not None and not self._timer.done():
            self._timer.cancel()
        if not self:
            return
        try:
            async with lock:
                await self.flush()
        except Exception:  # Abandoned among them
            log.warning("%s: stopping with %d state(s) not stored; their records are read "
                        "again after the restart", self.name, len(self.states))
