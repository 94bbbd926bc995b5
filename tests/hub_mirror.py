"""A loopback mirror of the Hugging Face Hub for dataset repositories, the way a Hub mirror serves one: the
read routes `huggingface_hub` uses to list and download a revision (`/api/datasets/R/revision/REV`,
`/datasets/R/resolve/REV/PATH`) and the write routes of a commit (`/api/repos/create`, `…/preupload/REV`,
`…/commit/REV`, every file sent inline). `huggingface_hub` is pointed at it with HF_ENDPOINT, so the lab's own
calls (HfApi.dataset_info, hf_hub_download, create_repo, upload_folder) run unchanged, over real HTTP.
Knobs let a test make it hostile: list files under other names or sizes, swap a body."""
from __future__ import annotations

import base64
import hashlib
import http.server
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator
from urllib.parse import unquote, urlsplit

import yaml

from tests.helpers_servers import http_on_loopback


@dataclass
class Repo:
    files: dict[str, bytes] = field(default_factory=dict)
    commits: int = 0

    @property
    def sha(self) -> str:
        digest = hashlib.sha1(json.dumps(sorted((p, hashlib.sha1(b).hexdigest()) for p, b in self.files.items()))
                              .encode()).hexdigest()
        return digest


@dataclass
class MirrorState:
    repos: dict[str, Repo] = field(default_factory=dict)
    listed_sizes: dict[str, int] = field(default_factory=dict)  # path -> the size the listing claims
    extra_listing: list[dict] = field(default_factory=list)     # siblings listed that are not files
    requests: list[tuple[str, str]] = field(default_factory=list)
    tokens: list[str | None] = field(default_factory=list)      # the Authorization header of each write


def _split(path: str) -> list[str]:
    return [unquote(p) for p in urlsplit(path).path.split("/") if p]


def _handler(state: MirrorState):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, code: int, body: bytes = b"", ctype: str = "application/json", headers: dict | None = None,
                  head: bool = False) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _json(self, code: int, data: object) -> None:
            self._send(code, json.dumps(data).encode())

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _repo(self, parts: list[str]) -> tuple[str, Repo | None]:
            repo_id = "/".join(parts[:2])
            return repo_id, state.repos.get(repo_id)

        def _info(self, repo_id: str, repo: Repo) -> None:
            siblings = [{"rfilename": p, "size": state.listed_sizes.get(p, len(b)),
                         "blobId": hashlib.sha1(b).hexdigest()} for p, b in sorted(repo.files.items())]
            self._json(200, {"id": repo_id, "sha": repo.sha, "private": False, "siblings": siblings + state.extra_listing,
                             "tags": [], "downloads": 0, "likes": 0, "cardData": {}})

        def _resolve(self, parts: list[str], head: bool) -> None:
            repo_id, repo = self._repo(parts[1:3])
            path = "/".join(parts[5:])
            if repo is None or path not in repo.files:
                self._send(404, b'{"error": "Entry not found"}', headers={"X-Error-Code": "EntryNotFound"}, head=head)
                return
            body = repo.files[path]
            self._send(200, body, "application/octet-stream",
                       {"X-Repo-Commit": repo.sha, "ETag": f'"{hashlib.sha1(body).hexdigest()}"'}, head=head)

        def _get(self, head: bool) -> None:
            parts = _split(self.path)
            state.requests.append(("HEAD" if head else "GET", self.path))
            if parts[:2] == ["api", "datasets"] and len(parts) >= 4:
                repo_id, repo = self._repo(parts[2:4])
                if repo is None:
                    self._send(404, b'{"error": "Repository not found"}', headers={"X-Error-Code": "RepoNotFound"})
                    return
                self._info(repo_id, repo)
                return
            if parts[:1] == ["datasets"] and len(parts) >= 6 and parts[3] == "resolve":
                self._resolve(parts, head)
                return
            self._send(404, b'{"error": "not served by this mirror"}')

        def do_GET(self) -> None:  # noqa: N802
            self._get(head=False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._get(head=True)

        def do_POST(self) -> None:  # noqa: N802
            parts = _split(self.path)
            state.requests.append(("POST", self.path))
            body = self._body()
            if parts == ["api", "repos", "create"]:
                state.tokens.append(self.headers.get("Authorization"))
                data = json.loads(body)
                repo_id = f"{data.get('organization') or 'user'}/{data['name']}"
                state.repos.setdefault(repo_id, Repo())
                self._json(200, {"url": f"http://{self.headers['Host']}/datasets/{repo_id}", "name": repo_id})
                return
            if parts == ["api", "validate-yaml"]:  # the card's YAML header: a mapping, else 400 as the Hub answers
                content = json.loads(body).get("content", "")
                head = content.split("---", 2)[1] if content.startswith("---") and content.count("---") >= 2 else ""
                try:
                    ok = isinstance(yaml.safe_load(head), dict)
                except yaml.YAMLError:
                    ok = False
                self._json(200 if ok else 400, {"warnings": [], "errors": [] if ok else [{"message": "bad YAML"}]})
                return
            if parts[:2] == ["api", "datasets"] and len(parts) >= 6 and parts[4] == "preupload":
                files = json.loads(body).get("files", [])
                self._json(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                           for f in files]})
                return
            if parts[:2] == ["api", "datasets"] and len(parts) >= 6 and parts[4] == "commit":
                state.tokens.append(self.headers.get("Authorization"))
                repo_id, repo = self._repo(parts[2:4])
                if repo is None:
                    self._send(404, b'{"error": "Repository not found"}', headers={"X-Error-Code": "RepoNotFound"})
                    return
                for line in body.decode().splitlines():
                    op = json.loads(line)
                    if op.get("key") == "file":
                        repo.files[op["value"]["path"]] = base64.b64decode(op["value"]["content"])
                repo.commits += 1
                self._json(200, {"commitUrl": f"http://{self.headers['Host']}/datasets/{repo_id}/commit/{repo.sha}",
                                 "commitOid": repo.sha, "pullRequestUrl": None})
                return
            self._send(404, b'{"error": "not served by this mirror"}')

    return Handler


@contextmanager
def hub_mirror(state: MirrorState | None = None) -> Iterator[tuple[str, MirrorState]]:
    """(base URL, state) of a mirror on 127.0.0.1; point HF_ENDPOINT at the URL."""
    state = state or MirrorState()
    with http_on_loopback(_handler(state)) as url:
        yield url, state
