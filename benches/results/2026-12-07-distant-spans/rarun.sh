#!/bin/bash
# rarun.sh ROUNDS: L with 30±10 ms, read-ahead default (8) vs 15, interleaved
for i in $(seq $1); do
  for ra in 8 15; do
    BENCH=/tmp/bins/bench /tmp/cexp.sh /tmp/bins/L RA$ra --inject-object-latency-ms 30 --inject-object-jitter-ms 10 --read-ahead-fetches $ra > /tmp/ra-$ra-$i.txt 2>&1
    for r in warm cold; do python3 -c "
import json
d=json.load(open('/tmp/cexp/consume-$r.json')); b=d['broker']; p=json.load(open('/tmp/cexp/produce.json'))
print('RA$ra round $i $r', 'consume %.1f MiB/s' % d['mib_per_sec'], 'agent cpu %.2f s' % b['cpu_seconds'], 'rss %d->%d MiB' % (b['rss_start_kib']//1024, b['rss_max_kib']//1024), 'errors', d['errors'], '| produce %.1f' % p['mib_per_sec'])"; done
    grep -E "warm:|cold:" /tmp/ra-$ra-$i.txt
  done
done
