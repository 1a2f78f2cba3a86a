"""Benchmark: upgrade.yml from Slurm 24.11 to 26.05 (three majors) with an accounting history of 10,000 jobs.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`; uses the
namespace and image tags of tests/k8s/test_day2.py (do not run both at once):

    .venv/bin/python benchmarks/upgrade_major.py [--jobs 10000] [--json results.json]

  deploy    site.yml through the Kubernetes API, 2 workers, images day2-old (Slurm 24.11)
  history   20 real jobs (sbatch, COMPLETED), then --jobs rows more in the job table: copies of one of
            those real rows with job ids from 1,000,001 on, made by one INSERT ... SELECT in MariaDB (the schema
            conversion's cost is in the rows; running 10,000 jobs through 2 workers here would take
            longer than the whole benchmark)
  upgrade   upgrade.yml -e cluster_image_tag=day2-new (Slurm 26.05) -e upgrade_wait_for_jobs=true with
            a job running and one pending: the version check, dump, drain, wait for the running job,
            slurmdbd (converts the database), slurmctld (reads 24.11's state), slurmd, login, verify,
            resume
Reported: the maintenance window (drain to resume, as upgrade.yml prints it), the playbook time,
slurmdbd's conversion time (as upgrade.yml reports it from slurmdbd's log), the dump's size, the rows
before and after (sacct), and that the pending job ran with its id.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections"))

# pylint: disable=wrong-import-position
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.k8s.test_day2 import NAME, NEW, NEW_MAJOR, OLD, OLD_MAJOR, WINDOW, sacct_history  # noqa: E402
from tests.support.kube import start_cluster  # noqa: E402
from tests.support.proc import wait_for  # noqa: E402

CONVERTED = re.compile(r"slurmdbd converted the accounting database to its schema in ([0-9.]+) s")
RELEASE = "/tmp/upgrade-major-release"


def add_history(deployment, jobs):
    """`jobs` more rows in the cluster's job table, copies of its newest real job with new ids."""
    table = "%s_job_table" % NAME
    shown = deployment.maria("SHOW COLUMNS FROM %s" % table, database="slurm_acct_db")
    columns = [line.split("\t")[0] for line in shown.splitlines()]
    copied = [name for name in columns if name != "job_db_inx"]   # the key is AUTO_INCREMENT
    # (quoted: some columns have the names of SQL words, e.g. `partition`)
    # ids from 1,000,001 on: far above the ones slurmctld gives the jobs submitted afterwards
    values = ", ".join("1000000 + seq" if name == "id_job" else "`%s`" % name for name in copied)
    deployment.maria("INSERT INTO %s (%s) SELECT %s FROM %s JOIN seq_1_to_%d WHERE job_db_inx = (SELECT MAX(job_db_inx) FROM %s)"
                     % (table, ", ".join("`%s`" % name for name in copied), values, table, jobs, table),
                     database="slurm_acct_db")
    return int(deployment.maria("SELECT COUNT(*) FROM %s" % table, database="slurm_acct_db"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=10000, help="rows added to the job table (default 10000)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    kube = start_cluster()
    for tag, major in ((OLD, OLD_MAJOR), (NEW, NEW_MAJOR)):
        kube.build_and_load_images(tag, slurm_major=major)
    workdir = Path(tempfile.mkdtemp(prefix="upgrade-major-"))
    deployment = SlurmOnKube(kube, workdir, NAME, OLD, 30042, slurmd_cpus=1,
                             upgrade_backup_dir=str(workdir / "backups"))
    kube.delete_namespace(deployment.namespace)
    try:
        deployment.playbook("site")
        deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 90)
        real = [deployment.sbatch("--wrap", "true") for _number in range(20)]
        wait_for(lambda: all(deployment.accounted_state(job) == ["COMPLETED"] for job in real), 120, "20 jobs completed")
        rows = add_history(deployment, args.jobs)
        before = sacct_history(deployment)
        running = deployment.sbatch("-w", "slurmd-0", "-t", "10", "--wrap", "while [ ! -e %s ]; do sleep 0.5; done" % RELEASE)
        wait_for(lambda: deployment.job_state(running) == "RUNNING", 30, "job %s running" % running)
        pending = deployment.sbatch("--begin=now+3600", "--wrap", "hostname")

        def release():
            # once the drain waits for it: the window then holds the wait, as it would for a real job
            time.sleep(5)
            kube.exec(deployment.namespace, "slurmd-0", "touch", RELEASE, container="slurmd")

        deployment.save(cluster_image_tag=NEW)
        proc, _changed, seconds = deployment.playbook(
            "upgrade", "-e", "upgrade_wait_for_jobs=true",
            when_output=("TASK [hpc.slurm_k8s.upgrade : Wait for the active jobs to end", release))
        after = sacct_history(deployment)
        dumps = sorted((workdir / "backups").glob("*.sql.gz"))
        versions = {line.split("|")[1] for line in deployment.ctld("sinfo", "-h", "-N", "-o", "%N|%v").stdout.split()}
        summary = {
            "from": OLD_MAJOR, "to": NEW_MAJOR, "job_table_rows": rows, "sacct_jobs_before": len(before),
            "sacct_jobs_after": len(after), "history_kept": set(before) <= set(after),
            "running_job_completed": after.get(running) == "COMPLETED",
            "pending_job_kept_id": deployment.job_state(pending) == "PENDING",
            "node_versions": sorted(versions),
            "maintenance_window_s": float(WINDOW.search(proc.stdout).group(1)),
            "playbook_s": round(seconds, 1),
            "slurmdbd_conversion_s": float(CONVERTED.search(proc.stdout).group(1)),
            "dump_bytes": dumps[-1].stat().st_size if dumps else None,
            "load_average": os.getloadavg()[0],
        }
    finally:
        if os.environ.get("KEEP_E2E") != "1":
            deployment.delete()
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
