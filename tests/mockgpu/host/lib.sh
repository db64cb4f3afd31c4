# shellcheck shell=bash disable=SC2034
# Paths and helpers shared by the mock host scripts (sourced, not run).
# Per-checkout state lives under .build/ of this repo; the rootfs cache and the claim registry are
# machine-wide, so two checkouts on one machine share the image but never a host name or index.
HOST_TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HOST_TOOLS/../../.." && pwd)
BUILD=$REPO/.build
HOSTS_DIR=$BUILD/hosts
SSH_KEY=$BUILD/ssh/id_ed25519
INVENTORY_DIR=$BUILD/inventory/mock
CACHE_DIR=${MOCKGPU_CACHE_DIR:-/var/cache/llmops-specdec}
REGISTRY=/run/llmops-specdec/hosts
CGROUP_PARENT=llmops-specdec
SSH_OPTS=(-i "$SSH_KEY" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
  -o LogLevel=ERROR -o ConnectTimeout=2 -o IdentitiesOnly=yes)

die() { echo "mockhost: $*" >&2; exit 1; }
log() { echo "mockhost: $*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

netns_of() { echo "specdec-$1"; }
guest_ip() { echo "10.77.$1.2"; }
host_ip() { echo "10.77.$1.1"; }
# veth names are at most 15 characters, so they carry the index, not the name.
veth_host() { echo "sd$1h"; }
veth_guest() { echo "sd$1g"; }

# The cgroup hierarchies nspawn uses here: hybrid v1+v2 (name=systemd + unified) or pure v2.
cgroup_roots() {
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    echo /sys/fs/cgroup
  else
    local h
    for h in /sys/fs/cgroup/unified /sys/fs/cgroup/systemd; do [[ -d $h ]] && echo "$h"; done
  fi
  return 0
}

valid_name() { [[ $1 =~ ^[a-z0-9][a-z0-9-]{0,30}$ ]]; }
valid_index() { [[ $1 =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= 254)); }


ensure_ssh_key() {
  mkdir -p "$(dirname "$SSH_KEY")"
  chmod 700 "$(dirname "$SSH_KEY")"
  (
    flock 9
    [[ -s $SSH_KEY ]] || ssh-keygen -q -t ed25519 -N '' -C llmops-specdec-mockhost -f "$SSH_KEY"
  ) 9>"$SSH_KEY.lock"
}

# kill -0 also succeeds on a zombie; a host whose nspawn is a zombie is down.
pid_running() {
  local st
  [[ -n ${1:-} ]] && st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) && [[ $st != Z && $st != X ]]
}
# The pid file names our nspawn only while that pid still runs systemd-nspawn (pids get reused).
host_nspawn_pid() {
  local pid
  pid=$(cat "$HOSTS_DIR/$1/nspawn.pid" 2>/dev/null) || return 1
  pid_running "$pid" && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == systemd-nspawn ]] && echo "$pid"
}
