"""Podman for the image tests: installed from Debian when missing, run daemonless with its configuration and
storage under ~/.cache/logway-podman (or $LOGWAY_PODMAN_CACHE), and a Debian bookworm base image (debootstrap +
`podman import`) built once and kept there, because no image registry is reachable here (see docker/README.md).
The pipeline's base adds Java to that base image with apt-get in a `podman build` (one debootstrap, not two)."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.packaging.source_tree import copy_source

REPO = Path(__file__).resolve().parents[2]
TOOLS = {"podman": "podman", "buildah": "buildah", "podman-compose": "podman-compose", "runc": "runc",
         "debootstrap": "debootstrap", "fuse-overlayfs": "fuse-overlayfs", "slirp4netns": "slirp4netns"}
# LOGWAY_PODMAN_CACHE: another cache directory (e.g. a fresh one to time a cold run without losing the warm one).
CACHE = Path(os.environ.get("LOGWAY_PODMAN_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "logway-podman")
BASE_IMAGE = "localhost/logway-base:bookworm"
# debootstrap's minimal Debian plus Python: the same Python 3.11 (cp311 ABI) and glibc as the host's wheels.
BASE_PACKAGES = "python3,python3-venv"
# The pipeline image's base adds Java 17 for Spark (PySpark 4.2 needs Java 17 or later) to BASE_IMAGE with apt-get
# (a layer of about 210 MB, cached like the base), rather than a second debootstrap.
JRE_BASE_IMAGE = "localhost/logway-base:bookworm-jre17"
JRE_CONTAINERFILE = f"""\
FROM {BASE_IMAGE}
RUN mkdir -p /usr/share/man/man1 \\
    && apt-get update -qq \\
    && apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless \\
    && apt-get clean \\
    && rm -rf /var/lib/apt/lists/* /usr/share/doc /usr/share/man /usr/share/info /usr/share/locale
"""
# What the base image does not need at run time (apt's package cache and lists, documentation, translations).
TRIM = ("var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale")

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""


def run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 600, check: bool = True,
        **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def install_tools() -> None:
    """apt-get install what is missing (as compat_tests/setup.sh installs kcat); skip only without apt."""
    missing = [pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None
               and not Path("/usr/sbin", tool).exists() and not Path("/usr/bin", tool).exists()]
    if not missing:
        return
    if shutil.which("apt-get") is None:
        pytest.skip(f"needs {', '.join(missing)} and there is no apt-get to install them")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update", "-qq"], env)
    run(["apt-get", "install", "-y", "-qq", *missing], env)


def debian_mirror() -> str:
    """The Debian mirror apt is configured with (deb822 sources or sources.list)."""
    for path in sorted(Path("/etc/apt").glob("sources.list.d/*.sources")) + [Path("/etc/apt/sources.list")]:
        text = path.read_text(errors="replace") if path.is_file() else ""
        for uris, suites in re.findall(r"^URIs:\s*(\S+)\s*\nSuites:\s*([^\n]+)", text, re.M):
            if "bookworm" in suites.split() and "/debian" in uris and "security" not in uris:
                return uris
        for uri in re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)/?\s+bookworm\s", text, re.M):
            return uri
    return "http://deb.debian.org/debian"


@dataclass
class Podman:
    """podman with this test's configuration; remembers what it created so teardown removes only that."""

    env: dict[str, str]
    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)

    def __call__(self, *args: str, check: bool = True, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
        return run(["podman", *args], self.env, timeout=timeout, check=check, **kwargs)

    def image_exists(self, name: str) -> bool:
        return self("image", "exists", name, check=False).returncode == 0

    def ensure_base(self, name: str, packages: str) -> float:
        """Build the debootstrap base image unless cached; seconds spent (0 when cached). A file lock makes
        concurrent test runs build it once."""
        with open(CACHE / "base.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.image_exists(name):
                return 0.0
            started = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="logway-rootfs-", dir=CACHE) as tmp:
                rootfs = Path(tmp) / "rootfs"
                run(["debootstrap", "--variant=minbase", f"--include={packages}", "bookworm", str(rootfs),
                     debian_mirror()], timeout=1200)
                for sub in TRIM:
                    shutil.rmtree(rootfs / sub, ignore_errors=True)
                tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
                run(["podman", "import", "--change", "CMD=/bin/bash", "-", name], self.env, stdin=tar.stdout)
                tar.wait()
            return time.monotonic() - started

    def ensure_jre_base(self) -> float:
        """JRE_BASE_IMAGE (BASE_IMAGE + Java 17 from Debian) unless cached; seconds spent on both bases."""
        seconds = self.ensure_base(BASE_IMAGE, BASE_PACKAGES)
        with open(CACHE / "base.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.image_exists(JRE_BASE_IMAGE):
                return seconds
            started = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="logway-jre-", dir=CACHE) as context:
                self("build", "--pull=never", "--layers=false", "--format", "docker", "--tag", JRE_BASE_IMAGE,
                     "--file", "-", context, input=JRE_CONTAINERFILE, timeout=1200)
            return seconds + time.monotonic() - started

    def cleanup(self) -> None:
        for cid in reversed(self.containers):
            self("rm", "--force", "--time", "5", cid, check=False)
        for volume in self.volumes:
            self("volume", "rm", "--force", volume, check=False)
        for network in self.networks:
            self("network", "rm", "--force", network, check=False)
        for image in self.images:
            self("rmi", "--force", image, check=False)


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    install_tools()
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "containers.conf").write_text(CONTAINERS_CONF)
    (CACHE / "storage.conf").write_text(
        f'[storage]\ndriver = "overlay"\ngraphroot = "{CACHE / "storage"}"\nrunroot = "{CACHE / "run"}"\n')
    env = {**os.environ, "CONTAINERS_CONF": str(CACHE / "containers.conf"),
           "CONTAINERS_STORAGE_CONF": str(CACHE / "storage.conf")}
    tool = Podman(env)
    try:
        yield tool
    finally:
        tool.cleanup()


@dataclass
class Image:
    name: str
    build_seconds: float
    base_seconds: float


def build_image(podman: Podman, context: Path, extra: str, dockerfile: str, base: str, base_seconds: float) -> Image:
    """A wheelhouse of Logway[extra] built here on the host, then docker/<dockerfile> on the given base image."""
    assert sys.version_info[:2] == (3, 11), "the wheels are built here for the image's Python 3.11 (bookworm's)"
    started = time.monotonic()
    source = copy_source(context / "source")  # not the tree itself: see tests/packaging/source_tree.py
    run([sys.executable, "-m", "pip", "wheel", "--quiet", f"{source}{extra}", "--wheel-dir", str(context / "wheelhouse")])
    name = f"localhost/logway-test-{dockerfile.split('.')[0].lower()}:{uuid.uuid4().hex[:8]}"
    podman.images.append(name)
    podman("build", "--pull=never", "--layers=false", "--format", "docker", "--build-arg", f"BASE_IMAGE={base}",
           "--tag", name, "--file", str(REPO / "docker" / dockerfile), str(context), timeout=1800)
    return Image(name, time.monotonic() - started, base_seconds)


@pytest.fixture(scope="session")
def broker_image(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> Image:
    """docker/Dockerfile built from a wheelhouse of Logway and its dependencies."""
    base_seconds = podman.ensure_base(BASE_IMAGE, BASE_PACKAGES)
    return build_image(podman, tmp_path_factory.mktemp("broker-context"), "", "Dockerfile", BASE_IMAGE, base_seconds)


@pytest.fixture(scope="session")
def pipeline_image(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> Image:
    """docker/pipeline.Dockerfile: Logway[spark] (PySpark, pyarrow) on the base with Java 17."""
    base_seconds = podman.ensure_jre_base()
    return build_image(podman, tmp_path_factory.mktemp("pipeline-context"), "[spark]", "pipeline.Dockerfile",
                       JRE_BASE_IMAGE, base_seconds)
