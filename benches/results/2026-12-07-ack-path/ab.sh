#!/bin/bash
# interleaved A/B of agent builds at RATE: ab.sh ROUNDS RATE SECS NAME=BIN...
R=$1; RATE=$2; SECS=$3; shift 3
for i in $(seq $R); do for nb in "$@"; do n=${nb%%=*}; b=${nb#*=}; echo "== $n round $i"; BIN=$b timeout 300 /tmp/ackx/cpu.sh $RATE $SECS $AGENT_FLAGS 2>&1 | tail -12; done; done
