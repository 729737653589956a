#!/bin/bash
# fexp.sh BIN TAG [agent flags]: fresh agent; race step f's e2e-half (159,104/s) then fan-out 1 (50,000/s)
set -e
D=/tmp/fexp; B=/tmp/bins/bench
BIN=$1; TAG=$2; shift 2
rm -rf $D; mkdir -p $D/data
$BIN serve --data-dir $D/data --listen 127.0.0.1:19092 --http 127.0.0.1:19093 "$@" >> $D/agent.log 2>&1 & AP=$!
for i in $(seq 90); do curl -sf http://127.0.0.1:19093/health/ready >/dev/null && break; sleep 1; done
PG=$(pgrep -f "postgres -D $D" | head -1)
c="--bootstrap 127.0.0.1:19092 --partitions 8 --record-size 1024 --acks -1 --producers 8 --consumers 2 --fetch-max-wait-ms 100 --create --broker-pid $AP --duration 10 --warmup 5"
$B e2e $c --topic e2e --batch-records 64 --rate 159104 --out $D/e2e.json > $D/e2e.log 2>&1
$B e2e $c --topic fan1 --batch-records 16 --rate 50000 --fanout 1 --out $D/fan1.json > $D/fan1.log 2>&1
for n in e2e fan1; do python3 -c "
import json; d=json.load(open('$D/$n.json')); l=d['latency_ms']; a=d['produce_ack_latency_ms']; b=d['broker']
print('$TAG $n', 'e2e p50/p99/p999 %.0f/%.0f/%.0f' % (l['p50'],l['p99'],l['p999']), 'ack p99 %.1f' % a['p99'], 'rss %d->%d MiB' % (b['rss_start_kib']//1024, b['rss_max_kib']//1024), 'cpu %.1f' % b['cpu_seconds'])"; done
grep -o '"prefault_bytes":[0-9]*\|prefault_bytes=[0-9]*' $D/agent.log | head -1
kill $AP; wait $AP || true
