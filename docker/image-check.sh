#!/usr/bin/env bash
# `make image-check`: build the monitor image, serve samples/ from it with a token, ask
# /api/health and one SQL query as a client outside the container would, then remove all it made.
#
# No image registry reachable (docker pull fails): the base is a stand-in built from Debian's
# packages (docker/standin-base.sh), removed again at the end. The user's folders are never
# mounted: the container serves a copy of samples/ in a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "image-check: $*" >&2; }
started=$SECONDS

command -v docker >/dev/null || { say "no docker command: apt-get install docker.io"; exit 2; }
docker info >/dev/null 2>&1 || {
  say "no Docker engine answers: start one (here: dockerd --bridge=none --iptables=false &)"
  exit 2; }

id=$$
image=cliffwatch-image-check:$id
container=cliffwatch-image-check-$id
base=python:3.11-slim
made_base=""
work=$(mktemp -d /var/tmp/cliffwatch-image-check.XXXXXX)
cleanup() {
  docker rm -f "$container" >/dev/null 2>&1 || true
  docker rmi -f "$image" >/dev/null 2>&1 || true
  [ -z "$made_base" ] || docker rmi -f "$made_base" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

if ! docker image inspect "$base" >/dev/null 2>&1 && ! docker pull -q "$base" >/dev/null 2>&1
then
  say "$base cannot be pulled: building a stand-in from Debian's packages"
  made_base=cliffwatch-standin/python:3.11-slim-$id
  docker/standin-base.sh "$made_base"
  base=$made_base
fi

# --network=host: pip reaches PyPI with the machine's own network set-up (an engine started with
# --bridge=none has no other network to give a build)
say "building the monitor image on $base"
build_started=$SECONDS
# the classic builder: Debian's docker.io has no buildx, and it is the one that builds every stage
# of a file (which is why the CUDA trainer is a file of its own)
DOCKER_BUILDKIT=0 docker build -q --network=host --build-arg "BASE=$base" -t "$image" . >/dev/null
say "built in $((SECONDS - build_started)) s, $(docker image inspect -f '{{.Size}}' "$image" \
  | numfmt --to=iec)"

cp -r samples/seed-cliff "$work/seed-cliff"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
# the image's own CMD with another port: the host's network, so a client outside reaches it
docker run -d --name "$container" --network=host -e CLIFFWATCH_TOKEN="$token" \
  -v "$work:/runs" "$image" \
  python -m app serve --logdir /runs --host 0.0.0.0 --port "$port" >/dev/null

python3 docker/ask.py "http://127.0.0.1:$port" "$token" || {
  say "the container's last lines:"; docker logs --tail 30 "$container" >&2; exit 1; }
cleanup
trap - EXIT
say "passed in $((SECONDS - started)) s (stand-in base, build, serve, ask, remove)"
