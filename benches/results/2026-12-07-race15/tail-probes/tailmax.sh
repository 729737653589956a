#!/usr/bin/env bash
set -euo pipefail
cd /work/main
source benches/lib.sh
W=/tmp/tailmax; rm -rf $W; mkdir -p $W; chmod o+x $W
start_fresh_agent target/release/rutomq $W ${FLAGS:-}
trap "kill $AGENT_PID; sleep 2; rm -rf $W/data" EXIT
pg=$(pgrep -f "postgres -D $W/data/pg" | head -1 || true)
target/release/rutomq-bench e2e --bootstrap 127.0.0.1:$AGENT_PORT --partitions 8 --record-size 1024 --acks -1 \
  --producers 32 --batch-records 256 --consumers 2 --fetch-max-wait-ms 100 --create --topic tail-max --topic-config retention.bytes=1073741824 \
  --broker-pid $AGENT_PID --metrics-url http://127.0.0.1:$AGENT_HTTP_PORT/metrics --rate 0 --duration ${1:-20} --warmup 5 --label rutomq --out $W/tail.json 2>&1 | grep -E "^\[" ; python3 -c "import json;d=json.load(open(\"$W/tail.json\"));m=d[\"metrics\"];print(d[\"records\"]/d[\"produced_records\"],d[\"latency_ms\"][\"p50\"],d[\"latency_ms\"][\"p99\"],m[\"tail_cache_hits\"],m[\"object_gets\"],m[\"read_cache_hits\"])"
