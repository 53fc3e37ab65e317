"""docker/: the Dockerfile, compose file, lock and Prometheus config agree with each other and code.

No Docker engine runs where these tests run, so nothing here builds or starts a container. Each
check asserts one relationship a wrong edit would break, and `test_check_catches` breaks each
relationship on purpose to show that its check fails.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from stream_ctx.settings import Settings, load_settings
from stream_ctx.shell.commands.run import SHUTDOWN_BOUND_S

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
# Importing every stream_ctx module in a child process takes about a second.
IMPORT_TIMEOUT_S = 120


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction, continuation lines joined, with the index of its stage."""

    keyword: str
    args: str
    stage: int

    def exec_form(self) -> list[str]:
        form: list[str] = json.loads(self.args)
        return form


@dataclass(frozen=True)
class DeployFiles:
    """The texts under test; `replace()` one of them to break a relationship."""

    dockerfile: str
    compose: str
    prometheus: str
    lock: str
    pyproject: str
    dockerignore: str
    license: str

    @classmethod
    def read(cls) -> DeployFiles:
        return cls(
            dockerfile=(DOCKER / "Dockerfile").read_text(),
            compose=(DOCKER / "compose.yaml").read_text(),
            prometheus=(DOCKER / "prometheus.yml").read_text(),
            lock=(DOCKER / "requirements.lock").read_text(),
            pyproject=(REPO / "pyproject.toml").read_text(),
            dockerignore=(REPO / ".dockerignore").read_text(),
            license=(REPO / "LICENSE").read_text(),
        )

    def instructions(self, keyword: str, *, final_stage: bool = True) -> list[Instruction]:
        found = [i for i in _parse_dockerfile(self.dockerfile) if i.keyword == keyword]
        last = max(i.stage for i in _parse_dockerfile(self.dockerfile))
        return [i for i in found if i.stage == last] if final_stage else found

    def services(self) -> dict[str, dict[str, Any]]:
        services: dict[str, dict[str, Any]] = yaml.safe_load(self.compose)["services"]
        return services

    def env(self, service: str) -> dict[str, str]:
        raw = self.services()[service].get("environment", {})
        pairs = (item.split("=", 1) for item in raw) if isinstance(raw, list) else raw.items()
        return {str(key): str(value) for key, value in pairs}

    def pins(self) -> dict[str, str]:
        lines = (line.strip() for line in self.lock.splitlines())
        pairs = (line.split("==") for line in lines if line and not line.startswith("#"))
        return {canonicalize_name(name): version for name, version in pairs}

    def config_path(self) -> Path:
        """The file compose mounts where the container's command reads its config."""
        target = _command(self)[_command(self).index("--config") + 1]
        volumes: list[str] = self.services()["stream-ctx"].get("volumes", [])
        for volume in volumes:
            source, mounted, *_ = volume.split(":")
            if mounted == target:
                return (DOCKER / source).resolve()
        raise AssertionError(f"no volume of stream-ctx is mounted at {target!r}")

    def settings(self) -> Settings:
        return load_settings(self.config_path(), environ=self.env("stream-ctx"))


def _parse_dockerfile(text: str) -> list[Instruction]:
    instructions: list[Instruction] = []
    pending, stage = "", -1
    for line in text.splitlines():
        if line.strip().startswith("#") or not (pending or line.strip()):
            continue  # Docker drops comment lines, also inside continuations.
        pending += line.rstrip().removesuffix("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            keyword, _, args = pending.strip().partition(" ")
            stage += keyword.upper() == "FROM"
            instructions.append(Instruction(keyword.upper(), args.strip(), stage))
            pending = ""
    return instructions


def _command(files: DeployFiles) -> list[str]:
    """What the stream-ctx container runs: compose's `command` if set, else the image's CMD."""
    override = files.services()["stream-ctx"].get("command")
    return list(override) if override else files.instructions("CMD")[-1].exec_form()


def _flags(words: list[str]) -> dict[str, list[str]]:
    """Options and the word after each (empty when it is another option): {"-r": ["x.lock"]}."""
    values: dict[str, list[str]] = {}
    for index, word in enumerate(words):
        if word.startswith("-"):
            follows = words[index + 1] if index + 1 < len(words) else ""
            values.setdefault(word, []).append("" if follows.startswith("-") else follows)
    return values


def _shell_commands(files: DeployFiles, *program: str, final_stage: bool = True) -> list[list[str]]:
    """The arguments of each `program` (e.g. "pip", "install") command in RUN instructions."""
    found = []
    for run in files.instructions("RUN", final_stage=final_stage):
        words = shlex.split(run.args)
        for start in (
            i for i in range(len(words)) if tuple(words[i : i + len(program)]) == program
        ):
            end = next((i for i in range(start, len(words)) if words[i] in ("&&", ";")), len(words))
            found.append(words[start + len(program) : end])
    return found


def _brokers(files: DeployFiles) -> dict[str, dict[str, str]]:
    """Compose services running a Kafka broker, by name, with their environment."""
    services = files.services()
    envs = {name: files.env(name) for name in services}
    return {n: e for n, e in envs.items() if "broker" in e.get("KAFKA_PROCESS_ROLES", "")}


def _listeners(value: str) -> dict[str, tuple[str, int]]:
    """`NAME://host:port,...` as {NAME: (host, port)}."""
    found = {}
    for entry in value.split(","):
        name, _, address = entry.strip().partition("://")
        host, _, port = address.rpartition(":")
        found[name] = (host, int(port))
    return found


def _seconds(duration: str) -> float:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    return sum(float(amount) * units[unit] for amount, unit in parts)


def _closure(requirements: Iterable[str], *, python: str) -> dict[str, list[SpecifierSet]]:
    """Installed distributions the requirements need on `python` ("3.11"), with every specifier
    put on each. Dependencies are read from the installed versions' metadata."""
    environment = {"extra": "", "python_version": python, "python_full_version": f"{python}.0"}
    needed: dict[str, list[SpecifierSet]] = {}
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        if requirement.marker and not requirement.marker.evaluate(environment):
            continue
        name = canonicalize_name(requirement.name)
        is_new = name not in needed
        needed.setdefault(name, []).append(requirement.specifier)
        if is_new:
            try:
                pending += [Requirement(t) for t in importlib.metadata.requires(name) or []]
            except importlib.metadata.PackageNotFoundError:
                continue  # An extra's tool not installed here; a missing runtime one fails below.
    return needed


def _image_python(files: DeployFiles) -> str:
    """The Python version ("3.11") of the final stage's `python:<version>-slim` base image."""
    base = files.instructions("FROM")[-1].args.split()[0]
    matched = re.fullmatch(r"python:(\d+\.\d+)-slim", base)
    assert matched, f"the final stage is based on {base!r}, not python:<major>.<minor>-slim"
    return matched[1]


_IMPORTED_DISTRIBUTIONS = """
import importlib, importlib.metadata, json, pkgutil, sys
before = set(sys.modules)
import stream_ctx
everything = [m.name for m in pkgutil.walk_packages(stream_ctx.__path__, "stream_ctx.")]
for name in sys.argv[1:] or everything:
    importlib.import_module(name)
owners = importlib.metadata.packages_distributions()
tops = {m.partition(".")[0] for m in set(sys.modules) - before} - {"stream_ctx"}
print(json.dumps(sorted({d for top in tops for d in owners.get(top, [])})))
"""


def _imported_distributions(*modules: str) -> set[str]:
    """Distributions loaded by importing `modules` (all of stream_ctx's if none) afresh."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED_DISTRIBUTIONS, *modules],
        capture_output=True,
        check=True,
        text=True,
        timeout=IMPORT_TIMEOUT_S,
    )
    return {canonicalize_name(name) for name in json.loads(done.stdout)}


@dataclass(frozen=True)
class CodeImports:
    """Distributions the code loads: all of them, and those `stream-ctx run` loads at start."""

    everything: frozenset[str]
    entry_point: frozenset[str]


@pytest.fixture(scope="module")
def code_imports() -> CodeImports:
    return CodeImports(
        frozenset(_imported_distributions()),
        frozenset(_imported_distributions("stream_ctx.shell.commands.cli")),
    )


def check_services(files: DeployFiles, code: CodeImports) -> None:
    services = files.services()
    assert {"kafka", "topics", "stream-ctx", "prometheus"} <= set(services)
    profiles = services["prometheus"].get("profiles")
    assert profiles == ["monitoring"], f"prometheus must be optional, has profiles {profiles}"
    default = [name for name, service in services.items() if "profiles" not in service]
    assert default == ["kafka", "topics", "stream-ctx"], f"`up` starts {default}"


def check_kraft_broker(files: DeployFiles, code: CodeImports) -> None:
    kafka = files.env("kafka")
    assert files.services()["kafka"]["image"].startswith("apache/kafka:")
    assert not any("ZOOKEEPER" in key for key in kafka), "KRaft mode needs no ZooKeeper"
    listeners = _listeners(kafka["KAFKA_LISTENERS"])
    controller = kafka["KAFKA_CONTROLLER_LISTENER_NAMES"]
    node, _, address = kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"].partition("@")
    assert node == kafka["KAFKA_NODE_ID"]
    assert address == f"kafka:{listeners[controller][1]}", "quorum voter is not the controller"
    protocols = {
        entry.partition(":")[0]
        for entry in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
    }
    assert protocols == set(listeners), f"listeners {set(listeners)}, protocols for {protocols}"


def check_bootstrap_reaches_kafka(files: DeployFiles, code: CodeImports) -> None:
    brokers = _brokers(files)
    for server in files.settings().kafka.servers:
        host, _, port = server.rpartition(":")
        assert host in brokers, f"bootstrap host {host!r} is not a broker service of {set(brokers)}"
        env = brokers[host]
        advertised = _listeners(env["KAFKA_ADVERTISED_LISTENERS"])
        named = [name for name, address in advertised.items() if address == (host, int(port))]
        assert named, f"no advertised listener of {host!r} is {server!r}: {advertised}"
        assert _listeners(env["KAFKA_LISTENERS"])[named[0]][1] == int(port)


def check_config_mount(files: DeployFiles, code: CodeImports) -> None:
    path = files.config_path()
    assert path.is_file(), f"the mounted config {path} does not exist"
    assert path.parent == REPO / "configs"
    assert _command(files)[0] == "run"
    assert files.settings().kafka.input_topics


def check_metrics_port(files: DeployFiles, code: CodeImports) -> None:
    port = files.settings().metrics.port
    assert port is not None, "the compose config must turn metrics on: `[metrics] port`"
    exposed = [i.args for i in files.instructions("EXPOSE")]
    assert exposed == [str(port)], f"the image exposes {exposed}, not the metrics port {port}"
    probe = files.instructions("HEALTHCHECK")[-1].args.rpartition("CMD ")[2]
    config = _command(files)[_command(files).index("--config") + 1]
    # `stream-ctx healthcheck` reads metrics.port from the config `run` reads: it follows it.
    expected = ["stream-ctx", "healthcheck", "--config", config]
    assert json.loads(probe) == expected, f"the HEALTHCHECK runs {probe}, not {expected}"
    published = [str(p).rpartition(":")[2] for p in files.services()["stream-ctx"]["ports"]]
    assert published == [str(port)], f"compose publishes container ports {published}, not {port}"
    jobs = yaml.safe_load(files.prometheus)["scrape_configs"]
    targets = [t for job in jobs for c in job["static_configs"] for t in c["targets"]]
    assert targets == [f"stream-ctx:{port}"], f"Prometheus scrapes {targets}"
    prometheus = files.services()["prometheus"]
    assert "./prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]


def _copies(files: DeployFiles) -> list[tuple[list[str], str]]:
    """(sources, destination) of each COPY from the build context (not --from a stage)."""
    found = []
    for copy in files.instructions("COPY", final_stage=False):
        words = shlex.split(copy.args)
        if not any(word.startswith("--from") for word in words):
            paths = [word for word in words if not word.startswith("--")]
            found.append((paths[:-1], paths[-1]))
    return found


def check_default_config(files: DeployFiles, code: CodeImports) -> None:
    config = _command(files)[_command(files).index("--config") + 1]
    sources = [src for srcs, dest in _copies(files) for src in srcs if dest == config]
    assert sources, f"the image has no default config at {config}: `docker run` alone fails"
    (source,) = sources
    assert source.startswith("configs/"), f"the default config {source} is not under configs/"
    settings = load_settings(REPO / source, environ={})
    exposed = [i.args for i in files.instructions("EXPOSE")]
    assert exposed == [str(settings.metrics.port)], f"{source} serves metrics elsewhere"
    assert settings.metrics.host == "0.0.0.0", f"{source} serves metrics on loopback only"  # noqa: S104


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore's patterns (Docker's rules: last match wins, ! re-includes)
    exclude `path` or a folder holding it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated, glob = pattern.startswith("!"), pattern.lstrip("!")
        for prefix in prefixes:
            if fnmatch.fnmatch(prefix, glob) or fnmatch.fnmatch(prefix, glob.removeprefix("**/")):
                excluded = not negated
    return excluded


def check_dockerignore(files: DeployFiles, code: CodeImports) -> None:
    lines = (line.strip() for line in files.dockerignore.splitlines())
    patterns = [line for line in lines if line and not line.startswith("#")]
    for heavy in (".venv", ".git", "stream_ctx/core/__pycache__"):
        assert _ignored(heavy, patterns), f"the build context would carry {heavy}"
    copied = [src for srcs, _ in _copies(files) for src in srcs]
    excluded = [src for src in copied if _ignored(src.rstrip("/"), patterns)]
    assert not excluded, f"the Dockerfile copies {excluded}, which .dockerignore excluded"


def check_license(files: DeployFiles, code: CodeImports) -> None:
    declared = tomllib.loads(files.pyproject)["project"]["license"]
    assert declared == "Apache-2.0", f"pyproject declares {declared!r}"
    head = " ".join(files.license.split()[:4])
    assert head == "Apache License Version 2.0,", f"LICENSE starts {head!r}, not Apache 2.0"
    assert "END OF TERMS AND CONDITIONS" in files.license, "LICENSE is not the full text"
    copied = [src for srcs, _ in _copies(files) for src in srcs]
    assert "LICENSE" in copied, "the wheel built in the image would lack LICENSE"


def check_topics_service(files: DeployFiles, code: CodeImports) -> None:
    topics = files.services()["topics"]
    words = [*topics["entrypoint"], *topics["command"]]
    assert words[0].endswith("/kafka-topics.sh")
    flags, settings = _flags(words), files.settings()
    created, read = flags["--topic"], settings.kafka.input_topics
    assert created == read, f"`topics` creates {created}, the config reads {read}"
    assert flags["--bootstrap-server"] == [",".join(settings.kafka.servers)]
    assert {"--create", "--if-not-exists", "--partitions"} <= set(flags)
    assert topics["image"] == files.services()["kafka"]["image"], "client tools match the broker"
    brokers = len(_brokers(files))
    replicas = {
        "topics --replication-factor": int(flags["--replication-factor"][0]),
        "state.replication_factor": settings.state.replication_factor,
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": int(
            files.env("kafka")["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"]
        ),
    }
    for what, count in replicas.items():
        assert count <= brokers, f"{what} = {count}, but compose runs {brokers} broker(s)"


def check_start_order(files: DeployFiles, code: CodeImports) -> None:
    services = files.services()
    assert "test" in services["kafka"]["healthcheck"]
    assert services["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    waits = services["stream-ctx"]["depends_on"]["topics"]["condition"]
    assert waits == "service_completed_successfully", f"stream-ctx waits for `topics` {waits}"
    grace = _seconds(services["stream-ctx"]["stop_grace_period"])
    assert grace > SHUTDOWN_BOUND_S, (
        f"Docker kills after {grace} s, before the {SHUTDOWN_BOUND_S} s stop"
    )


def check_image_build(files: DeployFiles, code: CodeImports) -> None:
    build = files.services()["stream-ctx"]["build"]
    context = (DOCKER / build["context"]).resolve()
    assert context == REPO, f"the build context is {context}, not the repository"
    assert (context / build["dockerfile"]).resolve() == DOCKER / "Dockerfile"
    bases = [i.args.split()[0] for i in files.instructions("FROM", final_stage=False)]
    assert len(set(bases)) == 1, f"base images {bases} differ: the wheel is built for the runtime"
    python = _image_python(files)
    supported = SpecifierSet(tomllib.loads(files.pyproject)["project"]["requires-python"])
    assert Version(python) in supported, f"the image runs Python {python}, outside {supported}"
    scripts = tomllib.loads(files.pyproject)["project"]["scripts"]
    assert files.instructions("ENTRYPOINT")[-1].exec_form() == ["stream-ctx"]
    assert "stream-ctx" in scripts


def check_runs_as_non_root(files: DeployFiles, code: CodeImports) -> None:
    users = files.instructions("USER")
    assert users, "the image runs as root: no USER instruction in the final stage"
    user = users[-1].args.partition(":")[0]
    assert user not in ("root", "0"), f"USER {users[-1].args} is root"
    created = {words[-1] for words in _shell_commands(files, "useradd")} | {
        uid for words in _shell_commands(files, "useradd") for uid in _flags(words).get("--uid", [])
    }
    assert user in created, f"USER {user} is not created by a useradd in the final stage: {created}"


def check_installs_the_lock(files: DeployFiles, code: CodeImports) -> None:
    installs = _shell_commands(files, "pip", "install")
    assert installs, "the final stage installs nothing with pip"
    locked = _flags(installs[0])["-r"] if "-r" in installs[0] else []
    assert locked, f"the first pip install is not `-r <lock>`: {installs[0]}"
    assert "--no-cache-dir" in installs[0]
    copies = [shlex.split(c.args) for c in files.instructions("COPY")]
    sources = [c[0] for c in copies if not c[0].startswith("--") and c[-1] == locked[0]]
    assert sources == ["docker/requirements.lock"], f"{locked[0]} is copied from {sources}"
    assert all("--no-deps" in i for i in installs[1:]), "stream-ctx must add no unlocked dependency"
    backend = tomllib.loads(files.pyproject)["build-system"]["requires"]
    pinned = {
        canonicalize_name(n): v
        for words in _shell_commands(files, "pip", "install", final_stage=False)
        for n, _, v in (w.partition("==") for w in words if "==" in w)
    }
    for text in backend:
        requirement = Requirement(text)
        version = pinned.get(canonicalize_name(requirement.name), "none")
        assert version in requirement.specifier, f"build backend {text!r} pinned to {version}"


def check_lock_pins_runtime(files: DeployFiles, code: CodeImports) -> None:
    pins, python = files.pins(), _image_python(files)
    unlocked = sorted(code.entry_point - set(pins))
    assert not unlocked, f"`stream-ctx run` imports unlocked {unlocked}"
    project = tomllib.loads(files.pyproject)["project"]
    optional = (r for extra in project["optional-dependencies"].values() for r in extra)
    extras = set(_closure(optional, python=python))
    imported = code.entry_point | (code.everything - extras)
    needed = _closure([*project["dependencies"], *imported], python=python)
    assert set(pins) == set(needed), (
        f"missing {sorted(set(needed) - set(pins))}, unneeded {sorted(set(pins) - set(needed))}"
    )
    for name, specifiers in needed.items():
        for specifier in specifiers:
            assert pins[name] in specifier, f"{name}=={pins[name]} is outside {specifier}"
    # Not asserted: pins == installed versions. CI installs the newest releases within range, and
    # a release must not fail the tests; the pins only have to satisfy every declared range.


Check = Callable[[DeployFiles, CodeImports], None]
CHECKS: list[Check] = [
    check_services,
    check_kraft_broker,
    check_bootstrap_reaches_kafka,
    check_config_mount,
    check_metrics_port,
    check_default_config,
    check_dockerignore,
    check_license,
    check_topics_service,
    check_start_order,
    check_image_build,
    check_runs_as_non_root,
    check_installs_the_lock,
    check_lock_pins_runtime,
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_deploy_files_agree(check: Check, code_imports: CodeImports) -> None:
    check(DeployFiles.read(), code_imports)


class Breakage(NamedTuple):
    """Every `old` replaced by `new` in one of the files must make `check` fail with `message`."""

    check: Check
    file: str
    old: str
    new: str
    message: str


BREAKAGES = [
    Breakage(check_services, "compose", 'profiles: ["monitoring"]', "profiles: []", "optional"),
    Breakage(check_kraft_broker, "compose", "1@kafka:9093", "1@kafka:9094", "not the controller"),
    Breakage(
        check_bootstrap_reaches_kafka, "compose", "L://kafka:", "L://broker:", "no advertised"
    ),
    Breakage(check_bootstrap_reaches_kafka, "compose", "  kafka:\n", "  broker:\n", "not a broker"),
    Breakage(check_config_mount, "compose", "s/compose.toml", "s/no.toml", "does not exist"),
    Breakage(check_config_mount, "dockerfile", '"/etc/stream-ctx/', '"/opt/', "no volume"),
    Breakage(check_metrics_port, "dockerfile", "EXPOSE 9464", "EXPOSE 9000", "exposes ['9000']"),
    Breakage(
        check_metrics_port,
        "dockerfile",
        '"healthcheck", "--config", "/etc',
        '"healthcheck", "--config", "/opt',
        "HEALTHCHECK",
    ),
    Breakage(
        check_default_config, "dockerfile", "toml /etc/stream-ctx/", "toml /opt/", "no default"
    ),
    Breakage(check_default_config, "dockerfile", "EXPOSE 9464", "EXPOSE 9000", "elsewhere"),
    Breakage(check_dockerignore, "dockerignore", ".venv\n", "", "would carry .venv"),
    Breakage(check_dockerignore, "dockerignore", ".git\n", ".git\nconfigs\n", "['configs/"),
    Breakage(check_license, "license", "Version 2.0", "Version 1.1", "not Apache 2.0"),
    Breakage(check_license, "license", "END OF TERMS", "", "not the full text"),
    Breakage(check_license, "dockerfile", "README.md LICENSE ./", "README.md ./", "lack LICENSE"),
    Breakage(check_metrics_port, "compose", '"9464:9464"', '"9464:9000"', "publishes"),
    Breakage(check_metrics_port, "prometheus", "stream-ctx:9464", "ctx:9464", "scrapes ['ctx:"),
    Breakage(check_topics_service, "compose", "- ctx.retrievals\n", "- ctx.in\n", "['ctx.in']"),
    Breakage(
        check_topics_service, "compose", 'factor\n      - "1"', 'factor\n      - "3"', "= 3, but"
    ),
    Breakage(check_start_order, "compose", "service_completed_succ", "service_start", "waits"),
    Breakage(check_start_order, "compose", "grace_period: 40s", "grace_period: 10s", "kills after"),
    Breakage(check_image_build, "compose", "context: ..", "context: .", "build context"),
    Breakage(check_runs_as_non_root, "dockerfile", "USER 10001:10001", "USER root", "is root"),
    Breakage(check_runs_as_non_root, "dockerfile", "USER 10001:10001", "USER 2", "not created"),
    Breakage(check_runs_as_non_root, "dockerfile", "USER 10001:10001\n", "", "no USER"),
    Breakage(check_installs_the_lock, "dockerfile", "--no-index --no-deps", "", "no unlocked"),
    Breakage(check_installs_the_lock, "dockerfile", "requirements.lock /", "x.lock /", "copied"),
    Breakage(check_installs_the_lock, "dockerfile", "tools==84.2.1", "tools==60.0", "backend"),
    Breakage(
        check_lock_pins_runtime,
        "pyproject",
        '"anyio>=4.7",',
        '"anyio>=4.7", "sortedcontainers>=2",',
        "missing ['sortedcontainers']",
    ),
    Breakage(check_lock_pins_runtime, "lock", "urllib3==2.8.0\n", "", "missing ['urllib3']"),
    Breakage(check_lock_pins_runtime, "lock", "tiktoken==0.14.0\n", "", "unlocked ['tiktoken']"),
    Breakage(
        check_lock_pins_runtime, "lock", "idna==", "pytest==9.2\nidna==", "unneeded ['pytest']"
    ),
    # Several floors of anyio (ours and the MCP SDK's >=4.7, another's >=4.10): any may be named.
    Breakage(check_lock_pins_runtime, "lock", "anyio==4.16.0", "anyio==4.0", "4.0 is outside >=4."),
    # Python 3.10 would need exceptiongroup (anyio), taskgroup and tomli (hypercorn) as well.
    Breakage(
        check_lock_pins_runtime,
        "dockerfile",
        "1-slim\n",
        "0-slim\n",
        "missing ['exceptiongroup', 'taskgroup', 'tomli']",
    ),
    Breakage(check_image_build, "dockerfile", "3.11-slim AS", "3.12-slim AS", "differ"),
    Breakage(check_image_build, "dockerfile", "3.11-slim", "3.10-slim", "outside >=3.11"),
]


@pytest.mark.parametrize(
    "breakage", BREAKAGES, ids=[f"{b.check.__name__}-{b.new.strip()[:30]}" for b in BREAKAGES]
)
def test_check_catches(breakage: Breakage, code_imports: CodeImports) -> None:
    files = DeployFiles.read()
    text: str = getattr(files, breakage.file)
    assert breakage.old in text, f"{breakage.old!r} is not in {breakage.file}: update BREAKAGES"
    broken = replace(files, **{breakage.file: text.replace(breakage.old, breakage.new)})
    with pytest.raises(AssertionError, match=re.escape(breakage.message)):
        breakage.check(broken, code_imports)


def test_docs_compose_commands_name_real_services_config_and_host_listener() -> None:
    page = REPO / "docs" / "operations" / "docker.md"
    files, readme = DeployFiles.read(), page.read_text(encoding="utf-8")
    execs = re.findall(
        r"^docker compose -f docker/compose.yaml exec (?:-T )?(\S+) (.*)$", readme, re.M
    )
    assert {"produce", "tail"} <= {words.split()[1] for _, words in execs}, execs
    config = _command(files)[_command(files).index("--config") + 1]
    for service, words in execs:
        assert service in files.services(), f"{page.name} execs into unknown service {service!r}"
        assert _flags(shlex.split(words))["--config"] == [config], words
    host_side = re.findall(
        r"^STREAM_CTX_KAFKA_BOOTSTRAP_SERVERS=(\S+) \S+ (produce|tail)", readme, re.M
    )
    assert {command for _, command in host_side} == {"produce", "tail"}, host_side
    advertised = _listeners(files.env("kafka")["KAFKA_ADVERTISED_LISTENERS"])
    published = {str(p).partition(":")[0] for p in files.services()["kafka"]["ports"]}
    for server, _ in host_side:
        host, _, port = server.rpartition(":")
        assert (host, int(port)) in advertised.values(), f"{server} is not an advertised listener"
        assert port in published, f"{server}: compose does not publish port {port}"
