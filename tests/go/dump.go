// `roundtrip dump --bootstrap HOST:PORT --topic T --partitions P [--isolation read_committed]`:
// reads every partition of T from its start without a group, as a table
// loader reads a compacted topic (tests/e2e/test_compaction.py). Prints
// "REC <partition> <offset> <key> <value>" per record ("-" for null), then
// "RESULT ok consumed=N" or "RESULT fail <reason>" (offsets not increasing
// within a partition, a fetch error). franz-go does not expose its fetch
// position, so a partition is done when a record at or past its end offset
// minus one arrived, or when nothing arrived for 3 s (a log whose tail was
// compacted away); the test checks the records themselves.
package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func text(b []byte) string {
	if b == nil {
		return "-"
	}
	return string(b)
}

func dumpMain(args []string) int {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "", "HOST:PORT")
	topic := fs.String("topic", "", "topic")
	partitions := fs.Int("partitions", 0, "partitions")
	isolation := fs.String("isolation", "read_uncommitted", "read_committed or read_uncommitted")
	if err := fs.Parse(args); err != nil {
		fmt.Println("RESULT fail", err)
		return 2
	}
	start := map[int32]kgo.Offset{}
	for p := 0; p < *partitions; p++ {
		start[int32(p)] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(*bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: start}),
		kgo.FetchMaxBytes(20000),
		kgo.FetchMaxPartitionBytes(10000),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}
	if *isolation == "read_committed" {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Println("RESULT fail", err)
		return 1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	if *isolation == "read_committed" {
		ends, err = adm.ListCommittedOffsets(ctx, *topic)
	} else {
		ends, err = adm.ListEndOffsets(ctx, *topic)
	}
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		fmt.Println("RESULT fail end offsets:", err)
		return 1
	}
	last := map[int32]int64{}
	done := map[int32]bool{}
	for p := int32(0); p < int32(*partitions); p++ {
		if o, ok := ends.Lookup(*topic, p); ok && o.Offset == 0 {
			done[p] = true
		}
	}
	consumed := 0
	idle := 0
	deadline := time.Now().Add(60 * time.Second)
	for len(done) < *partitions && idle < 3 {
		if time.Now().After(deadline) {
			fmt.Println("RESULT fail not done in 60 s:", len(done), "of", *partitions, "partitions")
			return 1
		}
		pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
		fetches := cl.PollFetches(pctx)
		pcancel()
		for _, fe := range fetches.Errors() {
			if fe.Err != context.DeadlineExceeded {
				fmt.Println("RESULT fail fetch:", fe.Err)
				return 1
			}
		}
		n := 0
		var bad error
		fetches.EachRecord(func(r *kgo.Record) {
			if bad != nil {
				return
			}
			if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
				bad = fail("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
				return
			}
			last[r.Partition] = r.Offset
			if o, ok := ends.Lookup(*topic, r.Partition); ok && r.Offset+1 >= o.Offset {
				done[r.Partition] = true
			}
			fmt.Printf("REC %d %d %s %s\n", r.Partition, r.Offset, text(r.Key), text(r.Value))
			n++
		})
		if bad != nil {
			fmt.Println("RESULT fail", bad)
			return 1
		}
		consumed += n
		if n == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	fmt.Printf("RESULT ok consumed=%d\n", consumed)
	return 0
}
