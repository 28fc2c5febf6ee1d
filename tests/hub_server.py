"""A local Hugging Face Hub for tests: the REST routes a real ``huggingface_hub.HfApi`` calls when
neuronhelpers publishes to, or contributes to, a dataset repo.

The routes and payloads follow huggingface_hub 2.4's own client code (hf_api.py, _commit_api.py,
file_download.py):

    POST /api/repos/create                                   create_repo (409 + url when it exists)
    GET  /api/datasets/NS/NAME[/revision/REV]                dataset_info / repo_info (the head sha)
    GET  /api/datasets/NS/NAME/tree/REV[/PATH]               list_repo_tree (recursive, expand)
    POST /api/validate-yaml                                  create_commit checks a README.md's metadata
    POST /api/datasets/NS/NAME/preupload/REV[?create_pr=1]   upload modes: always "regular" (content inline)
    POST /api/datasets/NS/NAME/commit/REV[?create_pr=1]      the ndjson commit (header, base64 files, deletions);
                                                             a stale parentCommit gets 412; create_pr opens refs/pr/N
    HEAD|GET /datasets/NS/NAME/resolve/REV/PATH              hf_hub_download (metadata, then the bytes)
    HEAD|GET /NS/NAME/resolve/REV/PATH                       hf_hub_download of a model repo's file (a model's
                                                             config.json; ``add_model``; a gated one answers 403)
    GET  /api/agent-harnesses                                the registry huggingface_hub's request headers consult
                                                             (from HF_ENDPOINT); answered empty: no agent detected

Errors carry the Hub's ``X-Error-Code`` header (RepoNotFound, RevisionNotFound, EntryNotFound) so the client
raises its own exception types. Storage is in memory: repo -> ref -> commits -> {path: bytes}. Every request
is recorded (method, path, query, headers, body, status); a request no route answers is kept in ``unhandled``.
With ``token`` set, the write routes (create, preupload, commit) need ``Authorization: Bearer TOKEN`` (401 otherwise).
Hooks: ``fail_next_commit`` (a status code) fails the next commit; ``push_before_next_commit`` ({path: bytes})
lets another writer commit to main just before it.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

MAIN = "main"
EMPTY_AGENT_REGISTRY = {"standardEnvVars": [], "harnesses": {}}
_REPO = r"(?P<repo>[^/]+/[^/]+)"
_ROUTES = [  # (method, pattern, handler name); paths are matched still URL-quoted
    ("POST", r"/api/repos/create", "_create_repo"),
    ("POST", r"/api/validate-yaml", "_validate_yaml"),
    ("GET", r"/api/agent-harnesses", "_agent_harnesses"),
    ("GET", rf"/api/datasets/{_REPO}(?:/revision/(?P<rev>[^/]+))?", "_info"),
    ("GET", rf"/api/datasets/{_REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.+))?", "_tree"),
    ("POST", rf"/api/datasets/{_REPO}/preupload/(?P<rev>[^/]+)", "_preupload"),
    ("POST", rf"/api/datasets/{_REPO}/commit/(?P<rev>[^/]+)", "_commit"),
    ("HEAD", rf"/datasets/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)", "_resolve"),
    ("GET", rf"/datasets/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)", "_resolve"),
    ("HEAD", rf"/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)", "_resolve_model"),
    ("GET", rf"/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)", "_resolve_model"),
]
_WRITES = {"_create_repo", "_preupload", "_commit"}


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Commit:
    sha: str
    message: str
    files: dict[str, bytes]
    changed: list[str] = field(default_factory=list)  # paths this commit added, changed or deleted
    date: str = ""


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: bytes
    route: str | None = None  # the handler that answered, e.g. "commit"
    status: int | None = None


class _Reply(Exception):
    def __init__(self, status: int, payload=None, headers: dict | None = None, raw: bytes | None = None):
        self.status, self.payload, self.headers, self.raw = status, payload, headers or {}, raw


def _error(status: int, message: str, code: str | None = None, **headers) -> _Reply:
    headers = {"X-Error-Message": message, **({"X-Error-Code": code} if code else {}), **headers}
    return _Reply(status, {"error": message}, headers)


class HubServer:
    """Start with ``with HubServer(token=...) as hub:``; point ``HfApi(endpoint=hub.url)`` (or HF_ENDPOINT) at it."""

    def __init__(self, token: str | None = None):
        self.token = token
        self.repos: dict[str, dict[str, list[Commit]]] = {}  # repo id -> ref ("main", "refs/pr/1") -> commits
        self.requests: list[Request] = []
        self.unhandled: list[Request] = []
        self.models: dict[str, dict[str, bytes]] = {}  # model repo id -> {path: bytes} (one revision)
        self.gated: set[str] = set()  # model repos whose files need a token
        self.fail_next_commit: int | None = None
        self.push_before_next_commit: dict[str, bytes] | None = None
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.hub = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="hub-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "HubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # --- for tests ---------------------------------------------------------------------------
    def create_repo(self, repo_id: str) -> None:
        with self._lock:
            self.repos.setdefault(repo_id, {MAIN: [self._new_commit("initial commit", {})]})

    def add_model(self, repo_id: str, files: dict[str, bytes], gated: bool = False) -> None:
        """A model repo's files (config.json, weights, ...) at one revision."""
        with self._lock:
            self.models[repo_id] = dict(files)
            if gated:
                self.gated.add(repo_id)

    def files(self, repo_id: str, ref: str = MAIN) -> dict[str, bytes]:
        return dict(self.repos[repo_id][ref][-1].files)

    def history(self, repo_id: str, ref: str = MAIN) -> list[Commit]:
        """The commits on a ref after the repo's initial commit."""
        return list(self.repos.get(repo_id, {}).get(ref, [])[1:])

    def commits(self, repo_id: str) -> int:
        return len(self.history(repo_id))

    def pull_requests(self, repo_id: str) -> list[str]:
        return sorted((r for r in self.repos.get(repo_id, {}) if r.startswith("refs/pr/")), key=lambda r: int(r[8:]))

    def requests_to(self, route: str) -> list[Request]:
        return [r for r in self.requests if r.route == route]

    # --- the Hub -------------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes):
        parts = urlsplit(raw_path)
        request = Request(method, parts.path, parse_qs(parts.query), headers, body)
        with self._lock:
            self.requests.append(request)
            try:
                for verb, pattern, name in _ROUTES:
                    match = re.fullmatch(pattern, parts.path)
                    if verb == method and match:
                        request.route = name.lstrip("_")
                        if name in _WRITES and self.token is not None \
                                and headers.get("authorization") != f"Bearer {self.token}":
                            raise _error(401, "Invalid credentials in Authorization header")
                        args = {k: unquote(v) for k, v in match.groupdict().items() if v is not None}
                        getattr(self, name)(request, **args)
                self.unhandled.append(request)
                raise _error(404, "Sorry, we can't find the page you are looking for.")
            except _Reply as reply:
                request.status = reply.status
                return reply

    def _create_repo(self, request, **_):
        payload = json.loads(request.body)
        repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
        if payload.get("type") != "dataset" or "/" not in repo_id:
            raise _error(400, "this local Hub holds namespaced dataset repos only")
        url = f"{self.url}/datasets/{repo_id}"
        if repo_id in self.repos:
            raise _Reply(409, {"error": "You already created this dataset repo", "url": url})
        self.create_repo(repo_id)
        raise _Reply(200, {"url": url, "name": repo_id})

    def _validate_yaml(self, request, **_):
        content = json.loads(request.body)["content"]
        if content.startswith("---\n"):
            try:
                yaml.safe_load(content[4:].split("\n---", 1)[0])
            except yaml.YAMLError as exc:
                raise _Reply(400, {"errors": [{"message": str(exc)}], "warnings": []}) from None
        raise _Reply(200, {"errors": [], "warnings": []})

    def _agent_harnesses(self, request, **_):
        raise _Reply(200, EMPTY_AGENT_REGISTRY)

    def _info(self, request, repo, rev=MAIN):
        commit = self._resolve_revision(repo, rev)
        raise _Reply(200, {"id": repo, "sha": commit.sha, "private": False, "tags": [], "lastModified": commit.date,
                           "siblings": [{"rfilename": p} for p in sorted(commit.files)]})

    def _tree(self, request, repo, rev, path=""):
        commit = self._resolve_revision(repo, rev)
        recursive = request.query.get("recursive", ["false"])[0].lower() in ("true", "1")
        expand = request.query.get("expand", ["false"])[0].lower() in ("true", "1")
        prefix = f"{path.rstrip('/')}/" if path else ""
        entries: dict[str, dict] = {}
        for file_path, data in sorted(commit.files.items()):
            if not file_path.startswith(prefix):
                continue
            rest = file_path[len(prefix):].split("/")
            for depth in range(1, len(rest)):  # the folders on the way
                folder = prefix + "/".join(rest[:depth])
                if recursive or depth == 1:
                    entries.setdefault(folder, {"type": "directory", "oid": self._tree_id(commit, folder),
                                                "path": folder})
            if recursive or len(rest) == 1:
                entries[file_path] = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": file_path}
        if path and not entries:
            raise _error(404, f"{path} does not exist on {rev}", "EntryNotFound")
        if expand:
            for entry in entries.values():
                last = self._last_commit(repo, commit, entry["path"])
                entry["lastCommit"] = {"id": last.sha, "title": last.message, "date": last.date}
        raise _Reply(200, list(entries.values()))

    def _preupload(self, request, repo, rev):
        files = self._resolve_revision(repo, rev).files
        answer = []
        for item in json.loads(request.body)["files"]:
            entry = {"path": item["path"], "uploadMode": "regular", "shouldIgnore": False}
            if item["path"] in files:
                entry["oid"] = git_blob_id(files[item["path"]])
            answer.append(entry)
        raise _Reply(200, {"files": answer, "commitOid": self._resolve_revision(repo, rev).sha})

    def _commit(self, request, repo, rev):
        if self.push_before_next_commit is not None:  # another writer gets in first
            pushed, self.push_before_next_commit = self.push_before_next_commit, None
            self._apply(repo, MAIN, "Another writer's commit", pushed, [])
        if self.fail_next_commit is not None:
            status, self.fail_next_commit = self.fail_next_commit, None
            raise _error(status, f"commit failed on purpose ({status})")
        lines = [json.loads(line) for line in request.body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise _error(400, "the commit payload must start with a header line")
        header = lines[0]["value"]
        head = self._resolve_revision(repo, rev)
        create_pr = request.query.get("create_pr", ["0"])[0] == "1"
        parent = header.get("parentCommit")
        if parent is not None and parent != head.sha:
            raise _error(412, "A commit has happened since. Please refresh and try again.")
        changes, deletions = {}, []
        for line in lines[1:]:
            value = line["value"]
            if line["key"] == "file":
                if value.get("encoding") != "base64":
                    raise _error(400, f"unsupported encoding for {value['path']}")
                changes[value["path"]] = base64.b64decode(value["content"])
            elif line["key"] in ("deletedFile", "deletedFolder"):
                deletions.append(value["path"].rstrip("/"))
            else:  # lfsFile: this Hub only ever answered "regular", so nothing was uploaded to LFS
                raise _error(400, f"unexpected commit operation {line['key']!r}: no LFS object was uploaded")
        url = f"{self.url}/datasets/{repo}"
        if create_pr:
            number = 1 + sum(r.startswith("refs/pr/") for r in self.repos[repo])
            ref = f"refs/pr/{number}"
            self.repos[repo][ref] = [head]
            commit = self._apply(repo, ref, header["summary"], changes, deletions)
            raise _Reply(200, {"success": True, "commitOid": commit.sha, "commitUrl": f"{url}/commit/{commit.sha}",
                               "hookOutput": "", "pullRequestUrl": f"{url}/discussions/{number}"})
        commit = self._apply(repo, self._ref_of(repo, rev), header["summary"], changes, deletions)
        raise _Reply(200, {"success": True, "commitOid": commit.sha, "commitUrl": f"{url}/commit/{commit.sha}",
                           "hookOutput": "", "pullRequestUrl": None})

    def _resolve(self, request, repo, rev, path):
        commit = self._resolve_revision(repo, rev)
        if path not in commit.files:
            raise _error(404, f"{path} does not exist on {rev}", "EntryNotFound", **{"X-Repo-Commit": commit.sha})
        data = commit.files[path]
        headers = {"X-Repo-Commit": commit.sha, "ETag": f'"{git_blob_id(data)}"',
                   "Content-Type": "application/octet-stream"}
        raise _Reply(200, headers=headers, raw=data)

    def _resolve_model(self, request, repo, rev, path):
        if repo not in self.models:
            raise _error(404, "Repository not found", "RepoNotFound")
        if repo in self.gated:
            raise _error(403, f"Access to model {repo} is restricted: you must have access to it and be "
                              "authenticated to access it.", "GatedRepo")
        files = self.models[repo]
        sha = hashlib.sha1("\0".join([repo, *sorted(files)]).encode()).hexdigest()
        if path not in files:
            raise _error(404, f"{path} does not exist on {rev}", "EntryNotFound", **{"X-Repo-Commit": sha})
        data = files[path]
        raise _Reply(200, headers={"X-Repo-Commit": sha, "ETag": f'"{git_blob_id(data)}"',
                                   "Content-Type": "application/octet-stream"}, raw=data)

    # --- storage -------------------------------------------------------------------------------
    def _new_commit(self, message, files, changed=()):
        sha = hashlib.sha1(f"commit {next(self._ids)} {message}".encode()).hexdigest()
        date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return Commit(sha, message, files, list(changed), date)

    def _apply(self, repo, ref, message, changes, deletions) -> Commit:
        files = {p: d for p, d in self.repos[repo][ref][-1].files.items()
                 if not any(p == x or p.startswith(x + "/") for x in deletions)}
        files.update(changes)
        commit = self._new_commit(message, files, [*changes, *deletions])
        self.repos[repo][ref].append(commit)
        return commit

    def _ref_of(self, repo, rev) -> str:
        if rev not in self.repos[repo]:
            raise _error(400, f"can only commit to a branch or a pull request ref, not {rev}")
        return rev

    def _resolve_revision(self, repo, rev) -> Commit:
        if repo not in self.repos:
            raise _error(404, "Repository not found", "RepoNotFound")
        refs = self.repos[repo]
        if rev in refs:
            return refs[rev][-1]
        for commits in refs.values():
            for commit in commits:
                if commit.sha == rev:
                    return commit
        raise _error(404, f"Invalid rev id: {rev}", "RevisionNotFound")

    def _last_commit(self, repo, commit, path) -> Commit:
        for commits in self.repos[repo].values():
            if commit in commits:
                upto = commits[:commits.index(commit) + 1]
                return next((c for c in reversed(upto)
                             if any(p == path or p.startswith(path + "/") for p in c.changed)), upto[0])
        return commit

    @staticmethod
    def _tree_id(commit, folder) -> str:
        listing = "".join(f"{p}:{git_blob_id(d)}" for p, d in sorted(commit.files.items())
                          if p.startswith(folder + "/"))
        return hashlib.sha1(listing.encode()).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    server_version = "LocalHub/1"

    def _serve(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        reply = self.server.hub.handle(self.command, self.path, headers, body)
        data = reply.raw if reply.raw is not None else json.dumps(reply.payload).encode()
        self.send_response(reply.status)
        if reply.raw is None:
            self.send_header("Content-Type", "application/json")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_POST = _serve

    def log_message(self, *args):  # keep the test output clean
        pass
