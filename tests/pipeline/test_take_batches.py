"""The agents' batches (pipeline.worker.faust_internals.take_batches, issue 24): the batches
Faust's take_events gives, acknowledged as it does them, but an empty batch waits for
its first record without a timer (take_events woke every `within`: with a 10 ms window
and eleven agents, an idle worker's loop woke 1,100 times a second), and a batch waits
at most `within` after its first record joined it.

On an in-memory channel of a Faust app that is never started: no broker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import faust

from pipeline.worker.faust_internals import take_batches


class _Agent:
    """A stream over an in-memory channel, its batches taken by a task that records
    when each came and what it held; `work` seconds spent on each batch."""

    def __init__(self, max_: int, within: float, work: float = 0.0):
        self.app = faust.App("take-batches-test", broker="kafka://127.0.0.1:9",
                             web_enabled=False)
        self.app.flow_control.resume()  # a started app's: the channel takes records
        self.channel = self.app.channel()
        self.stream = self.app.stream(self.channel)
        self.max, self.within, self.work = max_, within, work
        self.got: list[tuple[float, list[Any]]] = []
        self.asked: list[float] = []  # when the agent asked for each batch
        self.acked: list[Any] = []
        self.waits = 0  # the stream's waits (each a wake-up of the loop and 3 tasks)
        ack, wait = self.stream.ack, self.stream.wait_for_stopped

        async def counted_ack(event: Any) -> bool:
            self.acked.append(event.value)
            return bool(await ack(event))

        async def counted_wait(*args: Any, **kwargs: Any) -> bool:
            self.waits += 1
            return bool(await wait(*args, **kwargs))

        self.stream.ack = counted_ack  # type: ignore[method-assign]
        self.stream.wait_for_stopped = counted_wait  # type: ignore[method-assign]
        self.batches = take_batches(self.stream, max_, within)
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        self.asked.append(time.monotonic())
        async for batch in self.batches:
            self.got.append((time.monotonic(), [e.value for e in batch]))
            if self.work:
                await asyncio.sleep(self.work)
            self.asked.append(time.monotonic())

    async def __aenter__(self) -> _Agent:
        self.task = asyncio.create_task(self._run())
        await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self.task is not None
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass
        await self.batches.aclose()

    async def send(self, *values: Any) -> float:
        sent = time.monotonic()
        for v in values:
            await self.channel.send(value=v)
        return sent

    def values(self) -> list[list[Any]]:
        return [v for _, v in self.got]


def _run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def test_an_idle_agent_waits_without_waking_up():
    async def test() -> None:
        async with _Agent(500, 0.01) as agent:
            await asyncio.sleep(0.5)
            idle_waits = agent.waits
            await agent.send(1)
            await asyncio.sleep(0.1)
        # take_events would have woken about 50 times in the half second (every 10 ms)
        assert idle_waits <= 1
        assert agent.values() == [[1]]

    _run(test)


def test_a_batch_waits_within_after_its_first_record_then_goes():
    async def test() -> None:
        async with _Agent(500, 0.2) as agent:
            await asyncio.sleep(0.13)  # not on a tick of the agent's start
            sent = await agent.send("a")
            await asyncio.sleep(0.05)
            await agent.send("b")
            await asyncio.sleep(0.4)
        assert agent.values() == [["a", "b"]]
        waited = agent.got[0][0] - sent
        assert 0.19 <= waited < 0.6, waited

    _run(test)


def test_a_full_batch_goes_at_once_and_never_holds_more_than_max():
    async def test() -> None:
        async with _Agent(3, 5.0) as agent:
            sent = await agent.send(*range(7))
            await asyncio.sleep(0.2)
            first = agent.values()[:2]
            took = agent.got[1][0] - sent
        assert first == [[0, 1, 2], [3, 4, 5]]
        assert took < 1.0  # not the 5 s window: each batch was full
        assert all(len(v) <= 3 for v in agent.values())

    _run(test)


def test_records_that_come_while_the_agent_holds_a_batch_make_the_next_one():
    async def test() -> None:
        async with _Agent(500, 0.2, work=0.4) as agent:
            await agent.send(1)
            await asyncio.sleep(0.3)  # the agent holds [1] (0.2 s window, 0.4 s of work)
            await agent.send(2, 3)
            await asyncio.sleep(0.8)
        # they join the next batch when the agent asks for it, and it gathers for its
        # window from then (as take_events' did): a busy agent's batches stay as large
        assert agent.values() == [[1], [2, 3]]
        waited = agent.got[1][0] - agent.asked[1]
        assert 0.19 <= waited < 0.6, waited

    _run(test)


def test_with_no_window_a_batch_waits_until_it_is_full():
    async def test() -> None:
        async with _Agent(2, 0) as agent:
            await agent.send(1)
            await asyncio.sleep(0.3)
            alone = agent.values()
            await agent.send(2)
            await asyncio.sleep(0.1)
        assert alone == []
        assert agent.values() == [[1, 2]]

    _run(test)


def test_a_batch_is_acknowledged_when_the_next_is_asked_for():
    async def test() -> None:
        async with _Agent(500, 0.05, work=0.3) as agent:
            await agent.send(1, 2)
            await asyncio.sleep(0.15)  # the agent works on [1, 2]
            while_held = list(agent.acked)
            await asyncio.sleep(0.3)  # it asked for the next batch
            after = list(agent.acked)
            await agent.send(3)
            await asyncio.sleep(0.2)
            still_held = list(agent.acked)  # [3] is with the agent
        assert agent.values() == [[1, 2], [3]]
        assert while_held == []
        assert after == [1, 2]
        assert still_held == [1, 2]

    _run(test)


def test_closing_acknowledges_the_batch_and_gives_the_stream_back():
    async def test() -> None:
        agent = _Agent(500, 0.05)
        acks = agent.stream.enable_acks
        processors = len(agent.stream._processors)
        batch = await asyncio.wait_for(_first(agent), 2)
        assert [e.value for e in batch] == ["x"]
        assert agent.stream.enable_acks is False  # the batches are acknowledged here
        assert agent.batches in agent.stream._active_agens  # the stream's stop closes it
        await agent.batches.aclose()
        assert agent.acked == ["x"]
        assert agent.stream.enable_acks is acks
        assert len(agent.stream._processors) == processors

    async def _first(agent: _Agent) -> Any:
        async def send() -> None:
            await asyncio.sleep(0.05)
            await agent.send("x")

        sender = asyncio.create_task(send())
        batch = await agent.batches.__anext__()
        await sender
        return batch

    _run(test)
