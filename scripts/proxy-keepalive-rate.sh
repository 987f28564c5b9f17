#!/bin/bash
# The master's KeepAlive call rate with clients direct to a three-server
# cell, or behind four chubbyproxy processes (issue 12, point 4).
#
#   scripts/proxy-keepalive-rate.sh direct|proxied [PROCS] [CLIENTS]
#
# PROCS chubbybench processes of CLIENTS clients each (default 2 x 10000),
# every client on a connection of its own, TTL 12 s. Once the master counts
# every session, the rate of its KeepAlive and KeepAliveMany calls is taken
# over 15 s of the hold. Prints one line:
#   RESULT mode=... sessions=... calls_per_s=... per_session=... lost=...
# Ports 27100-27480 on 127.0.0.1; the cell's data goes in a temporary
# directory, removed at the end. Binaries: $BIN (default: built from this
# checkout into the temporary directory). KEEP=dir keeps the outputs and logs.
# PROXY_FLAGS= more flags for chubbyproxy (-log-level debug). PROFILE=1:
# each load process's CPU profile (benchN.prof, kept with KEEP).
# KILL_MASTER=1 sends SIGKILL to the master after the window (the clients
# hold their sessions on for the rest of HOLD, default 40s: make it 60s).
# RESULT's master_changed says whether the master at the end of the hold
# is the one of the window.
set -eu
MODE=${1:?direct or proxied}
PROCS=${2:-2}
CLIENTS=${3:-10000}
HOLD=${HOLD:-40s}
RATE=${RATE:-150} # sessions created per second per process: faster starves the cell of CPU on 2 cores
. "$(dirname "$0")/lib/cell3.sh"
cell3_init karate chubbyd chubbyproxy chubbybench
cell3_start
cell3_wait_master
master_http() { local m; m=$(cell3_master); [ -n "$m" ] && echo "http://127.0.0.1:${m#* }"; }
MH="http://127.0.0.1:${M#* }"
TARGET=$CELL
if [ "$MODE" = proxied ]; then
  PX=127.0.0.1:27401,127.0.0.1:27402,127.0.0.1:27403,127.0.0.1:27404
  for i in 1 2 3 4; do
    "$BIN/chubbyproxy" -cell $CELL -listen 127.0.0.1:2740$i -peers $PX ${PROXY_FLAGS:-} > "$W/proxy$i.log" 2>&1 &
    PID[proxy$i]=$!
  done
  TARGET=$PX
  sleep 1
fi
BENCH=()
for i in $(seq 1 "$PROCS"); do
  "$BIN/chubbybench" sessions -cell $TARGET -clients "$CLIENTS" -ttl 12s -duration "$HOLD" -rate "$RATE" -quiet ${PROFILE:+-cpuprofile "$W/bench$i.prof"} > "$W/bench$i.out" 2>&1 &
  BENCH+=($!)
  PID[bench$i]=$!
done
want=$((PROCS * CLIENTS))
[ "$MODE" = proxied ] && want=$((want + 4)) # each proxy's own session (its read cache)
metric() { curl -sf "$MH/metrics" | awk -v re="$1" '$0 ~ re {s+=$2} END {print s+0}'; }
for t in $(seq 1 600); do
  n=$(metric '^chubby_sessions ')
  [ "${n%.*}" -ge "$want" ] && break
  sleep 1
done
[ "$(master_http)" = "$MH" ] || { echo "the master changed during creation" >&2; exit 1; }
sleep 5
a=$(metric '^chubby_rpc_calls_total\{method="KeepAlive(Many)?"\}'); t0=$(date +%s.%N)
sleep 15
b=$(metric '^chubby_rpc_calls_total\{method="KeepAlive(Many)?"\}'); t1=$(date +%s.%N)
n=$(metric '^chubby_sessions ')
[ "$(master_http)" = "$MH" ] || { echo "the master changed during the window" >&2; exit 1; }
if [ -n "${KILL_MASTER:-}" ]; then
  kill -9 "${PID[${M% *}]}"
  echo "killed the master ${M% *} at $(date +%T.%N)" >&2
  cell3_sample "$W/newmaster.metrics" 25
fi
for p in "${BENCH[@]}"; do wait "$p" || true; done
changed=no
NH=$(master_http)
[ "$NH" = "$MH" ] || changed=yes
# Sessions the master at the end expired: a client in its grace period may
# not know yet that its session is gone (lost counts what the clients saw).
expired=$( [ -n "$NH" ] && curl -sf "$NH/metrics" | awk '/^chubby_sessions_expired_total / {print $2}')
lost=$(cat "$W"/bench*.out | awk '$1 == "sessions_lost" {s+=$2} END {print s+0}')
python3 -c "r=($b-$a)/($t1-$t0); print(f'RESULT mode=$MODE sessions=${n%.*} calls_per_s={r:.1f} per_session={r/${n%.*}:.4f} lost=$lost expired_on_master=${expired:-?} master_changed=$changed')"
if [ -n "${KEEP:-}" ]; then cp "$W"/*.out "$W"/*.log "$W"/*.metrics "$W"/*.prof "$KEEP"/ 2>/dev/null || true; fi
