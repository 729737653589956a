#!/bin/bash
# fresh agent; Kafka's ProducerPerformance 1M x 1 KiB as race.sh --confirm runs it
D=/tmp/cfm; rm -rf $D; mkdir -p $D/data
${BIN:-/work/main/target/release/rutomq} serve --data-dir $D/data --listen 127.0.0.1:19392 --http 127.0.0.1:19393 > $D/agent.log 2>&1 &
AP=$!
for i in $(seq 60); do curl -sf http://127.0.0.1:19393/health/ready >/dev/null && break; sleep 1; done
/work/main/benches/perf-tools.sh create-topic 127.0.0.1:19392 race-confirm 8 > $D/c.log 2>&1
/work/main/benches/perf-tools.sh produce 127.0.0.1:19392 race-confirm 1000000 > $D/p.log 2>&1
curl -s http://127.0.0.1:19393/metrics | grep -E "^rutomq_(flush_idle_seals_total|windows_total|request_seconds_(sum|count)\{api=\"Produce\")" | tr '\n' ' '
echo; tail -1 $D/p.log
kill $AP; wait $AP; rm -rf $D
