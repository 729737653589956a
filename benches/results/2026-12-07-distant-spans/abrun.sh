#!/bin/bash
# abrun.sh ROUNDS LABEL=BIN...
R=$1; shift
for i in $(seq $R); do
  for lb in "$@"; do
    L=${lb%%=*}; BIN=${lb#*=}
    BENCH=/tmp/bins/bench /tmp/cexp.sh $BIN $L $AGENT_FLAGS > /tmp/ab-$L-$i.txt 2>&1
    for r in warm cold; do python3 -c "
import json
d=json.load(open('/tmp/cexp/consume-$r.json')); b=d['broker']; p=json.load(open('/tmp/cexp/produce.json'))
print('$L round $i $r', 'consume %.1f MiB/s' % d['mib_per_sec'], 'agent cpu %.2f s' % b['cpu_seconds'], 'MiB/cpu-s %.0f' % b['mib_per_cpu_second'], 'rss %d->%d MiB' % (b['rss_start_kib']//1024, b['rss_max_kib']//1024), 'errors', d['errors'], '| produce %.1f' % p['mib_per_sec'])"; done
    grep -E "warm:|cold:" /tmp/ab-$L-$i.txt
  done
done
