"""Reads a lake back with pyarrow, DuckDB and (for a Delta table) delta-rs, and prints, per
reader, each column's type and its values in `id` order, as one JSON document:

    read_back.py LAKE parquet|delta

Visible Parquet files only: names starting with `.` or `_` (hidden part files, metadata) are
left out, as every reader of a plain lake leaves them out.
"""

import json
import os
import sys

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds


def visible_parquet(lake):
    out = []
    for root, dirs, files in os.walk(lake):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        out += [os.path.join(root, f) for f in files
                if f.endswith(".parquet") and not f.startswith((".", "_"))]
    return sorted(out)


def columns_of(table):
    table = table.sort_by("id")
    return {
        f.name: {"type": str(f.type),
                 "values": table.column(f.name).cast(pa.string()).to_pylist()}
        for f in table.schema
    }


def main():
    lake, kind = sys.argv[1], sys.argv[2]
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
