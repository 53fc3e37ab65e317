"""Logs: every line through our formatter (JSON under --log-json, the libraries' and the final
error too), repeated warnings counted instead of printed, a start line, --log-level, --version."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import stream_ctx
from stream_ctx.shell.commands.logs import JsonFormatter, RateLimit

STREAM_CTX = Path(sys.executable).parent / "stream-ctx"
# A refused connection fails the first metadata call at once; a minute bounds a loaded runner.
CLI_TIMEOUT_S = 60


def _record(message: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("aiokafka", level, __file__, 1, message, None, None)


def test_rate_limit_counts_repeats_and_reports_them_after_the_window() -> None:
    now = [0.0]
    limit = RateLimit(window_s=10.0, burst=3, clock=lambda: now[0])
    passed = [limit.filter(_record("broker %s down")) for _ in range(7)]
    assert passed == [True, True, True, False, False, False, False]
    now[0] = 10.5
    record = _record("broker %s down")
    assert limit.filter(record)
    assert record.suppressed == 4  # type: ignore[attr-defined]
    assert record.msg == "broker %s down [4 more like this not shown in the last 10 s]"


def test_rate_limit_keeps_distinct_messages_and_info_lines() -> None:
    limit = RateLimit(window_s=10.0, burst=1, clock=lambda: 0.0)
    assert all(limit.filter(_record(f"error {n}")) for n in range(5))
    assert all(limit.filter(_record("progress", logging.INFO)) for _ in range(5))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _stream_ctx(*args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_CTX_")}
    return subprocess.run(
        [str(STREAM_CTX), *args],
        capture_output=True,
        text=True,
        env=clean | environ,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def test_log_json_makes_every_line_json_including_aiokafka_and_the_error() -> None:
    servers = f"127.0.0.1:{_closed_port()}"
    done = _stream_ctx("run", "--log-json", "--bootstrap-servers", servers, "--group-id", "g-7")
    assert done.returncode == 2
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    start, *_, last = lines
    assert start["logger"] == "stream_ctx.shell.commands.run"
    assert start["message"].startswith("starting stream-ctx ")
    assert " (compiled core): " in start["message"]
    assert (start["brokers"], start["group_id"]) == ([servers], "g-7")
    assert start["input_topics"] == ["ctx.retrievals"]
    assert "config: built-in defaults + --bootstrap-servers + --group-id" in start["message"]
    assert any(line["logger"].startswith("aiokafka") for line in lines)
    assert (last["level"], last["error"]) == ("ERROR", "BrokerError")
    assert servers in last["message"]


def test_log_level_warning_hides_the_start_line() -> None:
    servers = f"127.0.0.1:{_closed_port()}"
    done = _stream_ctx("run", "--log-level", "WARNING", "--bootstrap-servers", servers)
    assert done.returncode == 2
    assert "starting stream-ctx" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("stream-ctx: BrokerError: ")


@pytest.mark.parametrize("port", ["busy", "99999"])
def test_bad_or_busy_metrics_port_is_one_line_and_exit_2(port: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        number = str(taken.getsockname()[1]) if port == "busy" else port
        done = _stream_ctx(
            "run",
            "--log-level",
            "WARNING",
            STREAM_CTX_METRICS_PORT=number,
            STREAM_CTX_METRICS_HOST="127.0.0.1",
            STREAM_CTX_KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{_closed_port()}",
        )
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("stream-ctx: ConfigError: `metrics.port` ")
    assert number in done.stderr


def test_version_prints_the_package_version_and_the_core_it_runs() -> None:
    done = _stream_ctx("--version")
    assert (done.returncode, done.stdout) == (
        0,
        f"stream-ctx {importlib.metadata.version('stream-ctx')} (compiled core)\n",
    )


def test_json_formatter_writes_any_extra_value() -> None:
    record = _record("sent %d", logging.INFO)
    record.args = (3,)
    record.partition = object()
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "sent 3"
    assert line["partition"].startswith("<object object at ")


def test_without_the_compiled_core_run_says_so_once_and_goes_on(tmp_path: Path) -> None:
    # An interpreter whose import of the compiled module fails, as an install built without a
    # C++ compiler.
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nsys.modules['stream_ctx.core.text.compiled'] = None\n"
    )
    servers = f"127.0.0.1:{_closed_port()}"
    done = _stream_ctx("run", "--bootstrap-servers", servers, PYTHONPATH=str(tmp_path))
    assert done.returncode == 2  # the closed port, as with the compiled core
    lines = done.stderr.splitlines()
    assert any("starting stream-ctx" in line and "(python core)" in line for line in lines)
    missing = [line for line in lines if "running the Python core" in line]
    assert len(missing) == 1
    assert "compiled core (stream_ctx.core.text.compiled) is not built" in missing[0]
    version = _stream_ctx("--version", PYTHONPATH=str(tmp_path))
    assert version.stdout.strip().endswith("(python core)")


def test_every_module_logs_under_its_own_name() -> None:
    """`logging.getLogger(__name__)`: a log line says which module wrote it. The one exception
    configures the package's logger, the parent of them all."""
    package = Path(stream_ctx.__file__).parent
    named: list[str] = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "logging.getLogger":
                named += [f"{path.relative_to(package)}: {ast.unparse(a)}" for a in node.args]
    others = [n for n in named if not n.endswith(": __name__")]
    assert others == ["shell/commands/logs.py: 'stream_ctx'"]
    assert len(named) > 10
