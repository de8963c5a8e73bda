"""Read what `martlet export` wrote: every Parquet file of a topic as one pyarrow dataset,
with `partition` and `hour` as columns, and a count per partition and hour.

    martlet export events --to /tmp/lake --values utf8
    python examples/parquet_export/read_export.py /tmp/lake events
"""

from __future__ import annotations

import argparse

import pyarrow.dataset as ds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", help="the --to folder of martlet export")
    parser.add_argument("topic")
    args = parser.parse_args()
    table = ds.dataset(f"{args.folder}/{args.topic}", format="parquet", partitioning="hive").to_table()
    counts = table.group_by(["partition", "hour"]).aggregate([("offset", "count")]).sort_by(
        [("partition", "ascending"), ("hour", "ascending")])
    for row in counts.to_pylist():
        print(f"partition {row['partition']} hour {row['hour']}: {row['offset_count']} records")
    print(f"{table.num_rows} records of {args.topic}")


if __name__ == "__main__":
    main()
