#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12: a debootstrapped root with only git and
# ca-certificates added, a clone of this checkout's HEAD, `tools/aethercl demo` then
# `tools/aethercl test`, each timed; prints their times and results last.
#
#   sudo tools/fresh_machine.sh [--root DIR] [--keep] [--busy N] [--demo-args "ARGS"] [--test-args "ARGS"]
#
# --busy N keeps N cores busy with a spin loop while the commands run (the shared 2-core machine
# the README's figures are for: --busy 1). The host's CA certificates, pip configuration and
# PIP_* variables are copied in, so downloads behave as on the host. Logs and the summary go to
# DIR/../fresh-machine-logs (default DIR: /var/tmp/aethercl-fresh/root). Needs root, debootstrap
# (installed when missing) and about 6 GB of disk.
set -euo pipefail

ROOT_DIR=/var/tmp/aethercl-fresh/root
KEEP=0
BUSY=0
DEMO_ARGS=""
TEST_ARGS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --root) ROOT_DIR="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --busy) BUSY="$2"; shift 2 ;;
    --demo-args) DEMO_ARGS="$2"; shift 2 ;;
    --test-args) TEST_ARGS="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "fresh_machine.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOGS="$(dirname "$ROOT_DIR")/fresh-machine-logs"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
[[ "$(id -u)" -eq 0 ]] || { echo "fresh_machine.sh: run as root (debootstrap, chroot)" >&2; exit 1; }

say() { printf '[fresh] %s\n' "$*" >&2; }
mounted=()
busy_pids=()
cleanup() {
  local pid i
  for pid in "${busy_pids[@]:-}"; do [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true; done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  if [[ $KEEP -eq 0 && -d "$ROOT_DIR" ]]; then rm -rf --one-file-system "$ROOT_DIR"; fi
}
trap cleanup EXIT

command -v debootstrap >/dev/null || {
  say "installing debootstrap on the host"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap >/dev/null
}

rm -rf --one-file-system "$ROOT_DIR"
mkdir -p "$ROOT_DIR" "$LOGS"
started=$SECONDS
say "debootstrap bookworm into $ROOT_DIR (log: $LOGS/debootstrap.log)"
debootstrap --variant=minbase bookworm "$ROOT_DIR" "$MIRROR" >"$LOGS/debootstrap.log" 2>&1
bootstrap_s=$((SECONDS - started))

# Downloads behave as on the host: its CA bundle, extra certificates, pip configuration, resolver.
mkdir -p "$ROOT_DIR/usr/local/share/ca-certificates" "$ROOT_DIR/etc/pip"
cp -a /usr/local/share/ca-certificates/. "$ROOT_DIR/usr/local/share/ca-certificates/" 2>/dev/null || true
[[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$ROOT_DIR/etc/pip.conf"
cp /etc/resolv.conf "$ROOT_DIR/etc/resolv.conf"
# debootstrap writes no /etc/hosts; every installed system has one, and chromedriver reaches the
# browser it starts through "localhost" (without it: "unable to connect to renderer").
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$ROOT_DIR/etc/hosts"
cp /etc/apt/sources.list.d/debian.sources "$ROOT_DIR/etc/apt/sources.list.d/" 2>/dev/null \
  && rm -f "$ROOT_DIR/etc/apt/sources.list"

for fs in proc sys dev dev/pts; do
  mkdir -p "$ROOT_DIR/$fs"
  case "$fs" in
    proc) mount -t proc proc "$ROOT_DIR/proc" ;;
    *) mount --bind "/$fs" "$ROOT_DIR/$fs" ;;
  esac
  mounted+=("$ROOT_DIR/$fs")
done
mkdir -p "$ROOT_DIR/dev/shm" && mount -t tmpfs shm "$ROOT_DIR/dev/shm" && mounted+=("$ROOT_DIR/dev/shm")

in_root() {
  local env=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
             LANG=C.UTF-8 TERM=dumb)
  local var
  for var in $(compgen -e | grep -E '^PIP_' || true); do env+=("$var=${!var}"); done
  chroot "$ROOT_DIR" /usr/bin/env -i "${env[@]}" bash -c "$1"
}

say "adding git and ca-certificates (log: $LOGS/base.log)"
in_root "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends git ca-certificates" \
  >"$LOGS/base.log" 2>&1
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT_DIR/etc/ssl/certs/ca-certificates.crt"
fi

commit="$(git -C "$CHECKOUT" rev-parse --short HEAD)"
say "cloning $CHECKOUT at $commit (uncommitted changes are not part of the check)"
git clone --quiet --no-hardlinks "$CHECKOUT" "$ROOT_DIR/root/aethercl"

for ((i = 0; i < BUSY; i++)); do
  (while :; do :; done) &
  busy_pids+=("$!")
done
[[ $BUSY -gt 0 ]] && say "$BUSY core(s) kept busy while the commands run"

run_step() {
  local name="$1" command="$2" t0=$SECONDS status=0
  say "$name: $command (log: $LOGS/$name.log)"
  in_root "cd /root/aethercl && $command" >"$LOGS/$name.log" 2>&1 || status=$?
  echo "$name|$status|$((SECONDS - t0))|$(cut -d' ' -f3 /proc/loadavg)"
}

demo_result="$(run_step demo "tools/aethercl demo $DEMO_ARGS")"
test_result="$(run_step test "tools/aethercl test $TEST_ARGS")"

disk() { du -sh --one-file-system "$ROOT_DIR/$1" 2>/dev/null | cut -f1; }
{
  echo "fresh machine check of $commit on $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores" \
       "($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $BUSY kept busy"
  echo "debootstrap: ${bootstrap_s}s"
  for result in "$demo_result" "$test_result"; do
    IFS='|' read -r name status seconds load <<<"$result"
    printf '%-5s %s in %dm%02ds (load average of the last 15 minutes at its end: %s)\n' "$name" \
      "$([[ $status -eq 0 ]] && echo passed || echo "FAILED (exit $status)")" \
      $((seconds / 60)) $((seconds % 60)) "$load"
  done
  grep -hE "^\[aethercl\] .*done in|suites done|tests passed|tests failed|Timeout|\*\*\*Failed" \
    "$LOGS/demo.log" "$LOGS/test.log" | sed 's/^/  /' || true
  echo "slowest suites:"
  grep -E "Test +#[0-9]+: " "$LOGS/test.log" | sed -E 's/.*#[0-9]+: ([^ ]+) .* ([0-9.]+) sec.*/\2 \1/' \
    | sort -rn | head -8 | awk '{ printf "  %7.1f s  %s\n", $1, $2 }' || true
  echo "disk: build/ $(disk root/aethercl/build), ~/.cache/pocl $(disk root/.cache/pocl)," \
       "build/kernel-cache $(disk root/aethercl/build/kernel-cache), whole root $(disk .)"
} | tee "$LOGS/summary.txt"
IFS='|' read -r _ demo_status _ <<<"$demo_result"
IFS='|' read -r _ test_status _ <<<"$test_result"
[[ $demo_status -eq 0 && $test_status -eq 0 ]]
