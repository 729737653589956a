// `roundtrip txn --bootstrap HOST:PORT --topic T --partitions P --records N`:
// transactions with franz-go (tests/e2e/test_transactions.py). The topics T,
// T-in and T-out must exist with P partitions. Checks:
//   - commit/abort: three transactions of N records over every partition, the
//     second aborted; a read_committed consumer sees exactly the 2N committed
//     records, a read_uncommitted one all 3N;
//   - GroupTransactSession: N records in T-in copied to T-out by a group
//     consumer and a transactional producer committing the consumer's offsets
//     in each transaction; T-out then holds each record exactly once and the
//     group's committed offsets equal T-in's end offsets.
//
// Last line: "RESULT ok ..." or "RESULT fail <reason>".
package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func txnMain(args []string) int {
	fs := flag.NewFlagSet("txn", flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "", "HOST:PORT")
	topic := fs.String("topic", "", "topic")
	partitions := fs.Int("partitions", 0, "partitions")
	records := fs.Int("records", 0, "records per transaction")
	if err := fs.Parse(args); err != nil {
		fmt.Println("RESULT fail", err)
		return 2
	}
	r1, err := txnCommitAbort(*bootstrap, *topic, int32(*partitions), *records)
	if err == nil {
		var r2 string
		r2, err = txnSession(*bootstrap, *topic, int32(*partitions), *records)
		r1 += " " + r2
	}
	if err != nil {
		fmt.Println("RESULT fail", err)
		return 1
	}
	fmt.Println("RESULT ok", r1)
	return 0
}

// readAll reads topic from the start with the given isolation level until
// it holds `expect` records, then one more second (so any extra record,
// such as an aborted one leaking through, is seen too).
func readAll(bootstrap, topic string, partitions int32, committed bool, expect int) (map[int32][]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := int32(0); p < partitions; p++ {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(offsets), logOpt()}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[int32][]string{}
	total := 0
	var settle <-chan time.Time
	for {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fetches := cl.PollFetches(pctx)
		pcancel()
		for _, e := range fetches.Errors() {
			if e.Err != context.DeadlineExceeded && e.Err != context.Canceled {
				return nil, fail("fetch %s[%d]: %v", e.Topic, e.Partition, e.Err)
			}
		}
		fetches.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			total++
		})
		if total >= expect && settle == nil {
			settle = time.After(time.Second)
		}
		if settle != nil {
			select {
			case <-settle:
				return out, nil
			default:
			}
		}
		if ctx.Err() != nil {
			return nil, fail("reading %s (committed=%v) timed out with %d of %d records", topic, committed, total, expect)
		}
	}
}

func txnProducer(bootstrap, id string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(60 * time.Second),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		logOpt(),
	}, extra...)
	return kgo.NewClient(opts...)
}

func txnCommitAbort(bootstrap, topic string, partitions int32, n int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), produceTimeout)
	defer cancel()
	cl, err := txnProducer(bootstrap, topic+"-txn")
	if err != nil {
		return "", err
	}
	defer cl.Close()
	for _, step := range []struct {
		tag    string
		commit bool
	}{{"a", true}, {"b", false}, {"c", true}} {
		if err := cl.BeginTransaction(); err != nil {
			return "", fail("begin: %v", err)
		}
		for i := 0; i < n; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Key: []byte("k" + strconv.Itoa(i)),
				Value: []byte(step.tag + "-" + strconv.Itoa(i))}
			cl.Produce(ctx, r, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			return "", fail("flush: %v", err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(step.commit)); err != nil {
			return "", fail("end transaction %s: %v", step.tag, err)
		}
	}
	committed, err := readAll(bootstrap, topic, partitions, true, 2*n)
	if err != nil {
		return "", err
	}
	all, err := readAll(bootstrap, topic, partitions, false, 3*n)
	if err != nil {
		return "", err
	}
	count := func(m map[int32][]string) (total, aborted int) {
		for _, vs := range m {
			for _, v := range vs {
				total++
				if strings.HasPrefix(v, "b-") {
					aborted++
				}
			}
		}
		return
	}
	c, ca := count(committed)
	a, _ := count(all)
	if c != 2*n || ca != 0 {
		return "", fail("read_committed saw %d records (%d aborted), expected %d", c, ca, 2*n)
	}
	if a != 3*n {
		return "", fail("read_uncommitted saw %d records, expected %d", a, 3*n)
	}
	return fmt.Sprintf("committed=%d all=%d", c, a), nil
}

func txnSession(bootstrap, topic string, partitions int32, n int) (string, error) {
	in, out, group := topic+"-in", topic+"-out", topic+"-eos"
	ctx, cancel := context.WithTimeout(context.Background(), 2*produceTimeout)
	defer cancel()
	plain, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()), logOpt())
	if err != nil {
		return "", err
	}
	defer plain.Close()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: in, Partition: int32(i) % partitions, Value: []byte("in-" + strconv.Itoa(i))}
		if err := plain.ProduceSync(ctx, r).FirstErr(); err != nil {
			return "", fail("produce input: %v", err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(bootstrap),
		kgo.TransactionalID(topic+"-eos"),
		kgo.TransactionTimeout(60*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		logOpt(),
	)
	if err != nil {
		return "", err
	}
	copied := 0
	for copied < n {
		if ctx.Err() != nil {
			sess.Close()
			return "", fail("session copied %d of %d", copied, n)
		}
		fetches := sess.PollFetches(ctx)
		if err := fetches.Err0(); err != nil && ctx.Err() == nil {
			sess.Close()
			return "", fail("poll: %v", err)
		}
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			sess.Close()
			return "", fail("begin: %v", err)
		}
		for _, r := range recs {
			sess.Produce(ctx, &kgo.Record{Topic: out, Partition: r.Partition,
				Value: []byte(strings.Replace(string(r.Value), "in-", "out-", 1))}, nil)
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			sess.Close()
			return "", fail("end: %v", err)
		}
		if committed {
			copied += len(recs)
		}
	}
	sess.Close()
	got, err := readAll(bootstrap, out, partitions, true, n)
	if err != nil {
		return "", err
	}
	seen := map[string]bool{}
	for _, vs := range got {
		for _, v := range vs {
			if seen[v] {
				return "", fail("duplicate in output: %s", v)
			}
			seen[v] = true
		}
	}
	if len(seen) != n {
		return "", fail("output holds %d records, expected %d", len(seen), n)
	}
	ka := kadm.NewClient(plain)
	offs, err := ka.FetchOffsets(ctx, group)
	if err != nil {
		return "", fail("fetch group offsets: %v", err)
	}
	ends, err := ka.ListEndOffsets(ctx, in)
	if err != nil {
		return "", err
	}
	for p := int32(0); p < partitions; p++ {
		o, _ := offs.Lookup(in, p)
		e, _ := ends.Lookup(in, p)
		if o.At != e.Offset {
			return "", fail("group offset of %s[%d] is %d, end offset %d", in, p, o.At, e.Offset)
		}
	}
	return fmt.Sprintf("transformed=%d", len(seen)), nil
}
