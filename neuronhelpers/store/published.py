"""The published dataset's layout: read it whole, and write to it without harm.

The published dataset (``settings.dataset_repo()``) has the 24 columns of ``schema.PUBLISHED_COLUMNS`` (one of its
files lacks `exclusion`), names the cores `tp`, and says nothing of backend or compiler: each row is a Hub checkpoint
measured on Trainium. ``from_published`` reads such a table as our columns, every published value kept;
``merged`` writes rows into such a file: the file's own rows copied from its table as they are (a column it lacks
added as nulls, so every file it writes has the same columns), ours converted into its columns, what ours measure
beyond them left out. Which file a row joins is found by the values the files hold (``PAIR``), and a new file is named
after the pattern the existing names show (``name_pattern``). Taught in notebooks 01 and 05.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from neuronhelpers.core import vocab
from neuronhelpers.core.backends import get_backend
from neuronhelpers.core.errors import UserError, first_line
from neuronhelpers.core.versions import NEURON_COMPILER
from neuronhelpers.store import schema
from neuronhelpers.store.files import with_metadata_of

NEURON = get_backend("neuron").name
# The values that place a published row: its file holds one (compiler, library, library version) pair.
PAIR = ("neuronx_cc", "library", "library_version")
# A row already in a file is not added again: the same model, versions, cores and time of test.
ROW_KEY = ("model_id", *PAIR, schema.PUBLISHED_CORES, "tested_at")
# Columns only one of the two layouts has: a file is in the published layout when it holds one of the first and none
# of the second.
PUBLISHED_ONLY = frozenset(schema.PUBLISHED_NAMES) - frozenset(schema.COLUMN_NAMES)
OURS_ONLY = frozenset(schema.COLUMN_NAMES) - frozenset(schema.PUBLISHED_NAMES)


def is_published_layout(names) -> bool:
    """Whether a file with these columns is laid out as the published dataset (`tp`, `tested_at`, ...) rather than
    as ours (`neuron_cores`, `backend`, ...)."""
    names = set(names)
    return bool(names & PUBLISHED_ONLY) and not names & OURS_ONLY


# ------------------------------------------------------------------------------------------------
# Reading: the published columns as ours
# ------------------------------------------------------------------------------------------------


def from_published(table: pa.Table) -> pa.Table:
    """A table in the published layout as our columns (not yet cast to the whole schema): each published column under
    the name ``schema.PUBLISHED_COLUMNS`` gives it, converted where the unit differs; a missing column reads as null;
    every row a Hub checkpoint on Trainium (backend neuron, compiler neuronx-cc at version `neuronx_cc`)."""
    rows = table.num_rows

    def column(name: str) -> pa.ChunkedArray | pa.Array:
        """The column as the file holds it (our schema's cast follows: a file's float `wall_s` loses nothing), or
        nulls of the published type where the file lacks it."""
        return (table.column(name) if name in table.column_names
                else pa.nulls(rows, schema.PUBLISHED_SCHEMA.field(name).type))

    out = {ours: column(published) for published, _, ours, _ in schema.PUBLISHED_COLUMNS
           if published not in schema.PUBLISHED_CONVERTED}
    gib = pc.multiply(column("hbm_peak_gb").cast(pa.float64()), float(schema.PUBLISHED_GB))
    gib = pc.if_else(pc.is_nan(gib), pa.scalar(None, pa.float64()), gib)  # a NaN is no memory figure: null
    out["peak_memory_bytes"] = pc.round(gib).cast(pa.int64())
    # nanoseconds, where a file keeps them, are below what the row keeps: truncated rather than the file skipped
    out["timestamp"] = schema.cast_column(column("tested_at"), pa.timestamp("us", tz="UTC"), "tested_at")
    results, errors = _with_exclusions(column("result").to_pylist(), column("error").to_pylist(),
                                       column("exclusion").to_pylist())
    out["result"], out["error"] = pa.array(results, pa.string()), pa.array(errors, pa.string())
    out["backend"] = pa.array([NEURON] * rows, pa.string())
    out["compiler"] = pa.array([NEURON_COMPILER] * rows, pa.string())
    out["compiler_version"] = out["neuronx_cc"]
    return pa.table(out)


def _with_exclusions(results: list, errors: list, exclusions: list) -> tuple[list, list]:
    """A row with a non-empty exclusion is EXCLUDED, the exclusion its reason; what it recorded as result and error
    follows the reason, so nothing read is lost."""
    out_results, out_errors = [], []
    for result, error, exclusion in zip(results, errors, exclusions, strict=True):
        if not (isinstance(exclusion, str) and exclusion.strip()):
            out_results.append(result)
            out_errors.append(error)
            continue
        reason = exclusion
        if error and error != exclusion:
            reason += f" (error recorded: {error})"
        if result and result != vocab.EXCLUDED:
            reason += f" (result recorded: {result})"
        out_results.append(vocab.EXCLUDED)
        out_errors.append(reason)
    return out_results, out_errors


# ------------------------------------------------------------------------------------------------
# Writing: our rows in the published columns, merged into a published file
# ------------------------------------------------------------------------------------------------


def _published_value(published: str, ours: str, row: dict):
    """One of our row's values in a published column (``schema.PUBLISHED_COLUMNS`` read backwards)."""
    value = row.get(ours)
    if value is None or pd.isna(value) is True:  # None, NaN or NaT from a pandas frame's records
        value = None
    excluded = row.get("result") == vocab.EXCLUDED
    if published == "exclusion":
        return value if excluded else None
    if published == "error":
        return None if excluded else value
    if value is None:
        return None
    if published in (schema.PUBLISHED_CORES, "wall_s"):
        return int(round(float(value)))
    if published == "hbm_peak_gb":
        return float(value) / schema.PUBLISHED_GB
    if published == "tested_at":  # the published files keep milliseconds; a time without a zone is UTC, as ours
        value = value.to_pydatetime() if hasattr(value, "to_pydatetime") else value
        value = value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)
        return value.replace(microsecond=value.microsecond // 1000 * 1000)
    return value


def to_published(rows: list[dict]) -> pa.Table:
    """Our rows in the published columns, names, types and order; published columns our rows do not record are
    null, and what they measure beyond the published columns is left out."""
    arrays = [pa.array([_published_value(name, ours, row) for row in rows], typ)
              for name, typ, ours, _ in schema.PUBLISHED_COLUMNS]
    return pa.Table.from_arrays(arrays, schema=schema.PUBLISHED_SCHEMA)


def merged(original: pa.Table | None, rows: list[dict], where: str, like: pa.Schema | None = None) -> pa.Table:
    """A published file as it will be written: its own rows copied from ``original`` as they are, in the types the
    file has (a published column it lacks added as nulls, the columns in the published order), then ``rows`` in those
    columns and types, less those already in it (``ROW_KEY``). A new file takes the types of a file beside it
    (``like``), else the published ones. A file with a column the published layout does not have, or whose types
    cannot hold our values, is refused in one line."""
    new = to_published(rows)
    if original is None and like is not None:
        original = like.empty_table()
    if original is None:
        return new
    unknown = [c for c in original.column_names if c not in schema.PUBLISHED_NAMES]
    if unknown:
        raise UserError(f"{where} has column(s) the published layout neuronhelpers knows does not: "
                        f"{', '.join(unknown)}; nothing was written (update neuronhelpers)")
    # the file's own types, but the published one where the file typed a column null (it can hold nothing)
    fields = [original.schema.field(f.name) if f.name in original.column_names
              and not pa.types.is_null(original.schema.field(f.name).type) else f for f in schema.PUBLISHED_SCHEMA]
    target = pa.schema([pa.field(f.name, f.type) for f in fields])
    kept = pa.Table.from_arrays([original.column(f.name).cast(f.type) if f.name in original.column_names
                                 else pa.nulls(original.num_rows, f.type) for f in target], schema=target)
    try:
        new = new.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise UserError(f"{where}: its column types cannot hold these rows ({first_line(exc)}); nothing was "
                        "written") from None
    there = dict(zip(zip(*(kept.column(k).to_pylist() for k in ROW_KEY), strict=True), kept.to_pylist(),
                     strict=True))
    fresh = []
    for key, row in zip(zip(*(new.column(k).to_pylist() for k in ROW_KEY), strict=True), new.to_pylist(), strict=True):
        if key in there and there[key] != row:  # the same test recorded otherwise: a published row is not rewritten
            changed = sorted(name for name in row if row[name] != there[key].get(name))
            raise UserError(f"{where} already holds {key[0]} tested at {key[-1]} with other values "
                            f"({', '.join(changed)}): a published row is not overwritten; nothing was written")
        fresh.append(key not in there)
    # the file's own schema metadata (the Hub's `huggingface` features) where its columns are unchanged
    return with_metadata_of(pa.concat_tables([kept, new.filter(pa.array(fresh, pa.bool_()))]), original)


def row_key(row: dict) -> tuple:
    """Our row's ``ROW_KEY`` in the published columns' values (cores as `tp`, the time in milliseconds)."""
    ours = {name: mine for name, _, mine, _ in schema.PUBLISHED_COLUMNS}
    return tuple(_published_value(name, ours[name], row) for name in ROW_KEY)


# ------------------------------------------------------------------------------------------------
# Which file: by the values the files hold, and the pattern their names show
# ------------------------------------------------------------------------------------------------


def pair_of(row: dict) -> tuple:
    return tuple(row.get(name) for name in PAIR)


def pairs_in(table: pa.Table) -> set[tuple]:
    """The (neuronx_cc, library, library_version) pairs a published-layout table holds."""
    names = [n for n in PAIR if n in table.column_names]
    values = [table.column(n).to_pylist() if n in names else [None] * table.num_rows for n in PAIR]
    return set(zip(*values, strict=True))


def safe_name(part) -> str:
    """A value as it may appear in a file name."""
    import re

    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", str(part))


def _template(path: str, pair: tuple) -> str | None:
    """A file's path with the values it holds replaced by their fields ('{neuronx_cc}'), longest value first, each
    only where it stands whole (not '5.0' inside '2.25.0'); None where two fields hold the same value."""
    import re

    if len({str(v) for v in pair if v}) < len([v for v in pair if v]):
        return None  # which field a name holds would be a guess
    template = path.replace("{", "{{").replace("}", "}}")
    for field, value in sorted(zip(PAIR, pair, strict=False), key=lambda fv: -len(str(fv[1] or ""))):
        if value:  # whole: no letter, digit or 'digit.' before it, no letter, digit or '.digit' after it
            whole = re.compile(rf"(?<![\w])(?<!\d\.){re.escape(safe_name(value))}(?![\w])(?!\.\d)")
            template = whole.sub("{" + field + "}", template)
    return template


def name_pattern(files: dict[str, set[tuple]]) -> str | None:
    """The pattern a dataset's file names follow ('data/{library}-{library_version}/{neuronx_cc}.parquet'), read
    from the files that each hold one pair; None when they show none, disagree, or leave a version out."""
    templates = {_template(path, next(iter(pairs))) for path, pairs in files.items() if len(pairs) == 1}
    if len(templates) != 1 or None in templates:
        return None
    template = templates.pop()
    # both versions must stand in the name, or two pairs would share one (the library may be implied by a folder)
    return template if "{neuronx_cc}" in template and "{library_version}" in template else None


def file_for(pair: tuple, files: dict[str, set[tuple]], where: str) -> str | None:
    """The file of a dataset that holds this pair's rows, else the name the dataset's own pattern gives it (None
    where its names show no pattern). A pair spread over several files is refused in one line."""
    holding = sorted(path for path, pairs in files.items() if pair in pairs)
    if len(holding) > 1:
        raise UserError(f"{where}: the rows of neuronx-cc {pair[0]}, {pair[1]} {pair[2]} are spread over "
                        f"{', '.join(holding)}; neuronhelpers cannot choose one (nothing was written)")
    if holding:
        return holding[0]
    pattern = name_pattern(files)
    if pattern is None:
        return None
    path = pattern.format(**{field: safe_name(value) for field, value in zip(PAIR, pair, strict=False)})
    return None if path in files else path
