#!/usr/bin/env bash
# Per half second, the read path's counters while rutomq-bench consumes from the beginning
# what it produced for DUR (10) s, with 30 ms object latency: BIN (target/release/rutomq) and FLAGS.
set -euo pipefail
cd /work/main
source benches/lib.sh
W=${W:-/tmp/joins}; rm -rf $W; mkdir -p $W; chmod o+x $W
start_fresh_agent ${BIN:-target/release/rutomq} $W --inject-object-latency-ms 30 --inject-object-jitter-ms 10 ${FLAGS:-}
trap "kill $AGENT_PID; sleep 2; rm -rf $W/data" EXIT
M=http://127.0.0.1:$AGENT_HTTP_PORT/metrics
B=target/release/rutomq-bench
common=(--bootstrap 127.0.0.1:$AGENT_PORT --partitions 8 --broker-pid $AGENT_PID)
$B produce "${common[@]}" --create --topic ab --producers 32 --batch-records 256 --warmup 5 --duration ${DUR:-10} --out $W/produce.json > $W/produce.log 2>&1
total=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records_total"])' $W/produce.json)
$B consume "${common[@]}" --topic ab --from beginning --records $total --out $W/consume.json > $W/consume.log 2>&1 &
b=$!
i=0
while kill -0 $b 2>/dev/null; do curl -s $M | grep -E '^rutomq_(read_joins_total|read_cache_hits_total|object_gets_total|read_prefetches_total|read_prefetches_refused_total|fetch_bytes_total|span_reads_waited_total|span_reads_ahead_total|tail_cache_hits_total) ' > $W/m$(printf %03d $i); i=$((i+1)); sleep 0.5; done
wait $b
python3 - $W <<'PY'
import glob,sys,json
W=sys.argv[1]
def load(p): return {l.split()[0].replace('rutomq_','').replace('_total',''): float(l.split()[1]) for l in open(p)}
ms=[load(f) for f in sorted(glob.glob(W+'/m*'))]
keys=['fetch_bytes','read_cache_hits','read_joins','object_gets','read_prefetches','read_prefetches_refused','span_reads_waited','span_reads_ahead']
print('t', *[k.replace('read_','') for k in keys])
for i in range(1,len(ms)):
    a,b=ms[i-1],ms[i]
    row=[round((b.get(k,0)-a.get(k,0))/(1048576 if k=='fetch_bytes' else 1)) for k in keys]
    print(f"{i/2:.1f}", *row)
print(json.load(open(W+'/consume.json'))['mib_per_sec'])
PY
