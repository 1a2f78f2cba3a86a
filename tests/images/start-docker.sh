#!/usr/bin/env bash
# Start a Docker engine (it builds the images) if none answers. Debian's docker.io (20.10) is used:
# its /usr/bin/docker client does BuildKit, unlike the newer client some machines put first in PATH.
set -euo pipefail
DOCKER=/usr/bin/docker
if "$DOCKER" info >/dev/null 2>&1; then exit 0; fi
if ! command -v dockerd >/dev/null; then
  echo "start-docker: dockerd is not installed (apt-get install docker.io)" >&2; exit 1
fi
mkdir -p /var/log
setsid dockerd >/var/log/dockerd-hpc-slurm-k8s.log 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  if "$DOCKER" info >/dev/null 2>&1; then exit 0; fi
  sleep 1
done
echo "start-docker: dockerd did not answer within 60 s; last log lines:" >&2
tail -n 20 /var/log/dockerd-hpc-slurm-k8s.log >&2
exit 1
