"""Side-by-side engine comparison: the suite once per engine, then one table per figure.

    python -m engine_acceptance.compare --out DIR \\
        --engine sglang=http://10.0.0.5:30000,api-key-env=SGLANG_KEY \\
        --engine vllm=http://10.0.0.6:8000,profile=minimax-m3 \\
        [--reference ref:ttft_ms=100,tpot_ms=10] [--phase functional] [--phase throughput] \\
        [--select "text or thinking"] [--workers 2] [--seed 1] -- [pytest args for every run]

Teams use the suite to choose an engine or an upgrade, and every seed report is such
a comparison (seed 001: SGLang beside vLLM on the same model, table after table).
One pytest run tests one engine (``--engine-url`` once), so a comparison runs the
suite once per engine, one engine after the other, each with the identical request
set: the same selection, pytest arguments (shapes, rounds, media), and
``--throughput-seed``, so the fixed-length prompts are the same text. Each run is a
phase, because measurements never share the engine with other checks:
``functional`` (every check but the measurements, ``-n`` from ``--workers``),
``throughput`` (fixed-length and media), ``recall``, ``soak``; or ``acceptance`` alone:
the README's one command per engine (every check, the measurements last and alone),
so each engine also gets its own verdict. A phase's files land in
``DIR/<engine>/<phase>/``: ``gate.json``, ``junit.xml`` (with the figures checks
record), ``throughput.json``, ``allure-results/`` and ``pytest.log``.

``--reference NAME[:key=value,...]`` starts a built-in reference engine for its turn
(keys ``ttft_ms``, ``tpot_ms``, ``prefill_ms_per_1k``, ``batch_slowdown``,
``stream_chunk_tokens``, ``convention``, ``inject=DEFECT[+DEFECT]``): two of them with
latency models 2x apart give a comparison whose answer is known. The API key of an
engine is read from the environment variable its ``api-key-env`` names and handed to
its runs through the environment, never on a command line. ``workers=N`` sets one engine's
``-n`` apart from ``--workers``: the requests are the same, only how many are in flight at once
(vLLM batches its decoding and answers more at once faster; llama.cpp's server answers one at a
time and slows down with more waiting, so CI gives it one worker and vLLM four). The same number
sends recall's field-extraction prompts that many at a time (``--recall-concurrency``).

Then :mod:`engine_acceptance.compare.report` renders ``DIR/comparison.md``,
``DIR/comparison.csv``, ``DIR/comparison.html`` and one Allure result in
``DIR/allure-results``. ``--render-only`` renders again from ``DIR/comparison.json``.

Exit codes: 0 the comparison ran and rendered (checks failing on an engine are in
its tables, this is not a gate), 2 interrupted (what ran is still rendered), 4 bad
options (here or in the pytest arguments), 6 an engine was unavailable.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from engine_acceptance import sigterm
from engine_acceptance.cli import suite_command
from engine_acceptance.errors import UsageError
from engine_acceptance.pytest_plugin.option_catalog import driver_set_options
from engine_acceptance.compare.report import (
    build_tables,
    load_engine,
    render_csv,
    render_html,
    render_markdown,
    write_allure_result,
)

__all__ = ["PHASES", "EngineSpec", "main", "parse_args", "phase_command"]

# Marker expression of each phase. Measurements run alone (phases.MEASUREMENT_MARKERS),
# so each is its own pytest run.
# "acceptance" is the README's one command, no marker expression: discovery, the functional checks in
# parallel, then the measurements alone, one verdict per engine; it is not combined with another phase.
PHASES: dict[str, str | None] = {
    "acceptance": None,
    "functional": "not (throughput or recall or recall_1m or soak)",
    "throughput": "throughput",
    "recall": "recall",
    "soak": "soak",
}
DEFAULT_PHASES = ("functional", "throughput")
# Options the driver sets itself for each run; given after -- they would break the comparison. The
# plugin's own are those its declarations mark driver_sets (pytest_plugin/option_catalog.py); these
# belong to pytest, pytest-xdist and allure-pytest, which the suite does not declare.
DRIVER_SETS_OTHERS = ("--junitxml", "--junit-xml", "--alluredir", "--numprocesses", "--dist")
DRIVER_SETS_SHORT = ("-m", "-n")
# inject=DEFECT[+DEFECT]: a reference engine with a known defect, so a comparison's differences can be checked.
REFERENCE_KEYS = {"ttft_ms": float, "tpot_ms": float, "prefill_ms_per_1k": float, "batch_slowdown": float,
                  "stream_chunk_tokens": int, "convention": str, "inject": str}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,40}$")
# pytest's own codes, and the suite's "engine unavailable".
USAGE_ERROR, INTERRUPTED, ENGINE_UNAVAILABLE = 4, 2, 6
# After Ctrl-C, how long a run may take to write its verdict before it is told again.
INTERRUPT_GRACE_S = 20.0


class CompareUsageError(UsageError):
    """A bad driver option: printed with the usage, exit code 4."""


@dataclass
class EngineSpec:
    """One engine of the comparison: a URL, or a built-in reference engine the driver starts."""

    name: str
    url: str | None = None
    profile: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    # not-served=CAP[+CAP]: what this engine leaves off on purpose (its run gets --not-served).
    not_served: str | None = None
    # workers=N: this engine's xdist workers for its functional checks, instead of --workers.
    workers: int | None = None
    reference: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        if self.reference is None:
            return self.url or "?"
        settings = ", ".join(f"{k}={v}" for k, v in self.reference.items()) or "default latency"
        return f"built-in reference engine ({settings})"


def _parse_engine(text: str) -> EngineSpec:
    name, sep, rest = text.partition("=")
    if not sep or not rest:
        raise CompareUsageError(f"--engine {text!r}: expected NAME=URL[,profile=P][,model=M][,api-key-env=VAR]"
                                "[,not-served=CAP[+CAP]][,workers=N]")
    url, *options = rest.split(",")
    spec = EngineSpec(name=name, url=url)
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not value or key not in ("profile", "model", "api-key-env", "not-served", "workers"):
            raise CompareUsageError(f"--engine {text!r}: {option!r} is not profile=P, model=M, api-key-env=VAR, "
                                    "not-served=CAP[+CAP] or workers=N")
        if key == "workers":
            if not value.isdigit() or int(value) < 1:
                raise CompareUsageError(f"--engine {text!r}: workers={value!r} is not a whole number of at least 1")
            spec.workers = int(value)
            continue
        setattr(spec, key.replace("-", "_"), value)
    if not re.match(r"^https?://[^/\s]+", url):
        raise CompareUsageError(f"--engine {text!r}: {url!r} is not an http(s) URL like http://host:30000")
    return spec


def _parse_reference(text: str) -> EngineSpec:
    name, _, rest = text.partition(":")
    settings: dict[str, Any] = {}
    for option in filter(None, rest.split(",")):
        key, sep, value = option.partition("=")
        if not sep or key not in REFERENCE_KEYS:
            raise CompareUsageError(f"--reference {text!r}: {option!r} is not one of "
                                    f"{', '.join(f'{k}=...' for k in REFERENCE_KEYS)}")
        try:
            settings[key] = REFERENCE_KEYS[key](value)
        except ValueError:
            raise CompareUsageError(f"--reference {text!r}: {key}={value!r} is not a "
                                    f"{REFERENCE_KEYS[key].__name__}") from None
    if "inject" in settings:
        from engine_acceptance.reference_engine.defect_names import UnknownDefectError, validate_defects

        try:
            validate_defects(settings["inject"].split("+"))
        except UnknownDefectError as exc:
            raise CompareUsageError(f"--reference {text!r}: {exc}") from None
    if settings.get("convention", "vllm") not in ("vllm", "sglang"):
        raise CompareUsageError(f"--reference {text!r}: convention must be vllm or sglang")
    return EngineSpec(name=name, reference=settings)


class _Target(argparse.Action):
    """--engine and --reference into one list, in command-line order (the columns' order)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parse = _parse_engine if option_string == "--engine" else _parse_reference
        try:
            spec = parse(values)
        except CompareUsageError as exc:
            parser.error(str(exc))
        targets = list(getattr(namespace, "targets", None) or [])
        namespace.targets = [*targets, spec]


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """The driver's options, and the pytest arguments after ``--``."""
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    own, pytest_args = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(prog="python -m engine_acceptance.compare",
                                     description="Run the acceptance suite on several engines, one after the other, "
                                                 "with the same requests, and compare them side by side",
                                     epilog="Arguments after -- go to every pytest run, e.g. -- --throughput-shapes "
                                            "128/128@4x16 --throughput-rounds 3")
    parser.add_argument("--engine", action=_Target, dest="targets", metavar="NAME=URL[,profile=P][,model=M]"
                        "[,api-key-env=VAR][,not-served=CAP[+CAP]]",
                        help="An engine to compare (repeatable; columns in command-line order)")
    parser.add_argument("--reference", action=_Target, dest="targets", metavar="NAME[:ttft_ms=..,tpot_ms=..]",
                        help="A built-in reference engine started for its turn, with this latency model (repeatable)")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="Where every run's files and the "
                        "comparison go")
    parser.add_argument("--phase", action="append", choices=list(PHASES), default=None,
                        help=f"Runs per engine (repeatable; default: {', '.join(DEFAULT_PHASES)})")
    parser.add_argument("--select", default=None, metavar="EXPR",
                        help="Marker expression ANDed with each phase's, e.g. 'text or thinking'")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="pytest-xdist workers for the functional phase (measurements always run alone)")
    parser.add_argument("--base", default=None, metavar="NAME", help="Ratios are to this engine (default: the first)")
    parser.add_argument("--seed", type=int, default=1, metavar="N",
                        help="--throughput-seed for every run, so every engine gets the same prompts (default: 1)")
    parser.add_argument("--quiet", action="store_true", help="Print one line per run instead of its output")
    parser.add_argument("--render-only", action="store_true",
                        help="Do not run anything: render DIR/comparison.json again")
    args = parser.parse_args(own)
    if args.render_only:
        return args, pytest_args
    targets: list[EngineSpec] = args.targets or []
    if len(targets) < 2:
        parser.error("name at least two engines (--engine NAME=URL, --reference NAME)")
    names = [t.name for t in targets]
    for name in names:
        if not _NAME.match(name):
            parser.error(f"engine name {name!r}: letters, digits, '.', '_' and '-' only (it names a directory)")
    if len(set(names)) != len(names):
        parser.error(f"engine names must differ: {', '.join(names)}")
    if args.base is not None and args.base not in names:
        parser.error(f"--base {args.base!r} is not one of the engines ({', '.join(names)})")
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers {args.workers} must be at least 1")
    for spec in targets:
        if spec.api_key_env and not os.environ.get(spec.api_key_env):
            parser.error(f"engine {spec.name}: environment variable {spec.api_key_env} (api-key-env) is not set")
    for arg in pytest_args:
        owned = [o for o in (*driver_set_options(), *DRIVER_SETS_OTHERS) if arg == o or arg.startswith(o + "=")]
        owned += [o for o in DRIVER_SETS_SHORT if arg.startswith(o)]
        if owned:
            parser.error(f"{owned[0]} after --: the driver sets it for each run (use --engine, --phase, --select, "
                         f"--workers, --seed or --out instead)")
    phases = args.phase or list(DEFAULT_PHASES)
    if "soak" in phases and not any(a == "--soak-minutes" or a.startswith("--soak-minutes=") for a in pytest_args):
        parser.error("--phase soak needs --soak-minutes N after --")
    args.phase = list(dict.fromkeys(phases))
    if "acceptance" in args.phase and len(args.phase) > 1:
        parser.error("--phase acceptance runs every check already: give it alone")
    return args, pytest_args


def phase_command(spec: EngineSpec, url: str, phase: str, folder: Path, *, select: str | None, workers: int | None,
                  seed: int, pytest_args: Sequence[str]) -> list[str]:
    """The pytest command of one engine's phase; everything but the engine is the same for every engine."""
    phase_expression = PHASES[phase]
    expression = (select if phase_expression is None else phase_expression if select is None
                  else f"({phase_expression}) and ({select})")
    command = suite_command([f"--engine-url={url}", *(["-m", expression] if expression else []), "-ra",
                             f"--gate-json={folder / 'gate.json'}", f"--run-bundle={folder / 'run-bundle'}",
                             f"--junitxml={folder / 'junit.xml'}",
                             f"--alluredir={folder / 'allure-results'}", f"--throughput-seed={seed}"],
                            report_defaults=False)
    if phase in ("throughput", "acceptance"):
        command.append(f"--throughput-out={folder / 'throughput.json'}")
    workers = spec.workers or workers
    if phase in ("functional", "acceptance") and workers:
        command += ["-n", str(workers)]
    # As many in flight as the engine serves best, in recall too: its ten field-extraction prompts.
    if phase != "functional" and workers and workers > 1 and \
            not any(arg.startswith("--recall-concurrency") for arg in pytest_args):
        command.append(f"--recall-concurrency={workers}")
    if spec.profile:
        command.append(f"--profile={spec.profile}")
    if spec.model:
        command.append(f"--model={spec.model}")
    if spec.not_served:
        # Per engine: one deployment may leave tools off on purpose while the other must serve them.
        command.append(f"--not-served={spec.not_served.replace('+', ',')}")
    return command + list(pytest_args)


def _environment(spec: EngineSpec) -> dict[str, str]:
    env = dict(os.environ)
    # Through the environment (the plugin reads $ENGINE_API_KEY), never argv: argv is visible to every local user.
    env.pop("ENGINE_API_KEY", None)
    if spec.api_key_env:
        env["ENGINE_API_KEY"] = os.environ[spec.api_key_env]
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class _Run:
    """One engine's phase: its command (for the manifest) and exit code."""

    engine: str
    phase: str
    command: list[str]
    exit_code: int | None = None
    seconds: float = 0.0


def _pump(stream: TextIO, log: TextIO, prefix: str, echo: bool) -> None:
    for line in stream:
        log.write(line)
        log.flush()
        if echo:
            sys.stdout.write(prefix + line)
            sys.stdout.flush()


def _run(command: list[str], env: dict[str, str], folder: Path, prefix: str, echo: bool) -> int:
    """Run one pytest, its output to ``pytest.log`` (and the terminal); on an interrupt, let it finish its report."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "pytest.log", "w", encoding="utf-8") as log:
        log.write("$ " + shlex.join(command) + "\n")
        # Same process group: Ctrl-C at the terminal reaches the run too, which then writes its verdict.
        # The caller's working directory: relative paths in the pytest arguments mean what they meant there.
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, text=True, errors="replace")
        pump = threading.Thread(target=_pump, args=(process.stdout, log, prefix, echo), daemon=True)
        pump.start()
        try:
            code = process.wait()
        except KeyboardInterrupt as interrupt:
            _wind_down(process, terminated=isinstance(interrupt, sigterm.Terminated))
            pump.join(timeout=5)
            raise
        pump.join(timeout=5)
    return code


def _wind_down(process: subprocess.Popen[str], *, terminated: bool) -> None:
    """Give an interrupted run the time to write its verdict; tell it again only if it does not end."""
    if terminated:
        process.send_signal(signal.SIGTERM)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            process.wait(timeout=INTERRUPT_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            process.send_signal(sig)
    process.wait()


def _start_reference(spec: EngineSpec, folder: Path) -> Any:
    from engine_acceptance.profiles.profile import load_model_profile
    from engine_acceptance.reference_engine.config import LatencyModel
    from engine_acceptance.reference_engine.launcher import start_reference_engine

    settings = dict(spec.reference or {})
    latency = LatencyModel(ttft_ms=settings.get("ttft_ms", LatencyModel.ttft_ms),
                           tpot_ms=settings.get("tpot_ms", LatencyModel.tpot_ms),
                           prefill_ms_per_1k_tokens=settings.get("prefill_ms_per_1k", 0.0),
                           batch_slowdown=settings.get("batch_slowdown", 0.0))
    defects = settings["inject"].split("+") if settings.get("inject") else ()
    return start_reference_engine(convention=settings.get("convention", "vllm"), latency=latency, defects=defects,
                                  stream_chunk_tokens=settings.get("stream_chunk_tokens"),
                                  max_model_len=load_model_profile("reference").context_length, log_dir=folder)


@dataclass
class _Manifest:
    """What was run, written to DIR/comparison.json so the tables can be rendered again."""

    engines: list[dict[str, Any]]
    phases: list[str]
    select: str | None
    workers: int | None
    seed: int
    pytest_args: list[str]
    base: str
    started_ms: int
    runs: list[dict[str, Any]] = field(default_factory=list)
    interrupted: str | None = None


def _run_all(args: argparse.Namespace, pytest_args: list[str]) -> tuple[_Manifest, int]:
    targets: list[EngineSpec] = args.targets
    out: Path = args.out.resolve()
    manifest = _Manifest(engines=[asdict(t) for t in targets], phases=args.phase, select=args.select,
                         workers=args.workers, seed=args.seed, pytest_args=pytest_args,
                         base=args.base or targets[0].name, started_ms=int(time.time() * 1000))
    status = 0
    previous = sigterm.install_sigterm_handler()
    try:
        for spec in targets:
            engine_dir = out / spec.name
            engine_dir.mkdir(parents=True, exist_ok=True)
            running = _start_reference(spec, engine_dir) if spec.reference is not None else None
            try:
                url = running.url if running is not None else spec.url
                for phase in args.phase:
                    folder = engine_dir / phase
                    command = phase_command(spec, url, phase, folder, select=args.select, workers=args.workers,
                                            seed=args.seed, pytest_args=pytest_args)
                    run = _Run(spec.name, phase, command)
                    manifest.runs.append(asdict(run))
                    print(f"engine-acceptance compare: {spec.name} {phase}: {spec.label}", flush=True)
                    started = time.monotonic()
                    code = _run(command, _environment(spec), folder, f"[{spec.name} {phase}] ", not args.quiet)
                    manifest.runs[-1].update(exit_code=code, seconds=round(time.monotonic() - started, 1))
                    print(f"engine-acceptance compare: {spec.name} {phase}: exit code {code} "
                          f"({folder / 'pytest.log'})", flush=True)
                    if code == USAGE_ERROR:
                        # The same arguments go to every run: the next would fail the same way.
                        print(f"engine-acceptance compare: bad pytest arguments, stopping; see "
                              f"{folder / 'pytest.log'}", file=sys.stderr)
                        return manifest, USAGE_ERROR
                    if code == ENGINE_UNAVAILABLE:
                        status = ENGINE_UNAVAILABLE
                        break
                    if code == INTERRUPTED:
                        raise KeyboardInterrupt(f"the {spec.name} {phase} run was interrupted")
            finally:
                if running is not None:
                    running.stop()
    except KeyboardInterrupt as interrupt:
        manifest.interrupted = str(interrupt) or type(interrupt).__name__
        return manifest, INTERRUPTED
    finally:
        sigterm.restore_sigterm_handler(previous)
    return manifest, status


def render(out: Path, manifest: dict[str, Any]) -> dict[str, Path]:
    """Read every engine's files under ``out`` and write the comparison; returns the files written."""
    specs = [EngineSpec(**engine) for engine in manifest["engines"]]
    exit_codes: dict[str, dict[str, int | None]] = {spec.name: {} for spec in specs}
    for run in manifest["runs"]:
        exit_codes[run["engine"]][run["phase"]] = run.get("exit_code")
    engines = [load_engine(spec.name, spec.label, out / spec.name, manifest["phases"], exit_codes[spec.name])
               for spec in specs]
    base = next(e for e in engines if e.name == manifest["base"])
    tables = build_tables(engines, base)
    request_set = [
        f"Same request set on every engine, one engine after the other: phases {', '.join(manifest['phases'])}"
        + (f", selection `{manifest['select']}`" if manifest.get("select") else ""),
        f"pytest arguments for every run: `{shlex.join(manifest['pytest_args']) or '(none)'}`; "
        f"--throughput-seed {manifest['seed']}"
        + (f"; functional phase with -n {manifest['workers']}" if manifest.get("workers") else "")
        + "".join(f"; {spec.name} with -n {spec.workers}" for spec in specs if spec.workers),
    ]
    if manifest.get("interrupted"):
        request_set.append(f"INTERRUPTED ({manifest['interrupted']}): the tables hold what ran before")
    markdown = render_markdown(engines, tables, base=base, request_set=request_set)
    csv_text = render_csv(tables)
    html_text = render_html(engines, tables, request_set=request_set)
    files = {"markdown": out / "comparison.md", "csv": out / "comparison.csv", "html": out / "comparison.html"}
    files["markdown"].write_text(markdown, encoding="utf-8")
    files["csv"].write_text(csv_text, encoding="utf-8")
    files["html"].write_text(html_text, encoding="utf-8")
    # The comparison's own Allure results: only the latest rendering.
    shutil.rmtree(out / "allure-results", ignore_errors=True)
    files["allure"] = write_allure_result(
        out / "allure-results", title=f"Engine comparison: {' vs '.join(e.name for e in engines)}",
        files={"comparison (Markdown)": (markdown, "text/markdown"), "comparison (CSV)": (csv_text, "text/csv"),
               "comparison (HTML)": (html_text, "text/html")},
        description_html=html_text, status="broken" if manifest.get("interrupted") else "passed",
        started_ms=manifest["started_ms"])
    return files


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args, pytest_args = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return USAGE_ERROR if exc.code == 2 else int(exc.code or 0)
    out: Path = args.out
    manifest_path = out / "comparison.json"
    if args.render_only:
        if not manifest_path.is_file():
            print(f"error: {manifest_path} does not exist: nothing to render", file=sys.stderr)
            return USAGE_ERROR
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        status = 0
    else:
        out.mkdir(parents=True, exist_ok=True)
        ran, status = _run_all(args, pytest_args)
        manifest = asdict(ran)
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if status == USAGE_ERROR:
            return status
    files = render(out, manifest)
    print(f"engine-acceptance compare: {files['markdown']} , {files['csv']} , {files['html']}")
    print(f"engine-acceptance compare: Allure result in {files['allure'].parent}")
    sys.stdout.write(files["markdown"].read_text(encoding="utf-8"))
    return status

