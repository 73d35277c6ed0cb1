"""Reads a Delta table with delta-rs (the `deltalake` package), the independent reader of
filesink's Delta tests, and prints what a test asks as one JSON document.

    read_table.py URI ids [--version V] [--column id]
    read_table.py URI history
    read_table.py URI txn APP_ID [--version V]
    read_table.py URI files [--version V]
    read_table.py URI protocol

URI is a local directory or s3://bucket/prefix; for S3 the endpoint and credentials come from
the environment: FILESINK_DELTA_S3_ENDPOINT, AWS_REGION, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY (tests/common/delta_py.rs sets them).
"""

import argparse
import json
import os
import sys

from deltalake import DeltaTable


def storage_options(uri):
    if not uri.startswith("s3://"):
        return None
    return {
        "AWS_ENDPOINT_URL": os.environ["FILESINK_DELTA_S3_ENDPOINT"],
        "AWS_REGION": os.environ.get("AWS_REGION", "garage"),
        "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        "AWS_FORCE_PATH_STYLE": "true",
    }


def open_table(uri, version):
    return DeltaTable(uri, version=version, storage_options=storage_options(uri))


def plain(value):
    """A JSON-able value of what delta-rs returns."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("uri")
    parser.add_argument("command", choices=["ids", "history", "txn", "files", "protocol"])
    parser.add_argument("app_id", nargs="?")
    parser.add_argument("--version", type=int)
    parser.add_argument("--column", default="id")
    args = parser.parse_args()
    table = open_table(args.uri, args.version)
    out = {"version": table.version()}
    if args.command == "ids":
        data = table.to_pyarrow_table(columns=[args.column])
        out["ids"] = data.column(args.column).to_pylist()
    elif args.command == "history":
        out["history"] = [plain(h) for h in table.history()]
    elif args.command == "txn":
        out["txn"] = table.transaction_version(args.app_id)
    elif args.command == "files":
        actions = table.get_add_actions(flatten=True)
        columns = {name: actions.column(name).to_pylist() for name in actions.schema.names}
        rows = len(columns["path"]) if "path" in columns else 0
        out["files"] = [
            {name: plain(columns[name][i]) for name in columns} for i in range(rows)
        ]
    elif args.command == "protocol":
        p = table.protocol()
        out["protocol"] = {
            "min_reader_version": p.min_reader_version,
            "min_writer_version": p.min_writer_version,
            "reader_features": plain(p.reader_features),
            "writer_features": plain(p.writer_features),
        }
        out["partition_columns"] = table.metadata().partition_columns
    json.dump(out, sys.stdout)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
    # Skip the interpreter's teardown: under load, the native threads of delta-rs and pyarrow
    # can abort the process while it exits ("terminate called without an active exception"),
    # after the answer is printed.
    os._exit(0)
