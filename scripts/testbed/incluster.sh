#!/usr/bin/env bash
# Runs COMMAND as a program that believes it is in a pod: rest.InClusterConfig() finds
# KUBERNETES_SERVICE_HOST/PORT and /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}.
# For programs with no kubeconfig option (Multus's thick daemon, multus.sh). Nothing on the host
# changes: in a mount namespace of its own (a slave of the caller's, so that the pod network
# namespaces containerd mounts later still appear in it), /run is a tmpfs holding a bind of
# every entry of the real /run (kept under HOLD, a directory outside /run) and the secrets.
# Usage: incluster.sh HOLD SA_DIR HOST PORT COMMAND...   (SA_DIR holds token and ca.crt)
set -euo pipefail

hold=${1:?usage: incluster.sh HOLD SA_DIR HOST PORT COMMAND...}
sa=${2:?} host=${3:?} port=${4:?}
shift 4
[[ $hold != /run/* ]] || { echo "incluster.sh: HOLD must be outside /run: $hold" >&2; exit 1; }
mkdir -p "$hold"
export KUBERNETES_SERVICE_HOST=$host KUBERNETES_SERVICE_PORT=$port

# shellcheck disable=SC2016 # expanded by the inner shell
exec unshare -m --propagation slave /bin/bash -c '
set -euo pipefail
hold=$1 sa=$2
shift 2
mount --rbind /run "$hold"
mount -t tmpfs -o mode=0755 tmpfs /run
for e in $(ls -A "$hold"); do
  if [[ -d $hold/$e && ! -L $hold/$e ]]; then
    mkdir -p "/run/$e"
    mount --rbind "$hold/$e" "/run/$e"
  else
    ln -s "$hold/$e" "/run/$e"
  fi
done
d=/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$d"
cp "$sa/token" "$sa/ca.crt" "$d/"
exec "$@"' incluster "$hold" "$sa" "$@"
