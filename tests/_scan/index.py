"""A package index on 127.0.0.1 speaking the JSON simple API (PEP 691), for the fetch tests."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sdist(name: str, version: str, files: dict[str, str]) -> bytes:
    """An sdist (``name-version/...``) built in memory."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for relative, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{relative}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclass
class Index:
    """Projects -> {filename: bytes}; ``hashes`` overrides a file's announced sha256."""

    projects: dict[str, dict[str, bytes]] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""


@contextmanager
def serve(index: Index) -> Iterator[Index]:
    """Serve ``index`` on an ephemeral port of 127.0.0.1 until the block ends."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            index.requests.append(self.path)
            parts = [p for p in self.path.split("/") if p]
            if len(parts) == 2 and parts[0] == "simple" and parts[1] in index.projects:
                files = [
                    {
                        "filename": name,
                        "url": f"/files/{name}",
                        "hashes": {
                            "sha256": index.hashes.get(name, hashlib.sha256(data).hexdigest())
                        },
                    }
                    for name, data in index.projects[parts[1]].items()
                ]
                self._send(json.dumps({"name": parts[1], "files": files}).encode(), "json")
                return
            if len(parts) == 2 and parts[0] == "files":
                for project in index.projects.values():
                    if parts[1] in project:
                        self._send(project[parts[1]], "octet-stream")
                        return
            self.send_error(404)

        def _send(self, body: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", f"application/{kind}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the tests read ``index.requests``."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    index.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
