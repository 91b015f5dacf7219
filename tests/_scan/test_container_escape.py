"""A container made to escape to its host through the Docker daemon
(caplet._scan._container_escape, CPL-THR-028).

The attack is tune sample b15-ot-docker-sock-escape (a privileged container with the
host's ``/`` mounted, created by hand over ``/var/run/docker.sock``) and the Docker SDK's
spellings of the same: clean on main (recall16). The near misses: containers that ask
for one way out at most (Docker-in-Docker, a node exporter reading ``/`` read-only in the
host's process namespace, a database with a port), and a pod specification that does
not talk to the Docker daemon.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package

SAMPLE = (
    Path(__file__).resolve().parents[2]
    / "benchmarks/malware/tune/b15-ot-docker-sock-escape/ci_docker_helper/__init__.py"
)

ESCAPES = [
    SAMPLE.read_text(encoding="utf-8"),
    """
    import docker

    client = docker.from_env()
    client.containers.run("alpine", "chroot /h sh -c id", privileged=True,
                          volumes={"/": {"bind": "/h", "mode": "rw"}}, detach=True)
    """,
    """
    from docker import DockerClient

    c = DockerClient(base_url="unix://var/run/docker.sock")
    c.containers.create("alpine", "nsenter -t 1 -m sh", pid_mode="host", cap_add=["SYS_ADMIN"])
    """,
    """
    import docker

    api = docker.APIClient()
    host = api.create_host_config(binds=["/:/host:rw"], privileged=True)
    api.start(api.create_container("alpine", "sh", host_config=host))
    """,
    """
    import docker
    from docker.types import Mount

    docker.from_env().containers.run(
        "alpine", mounts=[Mount("/h", "/", type="bind")], pid_mode="host"
    )
    """,
    """
    import requests_unixsocket

    URL = "http+unix://%2Fvar%2Frun%2Fdocker.sock/containers/create"
    spec = {"Image": "alpine", "HostConfig": {"Mounts": [{"Type": "bind", "Source": "/",
            "Target": "/h"}], "CapAdd": ["ALL"]}}
    requests_unixsocket.Session().post(URL, json=spec)
    """,
    """
    import aiodocker

    async def go():
        await aiodocker.Docker().containers.run(config={"Image": "alpine",
            "HostConfig": {"Privileged": True, "PidMode": "host"}})
    """,
]


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize("source", ESCAPES)
def test_a_container_created_with_two_ways_out_is_a_host_escape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-028")


def test_the_sample_names_its_ways_out() -> None:
    findings = scan_source(SAMPLE.read_text(encoding="utf-8"), "m.py", mode=ScanMode.PACKAGE)
    assert [f.message for f in findings if f.rule_id == "CPL-THR-028"] == [
        "a container (privileged, the host's / mounted) creates a container that escapes to "
        "its host through the Docker daemon; remove the container; a package never asks the "
        "Docker daemon for the host"
    ]


@pytest.mark.parametrize(
    "source",
    [
        # Docker-in-Docker for a CI job: privileged, nothing of the host mounted
        """
        import docker
        docker.from_env().containers.run("docker:dind", privileged=True, detach=True)
        """,
        # a node exporter: the host's / read-only, in the host's process namespace
        """
        import docker
        docker.from_env().containers.run("prom/node-exporter", pid_mode="host",
            volumes={"/": {"bind": "/host", "mode": "ro,rslave"}}, detach=True)
        """,
        """
        import json, socket
        BODY = {"Image": "exporter", "HostConfig": {"Binds": ["/:/host:ro"], "PidMode": "host"}}
        s = socket.socket(socket.AF_UNIX)
        s.connect("/var/run/docker.sock")
        s.sendall(json.dumps(BODY).encode())
        """,
        # a project folder mounted into a privileged build container
        """
        import docker
        docker.from_env().containers.run("builder", privileged=True,
            volumes=["/src/app:/app"], pid_mode="container:db")
        """,
        # a pod's specification for Kubernetes: no Docker daemon in this file
        """
        import yaml
        POD = {"securityContext": {"privileged": True}, "PidMode": "host",
               "volumes": [{"hostPath": {"path": "/"}}]}
        print(yaml.safe_dump(POD))
        """,
    ],
)
def test_a_container_with_one_way_out_at_most_is_not_an_escape(source: str) -> None:
    assert "CPL-THR-028" not in danger(source)


# -- recall17: the same escape given as a command line -------------------------------------

COMMAND_ESCAPES = [
    'import subprocess\nsubprocess.run(["docker", "run", "--rm", "--privileged", "-v", "/:/h",'
    ' "alpine", "chroot", "/h", "sh", "-c", "id"])\n',
    'import os\nos.system("docker run -d --pid=host --cap-add=SYS_ADMIN alpine nsenter -t 1 sh")\n',
    'import subprocess\nsubprocess.Popen("podman create --mount type=bind,source=/,target=/h'
    ' --privileged alpine", shell=True)\n',
    'import subprocess\nsubprocess.call(["sh", "-c", "docker run --privileged --volume=/:/host'
    ' alpine chroot /host"])\n',
]


@pytest.mark.parametrize("source", COMMAND_ESCAPES)
def test_a_container_started_by_a_command_line_with_two_ways_out_is_a_host_escape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-028" in danger(source)
    findings = scan_source(source, "pkg/__init__.py", mode=ScanMode.PLUGIN)
    assert "CPL-THR-028" in {f.rule_id for f in findings if f.severity is Severity.DANGER}
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-028")


@pytest.mark.parametrize(
    "source",
    [
        # Docker-in-Docker, a read-only node exporter, a project folder in a build
        'import subprocess\nsubprocess.run(["docker", "run", "--privileged", "-d", "dind"])\n',
        'import subprocess\nsubprocess.run(["docker", "run", "--pid=host", "-v",'
        ' "/:/host:ro,rslave", "prom/node-exporter"])\n',
        'import os\nos.system("docker run --privileged -v /src/app:/app builder make")\n',
        # the flags after the image are the container's command's, not Docker's
        'import subprocess\nsubprocess.run(["docker", "run", "--rm", "tool", "--privileged",'
        ' "-v", "/:/h"])\n',
    ],
)
def test_a_command_line_container_with_one_way_out_at_most_is_not_an_escape(source: str) -> None:
    assert "CPL-THR-028" not in danger(source)
