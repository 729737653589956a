#!/usr/bin/env bash
# Fan-out 8 at the tail as race.sh runs it (50,000 records/s in 16-record batches, 8 readers of every
# partition, 2 connections each), twice on one fresh agent (BIN): records/s, e2e p50 / p90 / p99 / max ms,
# and the span reads the fetches waited for.
set -euo pipefail
cd /work/main
source benches/lib.sh
W=/tmp/fan8; rm -rf $W; mkdir -p $W; chmod o+x $W
start_fresh_agent ${BIN:-target/release/rutomq} $W ${FLAGS:-}
trap "kill $AGENT_PID; sleep 2; rm -rf $W/data" EXIT
M=http://127.0.0.1:$AGENT_HTTP_PORT/metrics
for i in 1 2; do
target/release/rutomq-bench e2e --bootstrap 127.0.0.1:$AGENT_PORT --partitions 8 --record-size 1024 --acks -1 \
  --producers 8 --consumers 2 --fetch-max-wait-ms 100 --create --topic fan8-$i --batch-records 16 --rate 50000 --fanout 8 \
  --broker-pid $AGENT_PID --metrics-url $M --duration 10 --warmup 5 --label rutomq --out $W/f$i.json > $W/b$i.log 2>&1
python3 -c "import json;d=json.load(open('$W/f$i.json'));l=d['latency_ms'];print($i, 'waited', (d.get('metrics') or {}).get('span_reads_waited'), d['records_per_sec'], l['p50'], l['p90'], l['p99'], l['max'])"
sleep 3
done
