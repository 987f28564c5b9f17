#!/bin/bash
# Sessions through a failover (issue 12, point 2): a three-server cell,
# CLIENTS sessions (TTL 12 s) over CONNS shared connections, a writer
# beside them; once every session is created, SIGKILL of the master.
#
#   scripts/failover-sessions.sh [CLIENTS] [CONNS]
#
# Prints one line:
#   RESULT sessions=... lost=... write_max_ms=... write_errors=... creates_per_s=...
# lost: sessions whose client saw them end before the end of the hold;
# expired_on_master: sessions the new master expired (a client in its
# grace period may not know yet); write_max_ms: the
# writer's slowest write, the one the failover held up. Ports 27100-27380
# on 127.0.0.1; data in a temporary directory, removed at the end.
# Binaries: $BIN (default: built from this checkout). Also: SETTLE=s
# from the last session created to the kill (default 10; at 100,000 sessions
# 25 lets them renew steadily first; the writer runs SETTLE+20 s), BENCH_FLAGS= more flags
# for chubbybench sessions (-no-cache), SERVER_FLAGS= for chubbyd,
# KEEP=dir keeps the outputs, logs and the new master's metrics sampled
# once a second after the kill, QUIT_AFTER=s dumps the load tool's
# goroutines (SIGQUIT) that long after the kill. The RESULT line also has
# what the hold cost the master, from its /metrics: master_cpu_cores
# (process CPU per second from the last session created to 10 s before the
# kill, when the writer starts) and master_rss_mb (then); reported when
# SETTLE > 20. The 10-minute hold of issue 12:
#   SETTLE=600 BENCH_FLAGS=-group scripts/failover-sessions.sh 100000 100
set -eu
CLIENTS=${1:-100000}
CONNS=${2:-100}
. "$(dirname "$0")/lib/cell3.sh"
cell3_init failover chubbyd chubbybench
cell3_start
cell3_wait_master
"$BIN/chubbybench" sessions -cell $CELL -clients "$CLIENTS" -conns "$CONNS" -ttl 12s -duration $(( ${SETTLE:-10} + 50 ))s -quiet ${BENCH_FLAGS:-} > "$W/sessions.out" 2>&1 &
PID[sessions]=$!
# mfig PORT NAME: the value of metric NAME on the server with HTTP port PORT.
mfig() { curl -sf "127.0.0.1:$1/metrics" | awk -v k="$2" '$1 == k {print $2}'; }
for t in $(seq 1 600); do
  n=$(mfig ${M#* } chubby_sessions)
  [ "${n%.*}" -ge "$CLIENTS" ] && break
  sleep 1
done
cpu0=$(mfig ${M#* } process_cpu_seconds_total); t0=$(date +%s.%N)
SETTLE=${SETTLE:-10}
PRE=0; [ "$SETTLE" -gt 20 ] && PRE=$((SETTLE - 10)) # a long hold: the writer joins 10 s before the kill
sleep "$PRE"
cpu1=$(mfig ${M#* } process_cpu_seconds_total); t1=$(date +%s.%N); rss=$(mfig ${M#* } process_resident_memory_bytes)
[ "$PRE" -gt 0 ] || { cpu1=""; rss=""; } # too short a hold to report
"$BIN/chubbybench" write -cell $CELL -clients 1 -duration $(( SETTLE - PRE + 20 ))s -warmup 1s -quiet > "$W/write.out" 2>&1 &
PID[write]=$!
sleep $(( SETTLE - PRE )) # the sessions renewing steadily before the kill
[ "$(cell3_master)" = "$M" ] || { echo "the master changed before the kill" >&2; exit 1; }
held=$(mfig ${M#* } chubby_sessions); expired0=$(mfig ${M#* } chubby_sessions_expired_total)
kill -9 "${PID[${M% *}]}"
echo "killed the master ${M% *} at $(date +%T.%N)" >&2
if [ -n "${QUIT_AFTER:-}" ]; then # diagnosis: the load tool's goroutines, QUIT_AFTER s after the kill
  (sleep "$QUIT_AFTER"; kill -QUIT "${PID[sessions]}") &
fi
# The new master's view of the sessions coming back, once a second.
cell3_sample "$W/newmaster.metrics" 25
wait "${PID[write]}" || true
expired=$( [ -n "$N" ] && mfig ${N#* } chubby_sessions_expired_total)
wait "${PID[sessions]}" || true
fig() { awk -v k="$1" '$1 == k {print $2}' "$2"; }
echo "RESULT sessions=$CLIENTS lost=$(fig sessions_lost $W/sessions.out) expired_on_master=${expired:-?} write_max_ms=$(fig max_ms $W/write.out) write_errors=$(fig errors $W/write.out) master_cpu_cores=$(awk -v a="$cpu0" -v b="$cpu1" -v s="$t0" -v e="$t1" 'BEGIN {if (b == "") print "?"; else printf "%.3f", (b-a)/(e-s)}') master_rss_mb=$(awk -v r="$rss" 'BEGIN {if (r == "") print "?"; else printf "%.0f", r/1048576}') sessions_at_kill=$held expired_before_kill=$expired0 creates_per_s=$(fig creates_per_s $W/sessions.out)"
if [ -n "${KEEP:-}" ]; then cp "$W"/*.out "$W"/*.log "$W"/*.metrics "$KEEP"/ 2>/dev/null || true; fi
