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
REGISTRY=/run/llmops-specdec
CGROUP_PARENT=llmops-specdec
SSH_OPTS=(-i "$SSH_KEY" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
  -o LogLevel=ERROR -o ConnectTimeout=2 -o IdentitiesOnly=yes)

die() { echo "mockhost: $*" >&2; exit 1; }
log() { echo "mockhost: $*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# Network names of host NAME / INDEX in checkout slot SLOT (global). Slot 0 is the documented
# 10.77.INDEX.0/24; a second checkout on the same machine gets slot 1 (10.78.INDEX.0/24), and so on,
# so concurrent checkouts never share a netns, veth, subnet or cgroup.
SLOT=${SLOT:-0}
netns_of() { if ((SLOT)); then echo "specdec$SLOT-$1"; else echo "specdec-$1"; fi; }
guest_ip() { echo "10.$((77 + SLOT)).$1.2"; }
host_ip() { echo "10.$((77 + SLOT)).$1.1"; }
# veth names are at most 15 characters, so they carry slot and index, not the name.
veth_host() { if ((SLOT)); then echo "sd${SLOT}x$1h"; else echo "sd$1h"; fi; }
veth_guest() { if ((SLOT)); then echo "sd${SLOT}x$1g"; else echo "sd$1g"; fi; }
# "@" cannot appear in a name, so slot 0 keeps the bare name and other slots never clash with it.
cgroup_leaf() { if ((SLOT)); then echo "$1@$SLOT"; else echo "$1"; fi; }

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

# Under the registry lock: this checkout's slot (the one it holds, else the lowest free one; a slot
# whose checkout has no host left is free). MOCKGPU_SLOT=K forces slot K.
acquire_slot() {
  local k f
  if [[ -n ${MOCKGPU_SLOT:-} ]]; then
    [[ $MOCKGPU_SLOT =~ ^[0-9]$ ]] || die "MOCKGPU_SLOT must be 0..9"
    SLOT=$MOCKGPU_SLOT
    return 0
  fi
  mkdir -p "$REGISTRY/slots"
  for k in 0 1 2 3 4 5 6 7 8 9; do
    f=$REGISTRY/slots/slot-$k
    if [[ -f $f && $(cat "$f") == "$REPO" ]]; then SLOT=$k; return 0; fi
  done
  for k in 0 1 2 3 4 5 6 7 8 9; do
    f=$REGISTRY/slots/slot-$k
    if [[ ! -f $f ]] || ! compgen -G "$(cat "$f")/.build/hosts/*/index" >/dev/null; then
      echo "$REPO" >"$f"
      SLOT=$k
      return 0
    fi
  done
  die "all 10 checkout slots are in use ($REGISTRY/slots)"
}

# SSH into the guest at $IP (set by the caller).
ssh_guest() { timeout "${SSH_CALL_TIMEOUT:-10}" ssh "${SSH_OPTS[@]}" "root@$IP" "$@"; }
ssh_answers() { ssh_guest true 2>/dev/null; }

# Boot the guest whose root is mounted at DIR/root: systemd-nspawn -b in netns NS, in a cgroup of its
# own, then wait until sshd answers and systemd says the boot finished (up, and reboot after the
# guest's own reboot ended nspawn). Sets PID, T_SSH, T_RUNNING, STATE.
boot_guest() {
  local name=$1 ns=$2 dir=$3 r t1 deadline
  # nspawn runs in a cgroup of its own, so it makes payload/ and supervisor/ there and not in the
  # controller's root cgroup, which every other host would share.
  local cg_procs=()
  while read -r r; do
    mkdir -p "$r/$CGROUP_PARENT/$(cgroup_leaf "$name")"
    cg_procs+=("$r/$CGROUP_PARENT/$(cgroup_leaf "$name")/cgroup.procs")
  done < <(cgroup_roots)

  # Read-only binds the host was brought up with (up --bind-ro; kept in DIR/binds for reboots).
  local binds=() path
  while read -r path; do [[ -n $path ]] && binds+=("--bind-ro=$path"); done <"$dir/binds" 2>/dev/null || true

  t1=$(now)
  # shellcheck disable=SC2016 # expanded by the inner shell
  setsid bash -c 'root=$1 name=$2 ns=$3 nbinds=$4; shift 4
    binds=("${@:1:nbinds}"); shift "$nbinds"
    for f in "$@"; do echo $$ >"$f"; done
    exec systemd-nspawn -D "$root" --register=no --keep-unit -b --hostname="$name" --console=read-only \
      --network-namespace-path="/run/netns/$ns" "${binds[@]}"' \
    boot "$dir/root" "$name" "$ns" "${#binds[@]}" "${binds[@]}" "${cg_procs[@]}" </dev/null >>"$dir/console.log" 2>&1 &
  PID=$!
  disown "$PID"
  echo "$PID" >"$dir/nspawn.pid"

  # Poll until sshd answers, then until systemd reports the boot finished; bounded by one deadline.
  deadline=$(($(date +%s) + ${MOCKGPU_BOOT_TIMEOUT:-90}))
  wait_for() {
    until "$@"; do
      pid_running "$PID" || die "systemd-nspawn exited during boot"
      (($(date +%s) < deadline)) || die "not ready within ${MOCKGPU_BOOT_TIMEOUT:-90} s: $*"
      sleep 0.1
    done
  }
  wait_for ssh_answers
  T_SSH=$(elapsed "$t1")
  # shellcheck disable=SC2317 # called through wait_for
  system_state() {
    STATE=$(ssh_guest systemctl is-system-running --wait) || true
    [[ $STATE == running || $STATE == degraded ]]
  }
  wait_for system_state
  T_RUNNING=$(elapsed "$t1")
  if [[ $STATE == degraded ]]; then
    log "warning: $name is degraded; failed units: $(ssh_guest systemctl --failed --no-legend --plain | awk '{ print $1 }' | xargs)"
  fi
}
