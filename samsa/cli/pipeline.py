"""`samsa pipeline run|query`: the Spark job of the data pipeline, and SQL over what it stored.

    samsa pipeline run [--bootstrap-server B] [--data-dir D] [--master URL] ...
    samsa pipeline query "SELECT city, max(aqi) FROM windows GROUP BY city" [--data-dir D]

`query` runs DuckDB over the parquet the job wrote, with three views:

    readings     every valid reading (partitioned by date)
    aggregates   every window update the job emitted (one row per update, with batch_id)
    windows      each window's latest update: the final numbers of closed windows
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from samsa.cli.common import ArgumentParser, CliError, check_bootstrap


def run(argv: list[str]) -> int:
    ap = ArgumentParser(prog="samsa pipeline", description="The data pipeline's Spark job and its stored results.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="{run,query}")
    from samsa.pipeline import job

    r = sub.add_parser("run", help="run the Spark Structured Streaming job until Ctrl-C",
                       description=job.__doc__.split("\n\n")[0])
    job.add_arguments(r)
    r.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    q = sub.add_parser("query", help="run SQL (DuckDB) over the stored readings and windows")
    q.add_argument("sql", help='e.g. "SELECT city, max(aqi) FROM windows GROUP BY city"')
    q.add_argument("--data-dir", default="samsa-pipeline-data", help="the job's --data-dir")
    q.add_argument("--format", choices=("table", "csv", "json"), default="table")
    args = ap.parse_args(argv)
    if args.command == "run":
        check_bootstrap(args.bootstrap_server)
    if args.command == "query":
        return query(Path(args.data_dir), args.sql, args.format)
    return run_job(args)


def run_job(args: Any) -> int:
    from samsa.pipeline import job

    try:
        cfg = job.config_from(args)
    except ValueError as e:  # a bad --command-config
        raise CliError(f"--command-config: {e}") from None
    try:
        jars = job.session_jars(cfg)
    except job.ConnectorJarsMissing as e:  # --connector kafka without the connector's jars
        raise CliError(str(e)) from None
    print(f"==> starting Spark ({args.master or 'local[2]'}) for the pipeline job ({cfg.connector} connector); "
          f"data in {args.data_dir}", flush=True)
    spark = job.spark_session(args.master, ui=args.spark_ui, jars=jars)
    try:
        pipeline = job.PipelineJob(spark, cfg).start()
    except Exception as e:  # a bad option or an unreachable broker: the source says which
        raise CliError(str(e).strip().splitlines()[-1]) from None
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    deadline = None if args.duration is None else time.monotonic() + args.duration
    print("==> pipeline job running (Ctrl-C stops it; a restart resumes from its checkpoints)", flush=True)
    try:
        while not stop["now"] and (deadline is None or time.monotonic() < deadline):
            time.sleep(2)
            problem = pipeline.failed()
            if problem:
                raise CliError(problem)
            s = pipeline.last_status
            if s:
                print(f"batch {s['batch_id']}: {s['input_rows']} rows, {s['processed_rows_per_second']:.0f} rows/s, "
                      f"{s['windows_written']} window updates, {s['alerts_sent']} alerts", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        pipeline.stop()
        spark.stop()
    print("==> pipeline job stopped", flush=True)
    return 0


def views(data_dir: Path) -> dict[str, str]:
    """The SQL of each view over `data_dir` (views whose files do not exist yet are left out)."""
    out = {}
    readings = data_dir / "readings"
    if any(readings.glob("date=*/batch=*/*.parquet")):
        out["readings"] = (f"SELECT * EXCLUDE (batch) FROM read_parquet('{readings}/date=*/batch=*/*.parquet', "
                           "hive_partitioning = true)")
    aggregates = data_dir / "aggregates"
    if any(aggregates.glob("date=*/*.parquet")):
        out["aggregates"] = (f"SELECT * FROM read_parquet('{aggregates}/date=*/*.parquet', hive_partitioning = true,"
                             " union_by_name = true)")
        out["windows"] = ("SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY kind, key, "
                          "window_start ORDER BY batch_id DESC) AS rn FROM aggregates) WHERE rn = 1")
    return out


def query(data_dir: Path, sql: str, fmt: str) -> int:
    try:
        import duckdb
    except ImportError:
        raise CliError("DuckDB is not installed: pip install -e '.[pipeline]'") from None
    if not data_dir.is_dir():
        raise CliError(f"no pipeline data in {data_dir}: run `samsa demo` or `samsa pipeline run` first, "
                       "or pass --data-dir")
    con = duckdb.connect()
    made = views(data_dir)
    for name, body in made.items():
        con.execute(f"CREATE VIEW {name} AS {body}")
    try:
        result = con.execute(sql)
    except duckdb.Error as e:
        hint = "" if made else f" (nothing stored in {data_dir} yet)"
        raise CliError(f"{str(e).splitlines()[0]}{hint}; views: {', '.join(made) or 'none'}") from None
    columns = [d[0] for d in result.description or []]
    rows = result.fetchall()
    if fmt == "json":
        for row in rows:
            print(json.dumps(dict(zip(columns, row)), default=str))
    elif fmt == "csv":
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(columns)
        w.writerows(rows)
    else:
        print(_table(columns, rows))
    return 0


def _table(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    def cell(v: Any) -> str:
        return f"{v:.2f}" if isinstance(v, float) else "" if v is None else str(v)

    text = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in text]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)
