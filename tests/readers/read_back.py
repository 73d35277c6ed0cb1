"""Reads a lake back with pyarrow, DuckDB and (for a Delta table) delta-rs, and prints, per
reader, each column's type and its values in `id` order, as one JSON document:

    read_back.py LAKE parquet|delta
    read_back.py LAKE jsonl|csv COLUMNS

Visible files only: names starting with `.` or `_` (hidden part files, metadata) are left
out, as every reader of a plain lake leaves them out. JSON lines and CSV carry no types, so
the readers are told them, as a user of those files tells them: COLUMNS is a JSON list of
`{"name", "pyarrow", "duckdb"}` (pyarrow's type as it prints it, DuckDB's type name).
"""

import json
import os
import re
import sys

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds


def visible_parquet(lake, suffix=".parquet"):
    out = []
    for root, dirs, files in os.walk(lake):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        out += [os.path.join(root, f) for f in files
                if f.endswith(suffix) and not f.startswith((".", "_"))]
    return sorted(out)


def pa_type(s):
    """The pyarrow type that prints as `s`."""
    m = re.fullmatch(r"timestamp\[(\w+)(?:, tz=(.+))?\]", s)
    if m:
        return pa.timestamp(m.group(1), tz=m.group(2))
    m = re.fullmatch(r"decimal(128|256)\((\d+), (\d+)\)", s)
    if m:
        make = pa.decimal128 if m.group(1) == "128" else pa.decimal256
        return make(int(m.group(2)), int(m.group(3)))
    if s == "date32[day]":
        return pa.date32()
    return pa.type_for_alias(s)


def read_rows(lake, kind, columns):
    """pyarrow and DuckDB on the JSON lines or CSV files of `lake`, told the columns' types.
    pyarrow's JSON reader takes a date only as a number of days: a date is read as text and
    cast, as a user of the file does."""
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    files = visible_parquet(lake, "." + kind)
    types = {c["name"]: pa_type(c["pyarrow"]) for c in columns}
    tables = []
    for f in files:
        if kind == "jsonl":
            as_read = pa.schema([(n, pa.string() if t == pa.date32() else t)
                                 for n, t in types.items()])
            t = pjson.read_json(f, parse_options=pjson.ParseOptions(explicit_schema=as_read))
            t = t.cast(pa.schema(list(types.items())))
        else:
            # filesink writes a null as an empty field and an empty string as `""`.
            t = pcsv.read_csv(f, convert_options=pcsv.ConvertOptions(
                column_types=types, strings_can_be_null=True, quoted_strings_can_be_null=False))
        tables.append(t.select(list(types)))
    out = {"pyarrow": columns_of(pa.concat_tables(tables))}
    duck_columns = {c["name"]: c["duckdb"] for c in columns}
    reader = ("read_json($files, format='newline_delimited', columns=$columns)"
              if kind == "jsonl" else
              "read_csv($files, header=true, columns=$columns, allow_quoted_nulls=false)")
    rel = duckdb.connect().sql(f"select * from {reader} order by id",
                               params={"files": files, "columns": duck_columns})
    rows = rel.fetchall()
    out["duckdb"] = {
        name: {"type": str(t), "values": [None if r[i] is None else str(r[i]) for r in rows]}
        for i, (name, t) in enumerate(zip(rel.columns, rel.types))
    }
    return out


def columns_of(table):
    table = table.sort_by("id")
    return {
        f.name: {"type": str(f.type),
                 "values": table.column(f.name).cast(pa.string()).to_pylist()}
        for f in table.schema
    }


def main():
    lake, kind = sys.argv[1], sys.argv[2]
    if kind in ("jsonl", "csv"):
        print(json.dumps(read_rows(lake, kind, json.loads(sys.argv[3]))))
        return
    files = visible_parquet(lake)
    out = {"pyarrow": columns_of(ds.dataset(files, format="parquet").to_table())}
    con = duckdb.connect()
    rel = con.sql("select * from read_parquet($files) order by id", params={"files": files})
    out["duckdb"] = {
        name: {"type": str(t), "values": [None if r[i] is None else str(r[i]) for r in rel.fetchall()]}
        for i, (name, t) in enumerate(zip(rel.columns, rel.types))
    }
    if kind == "delta":
        from deltalake import DeltaTable
        out["delta-rs"] = columns_of(DeltaTable(lake).to_pyarrow_table())
    print(json.dumps(out))


main()
