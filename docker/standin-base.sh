#!/usr/bin/env bash
# A stand-in for python:3.11-slim made from Debian's packages, for a machine that reaches Debian's
# archive and PyPI but no image registry: `docker/standin-base.sh TAG` imports it as TAG.
#
# Debian 12's python3 is 3.11, as the official image's is; a venv at /usr/local puts `python` and
# `pip` where python:3.11-slim has them, so the Dockerfile needs no change to use it.
set -euo pipefail
tag=${1:?usage: docker/standin-base.sh TAG}
say() { echo "standin-base: $*" >&2; }

[ "$(id -u)" = 0 ] || { say "debootstrap and chroot need root: run it as root"; exit 2; }
command -v debootstrap >/dev/null || { say "no debootstrap: apt-get install debootstrap"; exit 2; }

root=$(mktemp -d /var/tmp/cliffwatch-standin.XXXXXX)
trap 'rm -rf "$root"' EXIT
# debootstrap's own default mirror: the Debian archive the machine's apt reaches too
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" \
  >"$root.log" 2>&1 || { say "debootstrap failed; its log: $root.log"; exit 1; }
rm -f "$root.log"
chroot "$root" /usr/bin/python3 -m venv /usr/local
# this machine's own certificate authorities (a TLS-inspecting proxy's, say): the stand-in is made
# for this machine, and pip in a build on it must trust what the machine trusts; PIP_CERT points
# pip at the system's bundle instead of the one it carries
local_cas=(/usr/local/share/ca-certificates/*.crt)
if [ -e "${local_cas[0]}" ]; then
  cp "${local_cas[@]}" "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
# what a slim image leaves out: package lists, caches, documentation
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/usr/share/doc/* \
       "$root"/usr/share/man/* "$root"/usr/share/locale/*
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["python3"]' - "$tag" >/dev/null
say "built $tag ($(docker image inspect -f '{{.Size}}' "$tag" | numfmt --to=iec) from Debian 12)"
