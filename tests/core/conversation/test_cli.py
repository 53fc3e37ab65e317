"""`stream-ctx replay`: one bundle per finalize, bad lines reported, TOML config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.codec import decode_event, encode_bundle
from stream_ctx.core.wire.events import Finalize
from stream_ctx.shell.commands.cli import main
from tests.factories import T0

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "events.jsonl"
STREAM_CTX = Path(sys.executable).parent / "stream-ctx"


@pytest.fixture(autouse=True)
def _no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings read STREAM_CTX_* variables; the tests must not depend on the caller's."""
    for name in list(os.environ):
        if name.startswith("STREAM_CTX_"):
            monkeypatch.delenv(name)


def _replay(capsysbinary: pytest.CaptureFixture[bytes], *args: str) -> tuple[int, bytes, str]:
    status = main(["replay", *args])
    out, err = capsysbinary.readouterr()
    return status, out, err.decode()


def _bundles(out: bytes) -> list[Bundle]:
    return [msgspec.json.decode(line, type=Bundle) for line in out.splitlines()]


def _finalizes(path: Path) -> int:
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    return sum(isinstance(decode_event(line), Finalize) for line in lines)


def test_cli_replay_sample_gives_one_bundle_per_finalize(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    status, out, err = _replay(capsysbinary, str(SAMPLE))
    assert (status, err) == (0, "")
    assert out.endswith(b"\n")
    bundles = _bundles(out)
    assert len(bundles) == _finalizes(SAMPLE) > 0
    for bundle in bundles:
        assert bundle.bundle_id == f"{bundle.conversation_id}:{bundle.seq}"
        assert bundle.stats.tokenizer == "cl100k_base"


def test_cli_replay_output_is_the_processors_bundles(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    _, out, _ = _replay(capsysbinary, str(SAMPLE))
    processor = ContextProcessor(BundleConfig())
    expected = b""
    for number, line in enumerate(SAMPLE.read_bytes().splitlines(keepends=True), start=1):
        if line.strip():
            bundle = processor.apply(decode_event(line), position=number)
            if bundle is not None:
                expected += encode_bundle(bundle) + b"\n"
    assert out == expected


def _event(kind: str, **fields: object) -> str:
    return json.dumps({"type": kind, "conversation_id": "c-1", "event_id": "e", "ts": T0} | fields)


_GOOD_ITEM = {"id": "a", "kind": "chunk", "salience": 0.9, "content": "kept"}


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        (_event("retrieval", items=[_GOOD_ITEM | {"id": "b", "salience": 7}]), "salience"),
        ("not json at all", "JSON"),
        ('{"type":"nope",', ""),
        ("[1, 2", ""),
    ],
)
def test_cli_replay_reports_bad_line_and_processes_the_rest(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes], bad_line: str, reason: str
) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(
        "\n".join(
            [
                _event("retrieval", items=[_GOOD_ITEM]),
                bad_line,
                _event("finalize", ts=T0 + 1, request_id="r1"),
                "",
                _event("finalize", ts=T0 + 2, request_id="r2"),
            ]
        )
        + "\n"
    )
    status, out, err = _replay(capsysbinary, str(events))
    assert status != 0
    assert f"{events}:2:" in err
    assert reason in err
    assert f"{events}:1:" not in err
    assert f"{events}:3:" not in err
    bundles = _bundles(out)
    assert [(b.request_id, [i.id for i in b.items]) for b in bundles] == [
        ("r1", ["a"]),
        ("r2", ["a"]),
    ]


def test_cli_replay_accepts_crlf_lines(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    events = tmp_path / "events.jsonl"
    events.write_bytes(SAMPLE.read_bytes().replace(b"\n", b"\r\n"))
    status, out, err = _replay(capsysbinary, str(events))
    assert (status, err) == (0, "")
    assert len(_bundles(out)) == _finalizes(SAMPLE)


def test_cli_replay_with_preset_config(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config = tmp_path / "replay.toml"
    config.write_text('[bundle]\npreset = "token_efficient"\n')
    status, out, _ = _replay(capsysbinary, "--config", str(config), str(SAMPLE))
    assert status == 0
    bundles = _bundles(out)
    assert len(bundles) == _finalizes(SAMPLE)
    for bundle in bundles:
        assert bundle.stats.max_items == 10
        assert len(bundle.items) <= 10
        assert all(item.salience >= 0.5 for item in bundle.items)


def test_cli_replay_with_preset_and_override(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config = tmp_path / "replay.toml"
    config.write_text('[bundle]\npreset = "comprehensive"\nmax_items = 3\norder = "stable"\n')
    status, out, _ = _replay(capsysbinary, "--config", str(config), str(SAMPLE))
    assert status == 0
    for bundle in _bundles(out):
        assert (bundle.stats.max_items, bundle.order) == (3, "stable")
        assert len(bundle.items) <= 3


def test_cli_replay_with_invalid_config_names_the_key(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config = tmp_path / "replay.toml"
    config.write_text("[bundle]\nmax_items = 0\n")
    status, out, err = _replay(capsysbinary, "--config", str(config), str(SAMPLE))
    assert status != 0
    assert out == b""
    assert "bundle.max_items" in err


def test_console_script_reads_stdin_and_matches_main(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    _, expected, _ = _replay(capsysbinary, str(SAMPLE))
    done = subprocess.run(
        [str(STREAM_CTX), "replay", "-"],
        input=SAMPLE.read_bytes(),
        capture_output=True,
        check=False,
        timeout=60,  # a cold interpreter plus tokenizer load takes ~2 s; this is a hang guard
        env={"PATH": str(STREAM_CTX.parent)},
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == expected
