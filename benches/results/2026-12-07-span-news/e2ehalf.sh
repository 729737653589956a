#!/usr/bin/env bash
set -euo pipefail
cd /work/main
source benches/lib.sh
W=/tmp/e2eh; rm -rf $W; mkdir -p $W; chmod o+x $W
start_fresh_agent ${BIN:-target/release/rutomq} $W ${FLAGS:-}
trap "kill $AGENT_PID; sleep 2; rm -rf $W/data" EXIT
sleep 3
target/release/rutomq-bench e2e --bootstrap 127.0.0.1:$AGENT_PORT --partitions 8 --record-size 1024 --acks -1 \
  --producers 8 --consumers 2 --fetch-max-wait-ms 100 --create --topic race-e2e --batch-records 64 \
  --broker-pid $AGENT_PID --metrics-url http://127.0.0.1:$AGENT_HTTP_PORT/metrics --rate ${RATE:-184000} --duration 10 --warmup 5 --label rutomq --out $W/e.json > $W/b.log 2>&1
python3 -c "import json;d=json.load(open('$W/e.json'));l=d['latency_ms'];m=d.get('metrics') or {};print('waited',m.get('span_reads_waited'),'windows',m.get('committed_windows'),'txns',m.get('commit_transactions'),'p50',l['p50'],'p99',l['p99'],'p999',l['p999'],'max',l['max'])"
