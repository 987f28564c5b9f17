# Sourced by the measurement scripts: a three-server cell on 127.0.0.1,
# ports 27100-27380 (server a: 27100 rpc, 27101 raft, 27102 gossip, 27180
# http; b: 272xx; c: 273xx), its data in the work directory $W, removed
# at exit with every process recorded in PID.
#
#   cell3_init PREFIX CMD...   make $W, build the commands into $BIN unless set
#   cell3_start                start the servers ($SERVER_FLAGS added to each)
#   cell3_master               print "name http-port" of the serving master
#   cell3_wait_master          set M to it, or exit 1 after 30 s
#   cell3_sample FILE SECONDS  after a kill of the master: append the new
#                              master's session and KeepAlive metrics to
#                              FILE once a second for SECONDS; sets N to it

CELL=127.0.0.1:27100,127.0.0.1:27200,127.0.0.1:27300
declare -A PID

cell3_init() {
  local prefix=$1
  shift
  W=$(mktemp -d "/tmp/$prefix.XXXXXX")
  if [ -z "${BIN:-}" ]; then
    BIN=$W/bin
    local c
    local pkgs=()
    for c in "$@"; do pkgs+=("./cmd/$c"); done
    (cd "$(dirname "${BASH_SOURCE[0]}")/../.." && go build -o "$BIN/" "${pkgs[@]}")
  fi
  trap cell3_cleanup EXIT
}

cell3_cleanup() {
  local p
  for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}

cell3_start() {
  local i=1 n J
  for n in a b c; do
    J=""; [ $n != a ] && J="-join 127.0.0.1:27102"
    "$BIN/chubbyd" -node-id $n -data-dir "$W/$n" -rpc-addr 127.0.0.1:27${i}00 -raft-addr 127.0.0.1:27${i}01 \
      -gossip-addr 127.0.0.1:27${i}02 -http-addr 127.0.0.1:27${i}80 -bootstrap-expect 3 $J ${SERVER_FLAGS:-} > "$W/$n.log" 2>&1 &
    PID[$n]=$!
    i=$((i+1))
  done
}

cell3_master() {
  local i=1 n
  for n in a b c; do
    if curl -sf 127.0.0.1:27${i}80/metrics | grep -q '^chubby_master_serving 1'; then echo "$n 27${i}80"; return; fi
    i=$((i+1))
  done
}

cell3_wait_master() {
  local t
  M=""
  for t in $(seq 1 60); do M=$(cell3_master); [ -n "$M" ] && return; sleep 0.5; done
  echo "no master elected" >&2
  exit 1
}

cell3_sample() {
  local file=$1 secs=$2 t
  N=""
  for t in $(seq 1 "$secs"); do
    sleep 1
    [ -n "$N" ] || N=$(cell3_master)
    [ -n "$N" ] || continue
    curl -sf 127.0.0.1:${N#* }/metrics | grep -E '^chubby_(keepalives_total|sessions |sessions_expired_total|rpc_connections|calls_denied_total)|^chubby_rpc_calls_total\{method="(KeepAlive|KeepAliveMany|Hello)"' |
      sed "s/^/$t s: /" >> "$file" || true
  done
}
