"""Publishing: push a results dataset to a Hub dataset repo, and offer contributed rows as a pull request.

Everything goes through huggingface_hub's HfApi (commit operations, repo tree); the token comes from
its usual sources (HF_TOKEN, the cached login) and is never passed to, written or logged by this code.

Taught in notebook 06.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from neuronhelpers.core import versions, vocab
from neuronhelpers.core.code_identity import code_digest, executable_text
from neuronhelpers.core.errors import UserError
from neuronhelpers.recipes import render
from neuronhelpers.store import dataset, schema
from neuronhelpers.store.card import render_card

REPO_TYPE = "dataset"
CONFLICT_STATUS = (409, 412)


@dataclass
class PublishPlan:
    repo_id: str
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    commit_url: str | None = None
    pr_url: str | None = None
    attempts: int = 0
    note: str | None = None
    offered: list[str] = field(default_factory=list)  # a contribution's rows, one line each

    def describe(self, dry_run: bool) -> str:
        if self.offered:  # a contribution: what its pull request carries
            verb = "a pull request would carry" if dry_run else "the pull request carries"
        else:
            verb = "would upload" if dry_run else "uploaded"
        lines = [f"{self.repo_id}: {verb} {len(self.changed)} file(s), {len(self.unchanged)} unchanged"]
        if self.note:
            lines.append(f"({self.note})")
        lines += [f"  + {p}" for p in self.changed]
        lines += [f"  = {p}" for p in self.unchanged]
        lines += [f"  row: {line}" for line in self.offered]
        if self.pr_url:
            lines.append(f"pull request: {self.pr_url}")
        elif self.commit_url:
            lines.append(f"commit: {self.commit_url}")
        return "\n".join(lines)


def _hashes(data: bytes) -> set[str]:
    """sha256 (how the Hub identifies LFS/Xet files) and the git blob id (how it identifies small files)."""
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return {hashlib.sha256(data).hexdigest(), blob}


def _changed_paths(files: dict[str, bytes], remote: dict[str, set[str]]) -> list[str]:
    """The files whose bytes the dataset (its listing: path -> hashes) does not hold already."""
    return [p for p, data in files.items() if not (_hashes(data) & remote.get(p, set()))]


def remote_hashes(api, repo_id: str, revision: str | None = None) -> dict[str, set[str]]:
    """A dataset repo's files (path -> the hashes it is known by), at ``revision``; empty where it does not exist."""
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        entries = api.list_repo_tree(repo_id, recursive=True, expand=True, repo_type=REPO_TYPE, revision=revision)
        remote = {}
        for entry in entries:
            ids = {getattr(entry, "blob_id", None)}
            lfs = getattr(entry, "lfs", None)
            if lfs is not None:
                ids.add(lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None))
            if hasattr(entry, "size"):
                remote[entry.path] = {i for i in ids if i}
        return remote
    except RepositoryNotFoundError:
        return {}


def _publishable_tables(folder: str | Path) -> dict[str, pa.Table]:
    """Each Parquet file under a dataset folder's data/, read and conformed to the current schema (a file in the
    published layout read whole into it); a file load_results would skip, rows naming this machine's folders or rows
    of the made-up example are refused in one line."""
    folder = Path(folder)
    files = dataset.parquet_files(folder / dataset.DATA_DIR)
    if not files:
        raise UserError(f"nothing to publish in '{folder}': no {dataset.DATA_DIR}/*.parquet (run a sweep "
                        "into it first)")
    tables = {}
    for path in files:
        try:
            table = dataset.load_results_file(path)
        except Exception as exc:  # noqa: BLE001
            raise UserError(f"'{path}' is not a valid results file ({exc}); fix or remove it "
                            "before publishing") from None
        check_publishable_ids(table.column("model_id").to_pylist(), path.name)
        check_not_example(table.column("runner").to_pylist(), path.name)
        tables[path.relative_to(folder).as_posix()] = table
    return tables


def local_files(folder: str | Path) -> dict[str, bytes]:
    """What a dataset folder publishes in our layout: its version-pair Parquet files, each in the current schema (an
    older file is brought to it, so the Hub's viewer reads them as one table), less shelf rows, and a freshly
    generated card that says what the rows ran on."""
    import pandas as pd

    out, left_out, frames = {}, 0, []
    for rel, table in _publishable_tables(folder).items():
        out[rel], kept, shelf_rows = _without_shelf_rows(table)
        frames.append(kept.select(["model_id", "backend", "weights", "result"]).to_pandas())
        left_out += shelf_rows
    if left_out:  # the published catalog holds Hub checkpoints; a shelf copy is evidence here, not their result
        print(f"left out {left_out} shelf row(s): real checkpoints from registry packages are not the Hub "
              "checkpoint's result (the committed catalog keeps them)", file=sys.stderr)
    out["README.md"] = render_card(pd.concat(frames, ignore_index=True)).encode()
    return out


def _without_shelf_rows(table: pa.Table) -> tuple[bytes, pa.Table, int]:
    """A conformed file's bytes as published with its shelf rows left out, the rows kept, and how many were left out."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    kinds = schema.weights_kinds(table.column("weights").to_pylist(), table.column("model_id").to_pylist())
    shelf = sum(kind == vocab.WEIGHTS_SHELF for kind in kinds)
    kept = table.filter(pc.invert(pc.equal(pa.array(kinds, pa.string()), vocab.WEIGHTS_SHELF))) if shelf else table
    buffer = io.BytesIO()
    pq.write_table(kept, buffer, compression="zstd")
    return buffer.getvalue(), kept, shelf


def check_not_example(runners, where: str) -> None:
    """Rows of the made-up example (store/example.py) are never published."""
    from neuronhelpers.store.example import is_example

    if is_example(runners):
        raise UserError(f"{where} holds rows of neuronhelpers' made-up example dataset: they are not measurements "
                        "and cannot be published or contributed")


def check_publishable_ids(model_ids, where: str) -> None:
    """A published row names a Hub model or a twin, never a folder on the machine that ran it."""
    from neuronhelpers.models.resolve import is_local_path

    local = sorted({m for m in model_ids if m and is_local_path(m)})
    if local:
        raise UserError(f"{where} has rows for local checkpoint folders "
                        f"({local[0]}{', ...' if len(local) > 1 else ''}): they cannot be published; push the "
                        "checkpoint to the Hub and run it by its id, or remove those rows")


def _unreachable_errors() -> tuple:
    from huggingface_hub.errors import OfflineModeIsEnabled

    try:
        import httpx2 as httpx
    except ImportError:  # huggingface_hub releases built on httpx
        import httpx
    return (OfflineModeIsEnabled, httpx.ConnectError, httpx.TimeoutException)


_UNREACHABLE = _unreachable_errors()


def _is_conflict(exc: Exception) -> bool:
    return getattr(getattr(exc, "response", None), "status_code", None) in CONFLICT_STATUS


def check_repo_id(repo_id: str) -> None:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
        if "/" not in repo_id:
            raise HFValidationError("no namespace")
    except HFValidationError:
        raise UserError(f"'{repo_id}' is not a Hub dataset repo id: use NAMESPACE/NAME (letters, digits, "
                        "'-', '_', '.')") from None


def _commit(api, repo_id: str, files: dict[str, bytes], message: str, *, dry_run: bool, create_pr: bool,
            max_attempts: int, listed: dict[str, set[str]] | None = None) -> PublishPlan:
    from huggingface_hub import CommitOperationAdd

    from neuronhelpers.core.network import hub_reachable

    plan = PublishPlan(repo_id)  # the callers checked repo_id, before reading the repo
    if not hub_reachable(endpoint=getattr(api, "endpoint", None)):  # decided once, quickly: no retries
        if not dry_run:
            raise UserError("the Hub cannot be reached from here: nothing was uploaded; retry where there is network "
                            "(and unset HF_HUB_OFFLINE)")
        plan.changed, plan.note = list(files), "the Hub cannot be reached from here: every file is listed"
        return plan
    for attempt in range(1, max_attempts + 1):
        plan.attempts = attempt
        head = None
        try:
            if not dry_run:
                api.create_repo(repo_id, repo_type=REPO_TYPE, exist_ok=True)
                head = api.repo_info(repo_id, repo_type=REPO_TYPE).sha
            # a dry run compares with the listing already read (``listed``); a commit, with its parent's
            remote = listed if dry_run and listed is not None else remote_hashes(api, repo_id, revision=head)
        except _UNREACHABLE as exc:
            if not dry_run:
                raise UserError(f"the Hub cannot be reached ({type(exc).__name__}): nothing was uploaded; "
                                "retry where there is network (and unset HF_HUB_OFFLINE)") from None
            remote, plan.note = {}, "the Hub cannot be reached from here: every file is listed"
        plan.changed = _changed_paths(files, remote)
        plan.unchanged = [p for p in files if p not in plan.changed]
        if dry_run or not plan.changed:
            return plan
        operations = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=io.BytesIO(files[p])) for p in plan.changed]
        try:
            info = api.create_commit(repo_id, operations, commit_message=message, repo_type=REPO_TYPE,
                                     parent_commit=None if create_pr else head, create_pr=create_pr)
        except Exception as exc:
            if _is_conflict(exc) and attempt < max_attempts:
                continue  # someone pushed in between: recompute what changed against the new head
            raise
        plan.commit_url = getattr(info, "commit_url", None)
        plan.pr_url = getattr(info, "pr_url", None)
        return plan
    return plan


def publish(folder: str | Path, repo_id: str, *, dry_run: bool = False, api=None, max_attempts: int = 3,
            message: str = "Update neuronhelpers results") -> PublishPlan:
    """Push the folder's Parquet files and the generated card in one commit, uploading only changed files.

    Into an existing dataset laid out as the published one, the folder's rows join its files instead (``merged_into``:
    Trainium rows of Hub models only, every row there kept as it is, its own card kept)."""
    from huggingface_hub import HfApi

    api = api or HfApi()
    check_repo_id(repo_id)
    tables = _publishable_tables(folder)  # read everything first: nothing local is touched from here on
    with tempfile.TemporaryDirectory() as tmp:
        layout, listed = remote_layout(api, repo_id, tmp)
        if layout == dataset.PUBLISHED:
            rows = [row for table in tables.values() for row in table.to_pylist()]
            files = merged_into(tmp, rows, repo_id)
            plan = _commit(api, repo_id, files, message, dry_run=dry_run, create_pr=False, max_attempts=max_attempts,
                           listed=listed)
            plan.note = _join_notes(plan.note, "laid out as the published dataset: rows written in its columns")
            return plan
    return _commit(api, repo_id, local_files(folder), message, dry_run=dry_run, create_pr=False,
                   max_attempts=max_attempts, listed=listed)


def _join_notes(*notes) -> str:
    return "; ".join(n for n in notes if n)


def remote_layout(api, repo_id: str, into: str | Path) -> tuple[str | None, dict[str, set[str]] | None]:
    """Download a dataset repo's Parquet files into ``into`` (paths kept) and say how they are laid out
    (``dataset.folder_layout``; None where the repo does not exist, holds none, or the Hub cannot be reached), with
    the repo's listing (path -> hashes; None where it could not be read). A repo mixing both layouts is refused in
    one line: neuronhelpers would not know which to write."""
    from neuronhelpers.core.network import hub_reachable

    if not hub_reachable(endpoint=getattr(api, "endpoint", None)):
        return None, None  # _commit says so in one line (or, dry, lists every file)
    try:
        listed = remote_hashes(api, repo_id)
        download_files(api, repo_id, [p for p in listed if p.endswith(".parquet")], into)
    except _UNREACHABLE:
        return None, None
    return _checked_layout(into, repo_id), listed


def download_files(api, repo_id: str, paths, into: str | Path, revision: str | None = None) -> None:
    """Download these files of a dataset repo (at ``revision``) into ``into``, their paths in the repo kept."""
    for path in paths:
        local = Path(into, path)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(Path(api.hf_hub_download(repo_id, path, repo_type=REPO_TYPE, revision=revision)).read_bytes())


def local_layout(folder: str | Path, into: str | Path, repo_id: str) -> tuple[str | None, dict[str, set[str]]]:
    """A local copy of a dataset (a folder laid out as the repo: ``against``) copied into ``into`` as ``remote_layout``
    downloads a repo, without the network: its layout and its files' hashes (what a pull request would leave alone)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"no dataset folder at '{folder}' to compare with")
    listed = {}
    for path in dataset.parquet_files(folder):
        rel = path.relative_to(folder).as_posix()
        data = path.read_bytes()
        Path(into, rel).parent.mkdir(parents=True, exist_ok=True)
        Path(into, rel).write_bytes(data)
        listed[rel] = _hashes(data)
    return _checked_layout(into, repo_id), listed


def _checked_layout(into: str | Path, repo_id: str) -> str | None:
    layout = dataset.folder_layout(into)
    if layout == dataset.MIXED:
        raise UserError(f"{repo_id} holds files in both the published layout and neuronhelpers' own: nothing was "
                        "sent (bring its files to one layout first)")
    return layout


def merged_into(folder: str | Path, rows: list[dict], repo_id: str) -> dict[str, bytes]:
    """Rows merged into a downloaded dataset in the published layout (``dataset.append_published``): the files touched,
    as bytes, by their path in the repo. The callers have refused the made-up example's rows already."""
    try:
        touched = dataset.append_published(folder, rows)
    except UserError as exc:
        raise UserError(str(exc).replace(str(folder), repo_id)) from None
    return {rel: Path(folder, rel).read_bytes() for rel in touched}


# ------------------------------------------------------------------------------------------------
# Contributions: rows a user ran themselves, validated, offered as a pull request.
# ------------------------------------------------------------------------------------------------


def read_contribution(path) -> list[dict]:
    """Rows to contribute: a JSON row (`neuronhelpers run --json`), a JSON-lines file, a dataset folder, or the rows
    themselves (a row, or a list of rows, as ``run_model`` and ``sweep_models`` return them)."""
    if isinstance(path, dict):
        return [dict(path)]
    if isinstance(path, list):
        return [dict(row) for row in path]
    path = Path(path)
    if path.is_dir():
        return dataset.row_records(dataset.load_results(path, validate=False))
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read '{path}': {exc.strerror}") from None
    try:
        rows = [json.loads(text)] if text.lstrip().startswith("{") and "\n{" not in text.strip() else \
            [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise UserError(f"'{path}' is not a JSON row or JSON lines ({exc})") from None
    return rows


def validate_contribution(rows: list[dict]) -> list[dict]:
    """Hold every row to the schema's rules (``schema.checked_rows``) and the recipe; raise UserError naming the first
    problem."""
    clean = schema.checked_rows(rows)
    for row in clean:
        if row["result"] != vocab.EXCLUDED:
            check_run_py(row)
    try:
        schema.rows_to_table(clean)
    except Exception as exc:  # noqa: BLE001 - pyarrow type errors
        raise UserError(f"rows do not fit the schema: {exc}") from None
    return clean


def check_run_py(row: dict) -> None:
    """The row's run.py must execute what the recipe rendered with its own parameters executes: the same code and
    PARAMS, comments and docstrings aside (core/code_identity.py), so an edit of the recipe's comments stales no row.
    Which measuring made its figures (``harness_version``) does not matter here: the measuring is not part of run.py."""
    model = row.get("model_id", "?")
    text = row.get("run_py") or ""
    try:
        params = render.params_of_run_py(text)
        rendered = render.render_run_py(params)
        same = rendered == text or code_digest(rendered) == code_digest(text)  # (the text first: the cheap test)
    except (ValueError, SyntaxError):
        raise UserError(f"row for '{model}' refused: its run_py is not a neuronhelpers run.py") from None
    if not same:
        expected, got = executable_text(rendered).splitlines(), executable_text(text).splitlines()
        first = next((b for a, b in zip(expected, got, strict=False) if a != b), "(it ends early)")
        raise UserError(f"row for '{model}' refused: its run_py's code differs from the recipe's, first at "
                        f"`{first.strip()[:100]}` (a modified run.py does not test the recipe)")
    if params.get("model_id") != row.get("model_id"):
        raise UserError(f"row for '{model}' refused: its run_py ran '{params.get('model_id')}'")


def made_by_todays_recipe(row: dict) -> bool:
    """Whether a row is what today's package would make: its measuring is today's for its library
    (``versions.measuring_is_todays``) and its run_py the recipe rendered with its own parameters (``check_run_py``'s
    rule: what ``contribute`` accepts). A row with no run_py (nothing was rendered: EXCLUDED, or UNTESTED before a
    run) counts by its measuring alone."""
    if not versions.measuring_is_todays(row.get("harness_version"), row.get("library")):
        return False
    try:
        return not row.get("run_py") or check_run_py(row) is None
    except UserError:
        return False


def check_trainium_verdicts(rows: list[dict], repo_id: str) -> None:
    """The published dataset holds Trainium verdicts only (PASS or FAIL of a Hub checkpoint measured on Trainium, with
    its neuronx-cc version): any other row, a CPU row or a twin's first, is refused in one line that says why and what
    to run instead (``schema.validate_row``'s published rules)."""
    for row in rows:
        try:
            schema.validate_row(row, published=True)
        except vocab.VocabularyError as exc:
            raise UserError(f"refused by {repo_id}, which holds Trainium verdicts only: {exc}; nothing was "
                            "sent") from None


def offered_line(row: dict) -> str:
    """One contributed row in a line: the model, its verdict (and stage), where it ran, its cores and versions."""
    verdict = f"{row['result']} ({row['stage']})" if row.get("stage") else row["result"]
    where = schema.ran_on(row.get("backend"), row.get("weights"), row["model_id"])
    cores = f", {row['neuron_cores']} core(s)" if row.get("neuron_cores") else ""
    return (f"{row['model_id']} {verdict} on {where}{cores}, {row.get('compiler')} {row.get('compiler_version')}, "
            f"{row.get('library')} {row.get('library_version')}")


def contribute(rows, repo_id: str, *, dry_run: bool = False, api=None, against: str | Path | None = None
               ) -> PublishPlan:
    """Validate rows (a path ``read_contribution`` reads, or the rows themselves) and open a pull request that merges
    them into the dataset's files: in our layout their version-pair files; in the published layout the files that hold
    their versions (``merged_into``, every row there kept exactly as it was). The published dataset
    (``settings.dataset_repo()``) and any dataset laid out as it is take Trainium verdicts only
    (``check_trainium_verdicts``).

    ``against``: a local copy of the dataset (a folder laid out as the repo, e.g. the made-up example) stands in for
    it, with no network, in a dry run only. There alone the made-up example's own rows may be offered, to show what a
    pull request would carry; the plan's note says they are made up. Sent to the Hub, they are refused."""
    from neuronhelpers.core.settings import dataset_repo
    from neuronhelpers.store.example import is_example

    check_repo_id(repo_id)
    if against is not None and not dry_run:
        raise UserError(f"against a local copy ({against}) a contribution is a dry run only: a pull request goes to "
                        "the Hub (leave --against out to open one)")
    where = str(rows) if isinstance(rows, (str, Path)) else "what was offered"
    rows = validate_contribution(read_contribution(rows))
    check_publishable_ids([r["model_id"] for r in rows], where)
    example = is_example([r.get("runner") for r in rows])
    if against is None:
        check_not_example([r.get("runner") for r in rows], where)
    if repo_id == dataset_repo():
        check_trainium_verdicts(rows, repo_id)  # before anything reaches the Hub
    if against is None:
        from huggingface_hub import HfApi

        api = api or HfApi()
    with tempfile.TemporaryDirectory() as tmp:  # start from the dataset's files so the PR adds rows to them
        layout, listed = remote_layout(api, repo_id, tmp) if against is None else local_layout(against, tmp, repo_id)
        if layout == dataset.PUBLISHED:
            check_trainium_verdicts(rows, repo_id)
            files = merged_into(tmp, rows, repo_id)
        else:
            files = {rel: Path(tmp, rel).read_bytes() for rel in dataset.append_rows(tmp, rows)}
    if against is None:
        models = ", ".join(sorted({r["model_id"] for r in rows}))
        plan = _commit(api, repo_id, files, f"Contribute results: {models}"[:200], dry_run=dry_run, create_pr=True,
                       max_attempts=1, listed=listed)
    else:
        changed = _changed_paths(files, listed)
        plan = PublishPlan(repo_id, changed, [p for p in listed if p not in changed], note=_join_notes(
            f"against the local copy {against}: nothing was sent",
            "the example's Trainium row(s), made up, not measurements: shown to say what a pull request would "
            "carry, never sent" if example else None))
    plan.offered = [offered_line(row) for row in rows]
    return plan
