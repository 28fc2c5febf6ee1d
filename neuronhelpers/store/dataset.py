"""The results dataset on disk (or on the Hub): one Parquet file per (compiler version, library, library version).

Writes are atomic (a temporary file renamed into place), so a reader or a killed sweep never sees half a
file, and serialised per folder (``lock.folder_lock``), so two processes writing one folder lose nothing; a reader
reads each file through one open handle, so a file replaced under it is read whole as it was. Every row written is
held to ``schema.checked_rows`` first. Reading unifies every file with the current schema: columns a file lacks (an
older harness, or another tool that writes only the published columns) read as null, the published layout's variants
(float counts, times as text, null-typed columns) as their values (``schema.cast_column``), and columns beyond the
schema are kept. A damaged or foreign file is named and skipped (and refused as the target of a write); a value
outside the vocabulary is kept and named in one warning per file. Counts read as nullable integers. Taught in
notebook 01; the row schema itself is ``schema.py``.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError, first_line
from neuronhelpers.core.versions import NEURON_COMPILER
from neuronhelpers.store import published, schema
from neuronhelpers.store.attempts import LAST_ATTEMPT, PAIR_COLUMNS, verdicts_before_attempts  # noqa: F401 - read as dataset.X
from neuronhelpers.store.files import (  # noqa: F401 - the file-level helpers, read as dataset.X too
    list_parquet,
    parquet_files,
    read_schema,
    read_table,
    with_metadata_of,
    write_table_atomic,
)
from neuronhelpers.store.lock import folder_lock

DATA_DIR = "data"
# How a folder's files are laid out (``folder_layout``).
OURS, PUBLISHED, MIXED = "ours", "published", "mixed"
# The columns of the published catalog: a file with these (and nothing else of ours) is a results file.
SEED_COLUMNS = ("model_id", "neuronx_cc", "library", "library_version", "neuron_cores", "result", "error")
# A file must at least say which model and what happened to be read as results.
REQUIRED_COLUMNS = ("model_id", "result")
log = logging.getLogger("neuronhelpers.store")


class DatasetWarning(UserWarning):
    pass


def version_pair_file(row: dict, folder: str = DATA_DIR) -> str:
    """Relative path of the Parquet file a row belongs to: data/<compiler>-<version>__<library>-<version>.parquet."""
    compiler = f"{row.get('compiler') or 'unknown'}-{row.get('compiler_version') or 'unknown'}"
    library = f"{row.get('library') or vocab.TRANSFORMERS}-{row.get('library_version') or 'unknown'}"
    return f"{folder}/{published.safe_name(compiler)}__{published.safe_name(library)}.parquet"


def folder_layout(folder) -> str | None:
    """How a local dataset folder's files are laid out: PUBLISHED (all of them as the published dataset), OURS (none
    of them), MIXED, or None when it holds no Parquet file. An unreadable file counts as neither."""

    kinds = set()
    for path in parquet_files(folder):
        try:
            kinds.add(PUBLISHED if published.is_published_layout(read_schema(path).names) else OURS)
        except Exception:  # noqa: BLE001 - load_results names a damaged file; it decides no layout
            continue
    return None if not kinds else kinds.pop() if len(kinds) == 1 else MIXED


def append_rows(folder, rows: list[dict]) -> list[str]:
    """Add rows to their files in ``folder`` (read, concatenate, atomic rewrite, under the folder's write lock);
    returns the files touched.

    Every row is held to ``schema.checked_rows`` first: one that breaks a rule is refused in one line and nothing is
    written. In our layout a row goes to its version-pair file and replaces an earlier row with the same resume key (a
    rerun never duplicates; of two rows with one key in one call, the later is kept); every column a file holds beyond
    the schema is kept, and so is its schema metadata; every other file neuronhelpers wrote in an older schema is
    brought to the current one, so the folder reads as one table (those are among the files returned). In a folder
    laid out as the published dataset, rows join it as ``append_published`` says; a folder mixing both layouts is
    written in ours. A file that cannot be read is named, and nothing is written.
    """
    folder = Path(folder)
    with folder_lock(folder):
        layout = folder_layout(folder)
        if layout is None and parquet_files(folder):  # every file damaged: which layout it is in cannot be told
            raise UserError(f"'{folder}' holds Parquet files none of which can be read, so its layout (ours or the "
                            "published one) cannot be told: mend or move them; nothing was written")
        if layout == PUBLISHED:
            return append_published(folder, rows)
        rows = _last_per_key(schema.checked_rows(rows), schema.resume_key)
        by_file: dict[str, list[dict]] = {}
        for row in rows:
            by_file.setdefault(version_pair_file(row), []).append(row)
        tables = {}
        for rel, new in by_file.items():  # every file read before any is written: a bad one stops them all
            path = folder / rel
            fresh = schema.rows_to_table(new)
            if path.exists():
                original, old = _readable(path)
                keys = [(schema.resume_key(r), vocab.is_attempt(r["result"], r.get("stage"))) for r in new]
                old_keys = [schema.resume_key(dict(zip(schema.RESUME_KEY, v, strict=True)))
                            for v in zip(*(old.column(k).to_pylist() for k in schema.RESUME_KEY), strict=True)]
                verdicts = [r in (vocab.PASS, vocab.FAIL) for r in old.column("result").to_pylist()]
                # an attempt (a fault of the machine or of the files) never replaces a verdict: it is kept beside it
                mask = [not any(schema.replaces(key, v) and not (attempt and verdict) for key, attempt in keys)
                        for v, verdict in zip(old_keys, verdicts, strict=True)]
                fresh = pa.concat_tables([old.filter(pa.array(mask, type=pa.bool_())), fresh],
                                         promote_options="permissive")
                fresh = with_metadata_of(fresh, original)
            tables[rel] = fresh
        for rel, table in tables.items():
            write_table_atomic(table, folder / rel)
        return sorted(set(by_file) | set(upgrade_files(folder)))


def _last_per_key(rows: list[dict], key) -> list[dict]:
    """Rows with one per key: the later of two with the same key (a corrected row wins; a repeated one counts once)."""
    last = {}
    for row in rows:
        last.pop(key(row), None)  # re-inserted: the order of the rows kept is the order they came in
        last[key(row)] = row
    return list(last.values())


def _readable(path) -> tuple[pa.Table, pa.Table]:
    """A file a write is about to change, as it is and as ``load_results`` reads it (conformed, every column kept);
    one that the reader would skip is refused in one line (appending to it would hide the new rows with it)."""
    try:
        table = read_table(path)
        missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
        if missing:
            raise ValueError(f"not a results file (no {', '.join(missing)} column)")
        return table, conform(table, keep_other_columns=True)
    except Exception as exc:  # noqa: BLE001 - the reader would skip it: say which, write nothing
        raise UserError(f"'{path}' cannot be read ({first_line(exc)}): mend or move it; nothing was written") from None


def _same_schema(names: pa.Schema) -> bool:
    """Whether a file's columns of our schema are exactly the current schema's (columns beyond it aside)."""
    ours = [names.field(n) for n in schema.COLUMN_NAMES if n in names.names]
    return pa.schema(ours).equals(schema.SCHEMA, check_metadata=False)


def upgrade_files(folder) -> list[str]:
    """Rewrite in the current schema every file of ``folder`` that neuronhelpers wrote in an older one (it has a
    `harness_version` column): the Hub's viewer reads a folder as one table only when all its files agree. Columns a
    file holds beyond the schema are kept as they are. Files of other tools and of the published layout are left as
    they are. Returns the files rewritten, relative to ``folder``."""
    folder, rewritten = Path(folder), []
    with folder_lock(folder):
        for path in parquet_files(folder):
            try:
                names = read_schema(path)
            except Exception as exc:  # noqa: BLE001 - a damaged file is named by load_results, never rewritten
                log.debug("not upgraded, unreadable: %s (%s)", path, first_line(exc))
                continue
            if "harness_version" in names.names and not _same_schema(names):
                original = read_table(path)
                write_table_atomic(with_metadata_of(conform(original, keep_other_columns=True), original), path)
                rewritten.append(path.relative_to(folder).as_posix())
    return rewritten


def check_sweep_folder(folder) -> None:
    """A sweep writes our layout, every row it reaches (EXCLUDED and UNTESTED too): a folder laid out as the published
    dataset is refused in one line before anything runs."""
    if folder_layout(folder) == PUBLISHED:
        raise UserError(f"'{folder}' is laid out as the published Trainium dataset, which takes only "
                        "Trainium verdicts: sweep into a folder of your own, then `neuronhelpers contribute` its "
                        "Trainium rows")


def append_published(folder, rows: list[dict]) -> list[str]:
    """Add Trainium rows to a folder laid out as the published dataset: each joins the file that holds its
    (neuronx_cc, library, library_version), or a new file named after the folder's own pattern (ours where its names
    show none); the files' own rows are kept exactly as they are (``published.merged``). A row that breaks the
    published rules (``schema.validate_row``), or a file that cannot be read, is refused in one line before anything
    is written."""
    folder = Path(folder)
    try:
        rows = _last_per_key(schema.checked_rows(rows, published=True), published.row_key)
    except schema.RowRefused as exc:
        raise schema.RowRefused(f"{folder} is laid out as the published Trainium dataset, which takes only PASS or "
                                f"FAIL rows measured on Trainium under Hub ids: {exc}") from None
    with folder_lock(folder):
        tables = {path.relative_to(folder).as_posix(): _readable(path)[0] for path in parquet_files(folder)}
        holds = {rel: published.pairs_in(table) for rel, table in tables.items()}
        # a new file beside the others (ours is the name where theirs show no pattern), never outside the folder
        home = (os.path.commonpath([os.path.dirname(rel) for rel in tables]) if tables else "") or DATA_DIR
        like = next(iter(tables.values())).schema if tables else None
        by_file: dict[str, list[dict]] = {}
        for row in rows:
            rel = published.file_for(published.pair_of(row), holds, str(folder)) or version_pair_file(row, home)
            by_file.setdefault(rel, []).append(row)
            holds.setdefault(rel, set()).add(published.pair_of(row))
        written = {rel: published.merged(tables.get(rel), new, str(folder / rel), like) for rel, new in by_file.items()}
        for rel, table in written.items():
            write_table_atomic(table, folder / rel)
    return sorted(by_file)


def conform(table: pa.Table, *, keep_other_columns: bool = False) -> pa.Table:
    """Cast a table to the current schema: columns it lacks (older harness versions, other tools) read as null, a
    table in the published layout reads through ``published.from_published`` (every column kept, its rows given a
    task and architecture where the package knows the model), and a row that names a neuronx-cc version but no
    backend ran on Trainium. ``keep_other_columns`` keeps, after ours, the columns the schema does not name."""
    source, converted = table, published.is_published_layout(table.column_names)
    if converted:
        source = _with_known_architectures(published.from_published(table))
    # what neither schema reads (a hybrid file's `tp` too) is kept as it is, never dropped
    other = [c for c in table.column_names if c not in schema.COLUMN_NAMES
             and not (converted and c in schema.PUBLISHED_NAMES)]
    columns = []
    for field in schema.SCHEMA:
        if field.name in source.column_names:
            columns.append(schema.cast_column(source.column(field.name), field.type, field.name))
        else:
            columns.append(pa.nulls(source.num_rows, type=field.type))
    out = _neuron_where_named(pa.Table.from_arrays(columns, schema=schema.SCHEMA))
    for name in other if keep_other_columns else []:
        out = out.append_column(name, table.column(name))
    return out


def _neuron_where_named(table: pa.Table) -> pa.Table:
    """Rows that record a neuronx-cc version and no backend (files of other tools) ran on Trainium: backend neuron,
    compiler neuronx-cc at that version."""
    import pyarrow.compute as pc

    named = pc.and_(pc.is_valid(table.column("neuronx_cc")), pc.is_null(table.column("backend")))
    if not pc.any(named).as_py():
        return table
    for name, value in (("backend", published.NEURON), ("compiler", NEURON_COMPILER),
                        ("compiler_version", table.column("neuronx_cc"))):
        index = table.schema.get_field_index(name)
        filled = pc.if_else(named, value, table.column(name))
        table = table.set_column(index, name, filled.cast(pa.string()))
    return table


def _with_known_architectures(table: pa.Table) -> pa.Table:
    """A published table's rows with the task and architecture the package knows of each model (models.known)."""
    from neuronhelpers.models.known import known_architectures

    known = known_architectures()
    ids = table.column("model_id").to_pylist()
    for index, name in enumerate(("task", "model_type")):
        table = table.append_column(name, pa.array([known.get(m, (None, None))[index] for m in ids], pa.string()))
    return table


def off_vocabulary(table: pa.Table) -> list[str]:
    """The distinct values of a (conformed) table that the vocabulary does not know, as 'column value' strings."""
    problems = []
    for kind in ("result", "stage", "verification", "evidence"):
        for value in sorted({v for v in table.column(kind).to_pylist() if v is not None}):
            try:
                vocab.check_value(kind, value)
            except vocab.VocabularyError:
                problems.append(f"{kind} {value!r}")
    return problems


def load_results_file(name, *, filesystem=None, validate: bool = True, keep_other_columns: bool = False) -> pa.Table:
    """One results Parquet file, conformed to the current schema (either layout); raises when it is unreadable or not
    results.

    With ``validate``, a value outside the vocabulary raises (publishing and contributing refuse such files).
    ``keep_other_columns`` keeps columns the schema does not name, after ours.
    """
    table = read_table(name, filesystem)
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"not a results file (no {', '.join(missing)} column)")
    table = conform(table, keep_other_columns=keep_other_columns)
    if validate:
        problems = off_vocabulary(table)
        if problems:
            raise vocab.VocabularyError(f"values outside the vocabulary: {', '.join(problems)}")
    return table


def load_results(path, *, validate: bool = True):
    """Read a results dataset (local folder or hf://datasets/...) into one DataFrame.

    Every file is unified with the current schema (columns it lacks read as null); a file laid out as the published
    dataset is read whole (``schema.PUBLISHED_COLUMNS``), so one folder may mix both layouts. The frame also carries
    the published names of our columns (``schema.ALIASES``: `tp` is `neuron_cores`), so a query written for either
    layout works, and any column a file holds that neither layout names. A file that cannot be read, or is not results
    (no model_id / result column), is named in a DatasetWarning (also in ``df.attrs['skipped']``) and skipped. With
    ``validate``, a file holding values outside the vocabulary is kept and named in one warning
    (``df.attrs['off_vocabulary']``), so nothing recorded is hidden.
    """
    path = str(path)
    if not path.startswith("hf://") and not os.path.isdir(path):
        raise UserError(f"no results dataset at '{path}': give a folder of Parquet files or an hf://datasets/... path")
    fs, files = list_parquet(path)
    tables, skipped, unknown = [], [], []
    for name in files:
        try:
            table = load_results_file(name, filesystem=fs, validate=False, keep_other_columns=True)
        except Exception as exc:  # noqa: BLE001 - one bad file must not hide the rest
            reason = first_line(exc)
            skipped.append((name, reason))
            warnings.warn(f"skipped {name}: {reason}", DatasetWarning, stacklevel=2)
            continue
        problems = off_vocabulary(table) if validate else []
        if problems:
            unknown.append((name, problems))
            warnings.warn(f"{name} holds values outside the neuronhelpers vocabulary ({', '.join(problems)}): "
                          "kept as they are", DatasetWarning, stacklevel=2)
        tables.append(table)
    table = pa.concat_tables(tables, promote_options="permissive") if tables else schema.SCHEMA.empty_table()
    df = with_aliases(table.to_pandas(types_mapper=_nullable_ints))
    df.attrs["skipped"] = skipped
    df.attrs["off_vocabulary"] = unknown
    df.attrs["files"] = [f for f in files if f not in {s[0] for s in skipped}]
    return df


def _nullable_ints(typ: pa.DataType):
    """Counts stay whole numbers in a frame (pandas' nullable integers, pd.NA where missing), never floats: a
    published file's `tp` 2 reads as 2, not 2.0."""
    import pandas as pd

    return pd.Int64Dtype() if pa.types.is_integer(typ) else None


def with_aliases(df):
    """The frame with the published names of our columns beside them (``schema.ALIASES``)."""
    return df.assign(**{alias: df[ours] for alias, ours in schema.ALIASES.items() if ours in df and alias not in df})


def row_records(df) -> list[dict]:
    """A frame's rows as rows to write again: the schema's columns only (aliases and other tools' columns left out),
    a missing value None (pandas reads a null string as NaN, which the vocabulary rightly refuses)."""
    df = df[[c for c in schema.COLUMN_NAMES if c in df]].astype(object)
    return df.where(df.notna(), None).to_dict("records")


def recorded_keys(folder, where: Callable[[dict], bool] | None = None) -> set[tuple]:
    """Resume keys of the rows already in a local dataset folder (unreadable files contribute none); ``where``: only
    the rows it accepts (a row as a dict of its columns)."""
    if not os.path.isdir(folder):
        return set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        df = load_results(folder, validate=False)
    if df.empty:
        return set()
    attempts = _keys(df[[vocab.is_attempt(r, s) for r, s in zip(df["result"], df["stage"], strict=True)]])
    if where is not None:  # whole rows only where asked: the plain resume path reads the key columns alone
        df = df[[bool(where(row)) for row in row_records(df)]]
    # a model whose last attempt was a fault of the machine or of its files is not recorded: the next sweep runs it
    return _keys(df) - attempts


def _keys(df) -> set[tuple]:
    columns = df[list(schema.RESUME_KEY)].astype(object)
    return {schema.resume_key(dict(zip(schema.RESUME_KEY, values, strict=True)))
            for values in columns.values.tolist()}


def newest_per_model(df, key: str | list[str] = "model_id"):
    """Each model's newest row (by ``timestamp``; rows without one count as oldest, and among equals the later row
    in the frame wins). The one rule every view, plot and diff uses. ``key`` may add columns (e.g. the task).

    A verdict is never hidden by a fault: within one version pair, a newer UNTESTED row of an attempt stage
    (``vocab.ATTEMPT_STAGES``: infrastructure, input) gives way to the model's older PASS or FAIL, which comes back
    with ``last_attempt`` saying when and why the newer attempt reached no verdict ("infrastructure, 2026-12-06: ...");
    a newer verdict still replaces an older one. Rows without result and stage columns take the newest alone."""
    if "timestamp" in df:
        df = df.sort_values("timestamp", na_position="first", kind="stable")
    if {"result", "stage"} <= set(df.columns) and len(df):
        df = verdicts_before_attempts(df, [key] if isinstance(key, str) else list(key))
    return df.drop_duplicates(key, keep="last")


def version_key(value):
    """A version as it sorts: as a version, not as text (2.14.1 after 2.9.0; a local label such as +cpu ignored), and
    anything that is no version before every version."""
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(str(value).split("+")[0]))
    except InvalidVersion:
        return (0, Version("0"))


def version_pairs(df) -> list[tuple[str, str, str]]:
    """The (library, compiler version, library version) pairs in a results frame, newest first: by compiler
    version, then library version, ordered as versions (``version_key``)."""
    pairs = {(r.library, r.compiler_version, r.library_version)
             for r in df[["library", "compiler_version", "library_version"]].itertuples(index=False)}
    return sorted(pairs, key=lambda p: (version_key(p[1]), version_key(p[2]), str(p[0])), reverse=True)


def pair_rows(df, library: str, compiler_version: str, library_version: str):
    """The rows of one library at one (compiler version, library version) pair."""
    return df[(df["library"] == library) & (df["compiler_version"] == compiler_version)
              & (df["library_version"] == library_version)]


def verdicts_per_pair(df):
    """One line per (version pair, task): how many models, how many PASS / FAIL / UNTESTED (each model's newest row),
    the share that reached a verdict, and the pass rate of those tested: two different shares, named apart. The
    pair is one library's version under one compiler; libraries are never mixed in a line."""
    import pandas as pd

    lines = []
    for library, compiler_version, library_version in version_pairs(df):
        rows = newest_per_model(pair_rows(df, library, compiler_version, library_version))
        rows = rows.assign(task=rows["task"].fillna("(no task)")) if "task" in rows else rows.assign(task="(no task)")
        compiler = (rows["compiler"].dropna().iloc[0] if "compiler" in rows and rows["compiler"].notna().any()
                    else "compiler")
        for task, group in rows.groupby("task", sort=True):
            counts = group.result.value_counts()
            passed, failed, untested = (int(counts.get(r, 0)) for r in (vocab.PASS, vocab.FAIL, vocab.UNTESTED))
            tested = passed + failed
            lines.append({"compiler": f"{compiler} {compiler_version}", "library": f"{library} {library_version}",
                          "task": task, "models": len(group), vocab.PASS: passed, vocab.FAIL: failed,
                          vocab.UNTESTED: untested,
                          "with a verdict": f"{tested / len(group):.0%}",
                          "pass rate of tested": f"{passed / tested:.0%}" if tested else "-"})
    return pd.DataFrame(lines, columns=["compiler", "library", "task", "models", vocab.PASS, vocab.FAIL, vocab.UNTESTED,
                                        "with a verdict", "pass rate of tested"])


def current_or_newest(df, backend=None):
    """This environment's pair (``select_pair(df, "current")``); where the frame holds no row of it (a trn2 reading
    a catalog swept with inductor), the newest pair instead. Returns (rows, pair, a line saying which was used, each
    compiler version with the compiler's name: inductor and neuronx-cc number their releases apart)."""
    from neuronhelpers.core import versions
    from neuronhelpers.core.backends import get_backend

    rows, pair = select_pair(df, "current", backend)
    here = versions.compiler_for(backend or get_backend("auto"))[0]
    if len(rows) or not len(df):
        return rows, pair, f"this environment's pair: {here} {pair[0]}, transformers {pair[1]}"
    newest, newest_pair = select_pair(df, "newest")
    named = newest["compiler"].dropna() if "compiler" in newest else ()
    there = named.iloc[0] if len(named) else "compiler"
    return newest, newest_pair, (f"no rows for this environment's pair ({here} {pair[0]}, transformers {pair[1]}): "
                                 f"the newest pair the data holds instead ({there} {newest_pair[0]}, "
                                 f"transformers {newest_pair[1]})")


def select_pair(df, pair: str | None, backend=None):
    """The rows of one version pair: ``"current"`` (this environment's compiler on ``backend``, default the detected
    one, and for each row's library its installed version), ``"newest"`` (the newest compiler, and each library's
    newest release under it), ``"COMPILER_VERSION,LIBRARY_VERSION"``, or all rows when None.
    Returns (rows, (compiler version, library version) or None)."""
    if pair is None:
        return df, None
    if pair == "current":
        from neuronhelpers.core import versions
        from neuronhelpers.core.backends import get_backend

        compiler = versions.compiler_for(backend or get_backend("auto"))[1]
        installed = {lib: versions.library_version(lib) for lib in df["library"].dropna().unique()}
        mine = df.library.map(installed) == df.library_version
        return df[(df.compiler_version == compiler) & mine], (compiler, versions.library_version(vocab.TRANSFORMERS))
    if pair == "newest":  # the newest compiler, and under it each library's newest release
        pairs = version_pairs(df)
        if not pairs:
            return df, None
        compiler = pairs[0][1]
        newest = {}
        for library, compiler_version, library_version in pairs:  # newest first
            if compiler_version == compiler:
                newest.setdefault(library, library_version)
        keep = (df.compiler_version == compiler) & (df.library.map(newest) == df.library_version)
        return df[keep], (compiler, newest.get(vocab.TRANSFORMERS) or next(iter(newest.values())))
    else:
        parts = [p.strip() for p in pair.split(",")]
        if len(parts) != 2:
            raise UserError(f"--pair '{pair}': give COMPILER_VERSION,LIBRARY_VERSION (e.g. 2.14.1,5.23.0), "
                            "current or newest")
        chosen = tuple(parts)
    if chosen is None:
        return df, None
    return df[(df.compiler_version == chosen[0]) & (df.library_version == chosen[1])], chosen
