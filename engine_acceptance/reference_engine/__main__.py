"""Command line: run the reference engine as a real HTTP server.

    python -m engine_acceptance.reference_engine --port 0 [--convention sglang]
        [--api-key K] [--inject DEFECT ...] [--model NAME] [--max-model-len N]
        [--ttft-ms MS] [--tpot-ms MS] [--prefill-ms-per-1k MS] [--batch-slowdown F]
        [--knee-inflight N --tpot-per-inflight-ms MS]
        [--stream-chunk-tokens N] [--text-only] [--no-tool-parser] [--no-tokenize]
        [--no-reasoning | --reasoning-on-request] [--no-structured-outputs] [--no-responses] [--no-prefix-cache]
        [--spec-decode-acceptance F | --no-spec-decode]
    python -m engine_acceptance.reference_engine --export-tokenizer tokenizer.json

Once bound it prints exactly one line to stdout, flushed, which the launcher
waits for: `engine-acceptance reference engine listening on http://HOST:PORT`.
The API key may come from $REFERENCE_ENGINE_API_KEY instead of argv, so it never
shows in process listings. An unknown defect name exits with code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from .config import (API_KEY_ENV, DEFAULT_MAX_MODEL_LEN, DEFAULT_MODEL, LISTENING_PREFIX, LatencyModel,
                     ReferenceEngineConfig)
from .conventions import CONVENTIONS
from .defect_names import DEFECTS, UnknownDefectError, validate_defects
from .precise_loop import precise_event_loop
from .spec_decode import DEFAULT_ACCEPTANCE
from .server import build_app

__all__ = ["main", "parse_args"]

# Open streams get this long to finish after SIGTERM before they are cut.
SHUTDOWN_TIMEOUT_S = 2.0


def _defect_help() -> str:
    # argparse %-formats help strings: a description saying "40%" would break --help.
    return "; ".join(f"{name}: {text}" for name, text in DEFECTS.items()).replace("%", "%%")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m engine_acceptance.reference_engine",
        description="Built-in OpenAI-compatible reference engine (imitates vLLM or SGLang)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="Address to bind")
    parser.add_argument("--port", type=int, default=8000, help="Port to bind; 0 picks a free one")
    parser.add_argument("--convention", choices=sorted(CONVENTIONS), default="vllm",
                        help="Engine whose API conventions to imitate")
    parser.add_argument("--api-key", default=None,
                        help=f"Require 'Authorization: Bearer KEY' (default: ${API_KEY_ENV})")
    parser.add_argument("--inject", nargs="+", action="extend", default=[], metavar="DEFECT",
                        help=f"Defects to inject: {_defect_help()}")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="Served model name")
    parser.add_argument("--max-model-len", type=int, default=DEFAULT_MAX_MODEL_LEN,
                        help="Context length in tokens")
    parser.add_argument("--ttft-ms", type=float, default=LatencyModel.ttft_ms,
                        help="Time to first token in milliseconds")
    parser.add_argument("--tpot-ms", type=float, default=LatencyModel.tpot_ms,
                        help="Time per output token in milliseconds")
    parser.add_argument("--prefill-ms-per-1k", type=float, default=LatencyModel.prefill_ms_per_1k_tokens,
                        help="Extra time to first token per 1000 prompt tokens, in milliseconds")
    parser.add_argument("--batch-slowdown", type=float, default=LatencyModel.batch_slowdown,
                        help="Fraction added to the per-token time for each other request generating at once")
    parser.add_argument("--knee-inflight", type=int, default=LatencyModel.knee_inflight,
                        help="Requests in flight before the per-token time grows (with --tpot-per-inflight-ms)")
    parser.add_argument("--tpot-per-inflight-ms", type=float, default=LatencyModel.tpot_ms_per_inflight_over_knee,
                        help="Milliseconds added to every token per request in flight above --knee-inflight")
    parser.add_argument("--stream-chunk-tokens", type=int, default=ReferenceEngineConfig.stream_chunk_tokens,
                        help="Output tokens per streamed event (1 = one event per token, like vLLM)")
    parser.add_argument("--stamp-events", action="store_true",
                        help="Benchmarks: add engine_sent_at (the engine's monotonic clock) to every event")
    parser.add_argument("--text-only", action="store_true",
                        help="Serve a text-only model: every image or video part gets vLLM's 400 "
                             "'<model> is not a multimodal model'")
    parser.add_argument("--no-tool-parser", action="store_true",
                        help="Serve as vLLM without --enable-auto-tool-choice and --tool-call-parser: "
                             "requests with tools get vLLM's 400")
    parser.add_argument("--no-tokenize", action="store_true",
                        help="No /tokenize or /detokenize endpoint: they answer 404 like a server without them")
    parser.add_argument("--no-reasoning", action="store_true",
                        help="Serve a model that never reasons, whatever the request asks")
    parser.add_argument("--reasoning-on-request", action="store_true",
                        help="The model reasons only when a switch turns thinking on (enable_thinking, thinking or "
                             "thinking_mode), as vLLM's qwen3 parser with thinking off by default")
    parser.add_argument("--no-structured-outputs", action="store_true",
                        help="No structured-output backend: a json_schema or json_object response_format gets a 400")
    parser.add_argument("--no-responses", action="store_true",
                        help="No Responses API: POST /v1/responses answers 404 like a server without it")
    parser.add_argument("--no-prefix-cache", action="store_true",
                        help="No prefix cache: nothing is cached and no cached tokens are reported (usage or /metrics), "
                             "as vLLM with --no-enable-prefix-caching")
    parser.add_argument("--spec-decode-acceptance", type=float, default=DEFAULT_ACCEPTANCE, metavar="F",
                        help="Speculative decoding's acceptance (0 to 1) that /metrics counts, as vLLM's "
                             "vllm:spec_decode_num_accepted_tokens over ..._num_draft_tokens (default: %(default)s)")
    parser.add_argument("--no-spec-decode", action="store_true",
                        help="No speculative decoding: /metrics serves no speculative-decoding counters")
    parser.add_argument("--access-log", action="store_true", help="Log every request to stderr")
    parser.add_argument("--export-tokenizer", metavar="PATH", default=None,
                        help="Write the engine's tokenizer.json to PATH and exit (for --tokenizer PATH)")
    return parser.parse_args(argv)


def _format_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def _serve(config: ReferenceEngineConfig, host: str, port: int, access_log: bool) -> None:
    runner = web.AppRunner(
        build_app(config),
        access_log=logging.getLogger("aiohttp.access") if access_log else None,
        shutdown_timeout=SHUTDOWN_TIMEOUT_S,
        # A client that disconnects cancels its handler, so a non-streamed request is aborted too
        # (vLLM's with_cancellation, SGLang's is_disconnected checks).
        handler_cancellation=True,
        # Idle connections closed after 5 s, as vLLM's and SGLang's uvicorn close them
        # (aiohttp's own default is 75 s): the clients must not trip over it.
        keepalive_timeout=5.0,
    )
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        # A large backlog: xdist workers open many connections at once.
        site = web.TCPSite(runner, host, port, backlog=1024)
        await site.start()
        bound_port = runner.addresses[0][1]
        print(f"{LISTENING_PREFIX}{_format_url(host, bound_port)}", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.export_tokenizer:
        from .tokenizer import get_tokenizer

        with open(args.export_tokenizer, "w", encoding="utf-8") as out:
            out.write(get_tokenizer().to_json())
        return 0
    try:
        defects = validate_defects(args.inject)
    except UnknownDefectError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = ReferenceEngineConfig(
            convention=args.convention,
            api_key=args.api_key or os.environ.get(API_KEY_ENV) or None,
            defects=defects,
            model=args.model,
            max_model_len=args.max_model_len,
            latency=LatencyModel(ttft_ms=args.ttft_ms, tpot_ms=args.tpot_ms,
                                 prefill_ms_per_1k_tokens=args.prefill_ms_per_1k,
                                 batch_slowdown=args.batch_slowdown, knee_inflight=args.knee_inflight,
                                 tpot_ms_per_inflight_over_knee=args.tpot_per_inflight_ms),
            stream_chunk_tokens=args.stream_chunk_tokens,
            stamp_events=args.stamp_events,
            text_only=args.text_only,
            tool_parser=not args.no_tool_parser,
            tokenize=not args.no_tokenize,
            reasoning=not args.no_reasoning,
            reasoning_by_default=not args.reasoning_on_request,
            structured_outputs=not args.no_structured_outputs,
            responses=not args.no_responses,
            prefix_cache=not args.no_prefix_cache,
            spec_decode_acceptance=None if args.no_spec_decode else args.spec_decode_acceptance,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Timers to the microsecond: the latency model is a throughput run's ground truth.
    with asyncio.Runner(loop_factory=precise_event_loop) as runner:
        runner.run(_serve(config, args.host, args.port, args.access_log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
