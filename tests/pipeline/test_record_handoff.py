"""A fetched record handed to Faust's conductor without four tasks (pipeline.worker.
faust_internals, 10): the record's callback runs at once, as the first step of a task would,
and only a callback that waits is raced against the flow's suspension, as Faust's
`wait_first` races it. `run_until_it_waits` must drive a coroutine exactly as asyncio's
Task does: its context, a future's result or failure, cancellation. No broker."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any

import faust
import pytest

from pipeline.worker.faust_internals import run_until_it_waits, tune_consumer

_var: contextvars.ContextVar[str] = contextvars.ContextVar("_var", default="caller's")


async def _set_and_return(value: str) -> str:
    _var.set(value)
    return _var.get()


async def _raise() -> None:
    raise ValueError("in the first step")


async def _await(fut: asyncio.Future[int]) -> tuple[int, str]:
    _var.set("the task's")
    got = await fut
    await asyncio.sleep(0)  # a bare yield between two steps
    return got, _var.get()


async def _read_failure(fut: asyncio.Future[int]) -> str:
    try:
        await fut
    except ValueError as e:
        return f"read {e}"
    return "no failure"


async def _read_cancel(fut: asyncio.Future[int]) -> str:
    try:
        await fut
    except asyncio.CancelledError:
        return "cancelled"
    return "not cancelled"


async def _yield_then_wait(log: list[str]) -> None:
    try:
        await asyncio.sleep(0)
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        log.append("cancelled")
        raise


def test_a_coroutine_that_does_not_wait_completes_at_once_in_a_copy_of_the_context() -> None:
    async def main() -> None:
        assert run_until_it_waits(_set_and_return("its own")) is None
        assert _var.get() == "caller's"  # what it set stayed in its copy, as in a task's
        with pytest.raises(ValueError, match="in the first step"):
            run_until_it_waits(_raise())

    asyncio.run(main())


def test_the_rest_of_a_waiting_coroutine_runs_as_its_task_would() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        rest = run_until_it_waits(_await(fut))
        assert rest is not None and not rest.done()
        loop.call_later(0.01, fut.set_result, 42)
        assert await rest == (42, "the task's")  # its result, in the context it began in
        assert _var.get() == "caller's"

        failing: asyncio.Future[int] = loop.create_future()
        rest = run_until_it_waits(_read_failure(failing))
        assert rest is not None
        loop.call_later(0.01, failing.set_exception, ValueError("the future's"))
        assert await rest == "read the future's"

    asyncio.run(main())


def test_cancelling_the_rest_reaches_the_coroutine() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        rest = run_until_it_waits(_read_cancel(fut))
        assert rest is not None
        await asyncio.sleep(0)
        rest.cancel()  # through the future it waits on, as Task.cancel does
        assert await rest == "cancelled" and fut.cancelled()

        log: list[str] = []
        rest = run_until_it_waits(_yield_then_wait(log))  # waits on a bare yield first
        assert rest is not None
        rest.cancel()
        with pytest.raises(asyncio.CancelledError):
            await rest
        assert log == ["cancelled"]

    asyncio.run(main())


class _Tasks:
    """Counts the tasks made on the running loop."""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any],
                 **kwargs: Any) -> asyncio.Task[Any]:
        self.made += 1
        return asyncio.Task(coro, loop=loop, **kwargs)


def _consumer() -> Any:
    app = faust.App("record-handoff-test", broker="kafka://127.0.0.1:9", web_enabled=False)
    tune_consumer(app, 0.05)

    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    return app.transport.Consumer(app.transport, callback=nothing,
                                  on_partitions_revoked=nothing,
                                  on_partitions_assigned=nothing)


def test_the_consumer_hands_a_record_on_without_a_task_unless_its_callback_waits() -> None:
    """What Faust's drain loop calls for each record: `wait_first(callback(record),
    suspend_flow.wait())`. A callback that does not wait makes no task; one that waits
    is still raced against the flow's suspension, and cancelled when the flow is
    suspended first, as with Faust's own wait_first."""

    async def main() -> None:
        consumer, tasks = _consumer(), _Tasks()
        asyncio.get_running_loop().set_task_factory(tasks)
        handed: list[str] = []

        async def quick(record: str) -> None:
            handed.append(record)

        result = await consumer.wait_first(quick("a"), consumer.suspend_flow.wait())
        assert handed == ["a"] and result.results == [None] and not result.stopped
        assert tasks.made == 0

        blocked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        log: list[str] = []

        async def waits(record: str) -> None:
            try:
                await blocked
                handed.append(record)
            except asyncio.CancelledError:
                log.append(f"{record} cancelled")
                raise

        asyncio.get_running_loop().call_later(0.01, consumer.suspend_flow.set)
        await consumer.wait_first(waits("b"), consumer.suspend_flow.wait())
        await asyncio.sleep(0)
        assert handed == ["a"] and log == ["b cancelled"] and blocked.cancelled()
        assert tasks.made > 0  # the waiting one went through Faust's race

    asyncio.run(main())
