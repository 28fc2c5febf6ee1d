"""A local stand-in for the Hub's dataset-repo API: the subset of HfApi that publish and contribute call.

It stores commits and pull requests in memory, checks ``parent_commit`` like the Hub (412 on a stale
parent), reads the real ``CommitOperationAdd`` objects it is given, and raises huggingface_hub's own
errors. Tests can make the next commit fail, or another writer push first.
"""

import hashlib
import itertools
import tempfile
from pathlib import Path
from types import SimpleNamespace

import httpx2
from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError


def _response(status: int):
    return httpx2.Response(status, request=httpx2.Request("POST", "https://hub.invalid/api/datasets/x/commit/main"))


class LocalHub:
    def __init__(self):
        self.repos: dict[str, list[tuple[str, dict[str, bytes]]]] = {}
        self.pull_requests: list[dict] = []
        self.commit_calls: list[dict] = []
        self.fail_next: Exception | None = None
        self.push_before_next_commit: dict[str, bytes] | None = None
        self._ids = itertools.count(1)

    # --- what HfApi offers -----------------------------------------------------------------
    def create_repo(self, repo_id, *, repo_type=None, exist_ok=False, **_):
        if repo_id in self.repos and not exist_ok:
            raise HfHubHTTPError("409 repo exists", response=_response(409))
        self.repos.setdefault(repo_id, [(self._sha(), {})])

    def repo_info(self, repo_id, *, repo_type=None, **_):
        return SimpleNamespace(sha=self._head(repo_id)[0])

    def list_repo_tree(self, repo_id, *, recursive=False, expand=False, repo_type=None, revision=None, **_):
        files = self._head(repo_id)[1] if revision is None else dict(self._commit(repo_id, revision)[1])
        for path, data in sorted(files.items()):
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            lfs = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)} if path.endswith(".parquet") else None
            yield SimpleNamespace(path=path, size=len(data), blob_id=blob, lfs=lfs)

    def create_commit(self, repo_id, operations, *, commit_message, repo_type=None, parent_commit=None,
                      create_pr=False, **_):
        self.commit_calls.append({"repo_id": repo_id, "message": commit_message, "create_pr": create_pr,
                                  "paths": [op.path_in_repo for op in operations]})
        if self.push_before_next_commit is not None:  # another writer gets in first
            pushed, self.push_before_next_commit = self.push_before_next_commit, None
            self._apply(repo_id, pushed)
        if self.fail_next is not None:
            failure, self.fail_next = self.fail_next, None
            raise failure
        if parent_commit is not None and parent_commit != self._head(repo_id)[0]:
            raise HfHubHTTPError("412 Precondition Failed: parent commit is not the head", response=_response(412))
        changes = {}
        for op in operations:
            with op.as_file() as handle:
                changes[op.path_in_repo] = handle.read()
        if create_pr:
            number = len(self.pull_requests) + 1
            self.pull_requests.append({"number": number, "files": changes, "message": commit_message})
            return SimpleNamespace(commit_url=f"https://hub.invalid/datasets/{repo_id}/commit/pr{number}",
                                   pr_url=f"https://hub.invalid/datasets/{repo_id}/discussions/{number}")
        sha = self._apply(repo_id, changes)
        return SimpleNamespace(commit_url=f"https://hub.invalid/datasets/{repo_id}/commit/{sha}", pr_url=None)

    def hf_hub_download(self, repo_id, filename, *, repo_type=None, **_):
        files = self._head(repo_id)[1]
        if filename not in files:
            raise EntryNotFoundError(f"{filename} not in {repo_id}")
        path = Path(tempfile.mkdtemp()) / Path(filename).name
        path.write_bytes(files[filename])
        return str(path)

    # --- helpers for tests -------------------------------------------------------------------
    def files(self, repo_id) -> dict[str, bytes]:
        return self._head(repo_id)[1]

    def commits(self, repo_id) -> int:
        return len(self.repos.get(repo_id, [])) - 1

    def _sha(self):
        return hashlib.sha1(str(next(self._ids)).encode()).hexdigest()

    def _head(self, repo_id):
        if repo_id not in self.repos:
            raise RepositoryNotFoundError(f"{repo_id} not found", response=_response(404))
        return self.repos[repo_id][-1]

    def _commit(self, repo_id, sha):
        return next(c for c in self.repos[repo_id] if c[0] == sha)

    def _apply(self, repo_id, changes):
        self.create_repo(repo_id, exist_ok=True)
        files = {**self._head(repo_id)[1], **changes}
        sha = self._sha()
        self.repos[repo_id].append((sha, files))
        return sha
