"""The load against an engine that closes a connection after each streamed reply (llama-server b11312).

Its engine profile says so (``features.closes_connection_after_stream``), the session's target
then says ``reuse_connections=False``, and the load opens a connection per request, saying so:
every request of a cell at concurrency 1 is answered, where a pooled connection would have sent
the next request into the socket the engine was closing. Against a clean engine the pool is kept.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine_acceptance.load.generator import Cell, PromptIds, connection_note, measure_cell
from engine_acceptance.reference_engine.launcher import RunningReferenceEngine, start_reference_engine
from engine_acceptance.wire.types import EngineTarget

@pytest.fixture(scope="module")
def dropping_engine() -> Iterator[RunningReferenceEngine]:
    with start_reference_engine(defects=("stream-drops-connection",)) as running:
        yield running


@pytest.mark.asyncio
async def test_a_connection_per_request_serves_every_request_and_says_so(dropping_engine) -> None:
    target = EngineTarget(dropping_engine.url, "reference-model", reuse_connections=False)
    prompts = await PromptIds.from_engine(target, "/tokenize", min_tokens=32, seed=2)
    said: list[str] = []
    result = await measure_cell(target, Cell(32, 4, 1, 6, 1), prompts, rounds=2, ignore_eos=True,
                                progress=said.append)
    records = [record for records in result.records for record in records]
    assert len(records) == 12 and all(record.ok for record in records), [r.error for r in records if not r.ok]
    assert any("a new connection for each request, its connect inside the measured time" in line for line in said)


def test_the_load_keeps_its_connections_unless_the_target_says_otherwise() -> None:
    assert connection_note(EngineTarget("http://127.0.0.1:1", "m")) is None
    assert "features.closes_connection_after_stream" in connection_note(
        EngineTarget("http://127.0.0.1:1", "m", reuse_connections=False))
