#!/usr/bin/env bash
set -euo pipefail
cd /work/main
W=/tmp/tailmax-k; rm -rf $W; mkdir -p $W
out=$(KAFKA_VERSION=4.4.0 benches/kafka/start-kafka.sh 19092 $W | tail -1); echo "$out"
pid=$(echo "$out" | sed 's/.*pid=\([0-9]*\).*/\1/')
trap 'benches/kafka/start-kafka.sh --stop '$W EXIT
sleep 3
target/release/rutomq-bench e2e --bootstrap 127.0.0.1:19092 --partitions 8 --record-size 1024 --acks -1 \
  --producers 32 --batch-records 256 --consumers 2 --fetch-max-wait-ms 100 --create --topic tail-max \
  --broker-pid $pid --rate 0 --duration ${1:-20} --warmup 5 --label kafka --out $W/tail.json 2>&1 | tail -40
python3 -c "
import json;d=json.load(open('$W/tail.json'));print(d['produced_records'],d['records'])"
