// roundtrip: produce N keyed records with franz-go (idempotent, acks=all),
// then read them back by direct partition assignment (no consumer group) and
// check what a user depends on: every record exactly once, offsets contiguous
// from 0 in every partition, per-key order, headers intact, acknowledged
// offsets equal to consumed offsets, high watermarks equal to record counts.
//
// Usage: roundtrip --bootstrap HOST:PORT --topic T --partitions P --records N
//
//	roundtrip version   (prints the franz-go version it was built with)
//
// Last line of stdout: "RESULT ok produced=N consumed=N" (exit 0) or
// "RESULT fail <reason>" (exit 1). Client logs go to stderr at level warn;
// set ROUNDTRIP_LOG=info or debug for more. ROUNDTRIP_SASL=MECHANISM:USER:PASSWORD
// (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) logs every client in with SASL.
// ROUNDTRIP_TLS_CA=FILE connects with TLS, trusting that PEM CA; with
// ROUNDTRIP_TLS_CERT=FILE and ROUNDTRIP_TLS_KEY=FILE it presents that client
// certificate.
//
// `roundtrip group-consume ...` runs the consumer-group member of
// tests/e2e/test_groups_java_go.py instead (group.go).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const (
	keys              = 97
	topicReadyTimeout = 30 * time.Second
	produceTimeout    = 90 * time.Second
	consumeTimeout    = 60 * time.Second
	pad               = "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01"
)

type failure struct{ reason string }

func (f failure) Error() string { return f.reason }

func fail(format string, args ...any) error { return failure{fmt.Sprintf(format, args...)} }

func main() {
	if len(os.Args) > 1 && os.Args[1] == "group-consume" {
		os.Exit(groupConsumeMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "dump" {
		os.Exit(dumpMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "txn" {
		os.Exit(txnMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "version" {
		os.Exit(versionMain())
	}
	bootstrap := flag.String("bootstrap", "", "HOST:PORT")
	topic := flag.String("topic", "", "topic to create")
	partitions := flag.Int("partitions", 0, "partitions")
	records := flag.Int("records", 0, "records to produce")
	flag.Parse()
	var err error
	if *bootstrap == "" || *topic == "" || *partitions < 1 || *records < 1 || flag.NArg() > 0 {
		err = fail("usage: --bootstrap HOST:PORT --topic T --partitions P --records N")
	} else {
		err = run(*bootstrap, *topic, int32(*partitions), *records)
	}
	if err != nil {
		var f failure
		if errors.As(err, &f) {
			fmt.Printf("RESULT fail %s\n", f.reason)
		} else {
			fmt.Printf("RESULT fail error %v\n", err)
		}
		os.Exit(1)
	}
	fmt.Printf("RESULT ok produced=%d consumed=%d\n", *records, *records)
}

// clientOpts: what every RoundTrip client sets (brokers, client id, log,
// the SASL login and TLS the environment asks for), then `more`.
func clientOpts(bootstrap, id string, more ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.ClientID(id), logOpt()}
	if o := saslOpt(); o != nil {
		opts = append(opts, o)
	}
	if o := tlsOpt(); o != nil {
		opts = append(opts, o)
	}
	return append(opts, more...)
}

// saslOpt: the SASL login ROUNDTRIP_SASL asks for (nil when unset).
func saslOpt() kgo.Opt {
	parts := strings.SplitN(os.Getenv("ROUNDTRIP_SASL"), ":", 3)
	if len(parts) != 3 {
		return nil
	}
	mech, user, pass := parts[0], parts[1], parts[2]
	switch mech {
	case "PLAIN":
		return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
	case "SCRAM-SHA-256":
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())
	case "SCRAM-SHA-512":
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
	}
	fmt.Fprintf(os.Stderr, "ROUNDTRIP_SASL: unknown mechanism %q\n", mech)
	os.Exit(2)
	return nil
}

// tlsOpt: the TLS connection ROUNDTRIP_TLS_CA asks for (nil when unset).
func tlsOpt() kgo.Opt {
	caFile := os.Getenv("ROUNDTRIP_TLS_CA")
	if caFile == "" {
		return nil
	}
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "ROUNDTRIP_TLS: %v\n", err)
		os.Exit(2)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		fail(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fail(fmt.Errorf("%s: no CA certificate", caFile))
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if certFile := os.Getenv("ROUNDTRIP_TLS_CERT"); certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, os.Getenv("ROUNDTRIP_TLS_KEY"))
		if err != nil {
			fail(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return kgo.DialTLSConfig(cfg)
}

// logOpt sends franz-go's log to stderr, at warn unless ROUNDTRIP_LOG says otherwise.
func logOpt() kgo.Opt {
	level := kgo.LogLevelWarn
	switch strings.ToLower(os.Getenv("ROUNDTRIP_LOG")) {
	case "error":
		level = kgo.LogLevelError
	case "info":
		level = kgo.LogLevelInfo
	case "debug":
		level = kgo.LogLevelDebug
	}
	return kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil))
}

func value(i int) string { return "value-" + strconv.Itoa(i) + "|" + pad }

func indexOfValue(v string) (int, error) {
	bar := strings.IndexByte(v, '|')
	if !strings.HasPrefix(v, "value-") || bar < 0 {
		return 0, fail("malformed value %q", v)
	}
	i, err := strconv.Atoi(v[6:bar])
	if err != nil {
		return 0, fail("malformed value %q", v)
	}
	return i, nil
}

func run(bootstrap, topic string, partitions int32, n int) error {
	t0 := time.Now()
	if err := createTopic(bootstrap, topic, partitions); err != nil {
		return err
	}
	t1 := time.Now()
	fmt.Printf("topic %s created with %d partitions in %d ms\n", topic, partitions, t1.Sub(t0).Milliseconds())

	// ---- produce ----
	ackPartition := make([]int32, n)
	ackOffset := make([]int64, n)
	producer, err := kgo.NewClient(clientOpts(bootstrap, "roundtrip-go-producer",
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is franz-go's default and needs acks=all
		kgo.RecordDeliveryTimeout(60*time.Second),
	)...)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var produceErr error
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), produceTimeout)
	for i := 0; i < n; i++ {
		i := i
		r := &kgo.Record{
			Topic:   topic,
			Key:     []byte("k" + strconv.Itoa(i%keys)),
			Value:   []byte(value(i)),
			Headers: []kgo.RecordHeader{{Key: "idx", Value: []byte(strconv.Itoa(i))}},
		}
		wg.Add(1)
		producer.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				if produceErr == nil {
					produceErr = fail("send of record %d failed: %v", i, err)
				}
				mu.Unlock()
				return
			}
			ackPartition[i] = r.Partition
			ackOffset[i] = r.Offset
		})
	}
	flushErr := producer.Flush(ctx)
	wg.Wait()
	cancel()
	producer.Close()
	if produceErr != nil {
		return produceErr
	}
	if flushErr != nil {
		return fail("flush: %v", flushErr)
	}
	t2 := time.Now()
	fmt.Printf("produced %d records in %d ms\n", n, t2.Sub(t1).Milliseconds())

	// Acknowledged positions must be distinct and, per partition, exactly 0..count-1.
	ackCount := make([]int64, partitions)
	for i := 0; i < n; i++ {
		if ackPartition[i] < 0 || ackPartition[i] >= partitions {
			return fail("record %d acknowledged on partition %d", i, ackPartition[i])
		}
		ackCount[ackPartition[i]]++
	}
	ackSeen := make([][]bool, partitions)
	for p := range ackSeen {
		ackSeen[p] = make([]bool, ackCount[p])
	}
	for i := 0; i < n; i++ {
		p, o := ackPartition[i], ackOffset[i]
		if o < 0 || o >= ackCount[p] {
			return fail("record %d acknowledged at p%d@%d outside 0..%d", i, p, o, ackCount[p]-1)
		}
		if ackSeen[p][o] {
			return fail("two records acknowledged at the same position p%d@%d", p, o)
		}
		ackSeen[p][o] = true
	}

	// ---- consume (direct assignment, no group) ----
	assign := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		assign[p] = kgo.NewOffset().AtStart()
	}
	consumer, err := kgo.NewClient(clientOpts(bootstrap, "roundtrip-go-consumer",
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
	)...)
	if err != nil {
		return err
	}
	defer consumer.Close()
	st := &state{
		topic:          topic,
		partitions:     partitions,
		n:              n,
		nextOffset:     make([]int64, partitions),
		seenPartition:  make([]int32, n),
		seenOffset:     make([]int64, n),
		lastIdxOfKey:   make([]int, keys),
		partitionOfKey: make([]int32, keys),
	}
	for i := range st.seenOffset {
		st.seenOffset[i] = -1
	}
	for k := 0; k < keys; k++ {
		st.lastIdxOfKey[k] = -1
		st.partitionOfKey[k] = -1
	}
	consumed := 0
	cctx, ccancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer ccancel()
	for consumed < n {
		fetches := consumer.PollFetches(cctx)
		if cctx.Err() != nil {
			return fail("timeout: consumed %d of %d records in %d s; next offsets %v acknowledged counts %v",
				consumed, n, int(consumeTimeout.Seconds()), st.nextOffset, ackCount)
		}
		if fetches.IsClientClosed() {
			return fail("consumer closed")
		}
		for _, fe := range fetches.Errors() {
			// Fetch errors that franz-go surfaces are not retried internally.
			return fail("fetch error on %s-%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		var checkErr error
		fetches.EachRecord(func(r *kgo.Record) {
			consumed++
			if checkErr == nil {
				checkErr = st.check(r)
			}
		})
		if checkErr != nil {
			return checkErr
		}
	}
	t3 := time.Now()
	fmt.Printf("consumed %d records in %d ms\n", consumed, t3.Sub(t2).Milliseconds())

	// High watermarks, asked for with ListOffsets.
	adm := kadm.NewClient(consumer)
	ectx, ecancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ecancel()
	ends, err := adm.ListEndOffsets(ectx, topic)
	if err != nil {
		return fail("list end offsets: %v", err)
	}

	// ---- compare ----
	for i := 0; i < n; i++ {
		if st.seenOffset[i] < 0 {
			return fail("record %d never consumed", i)
		}
		if st.seenPartition[i] != ackPartition[i] || st.seenOffset[i] != ackOffset[i] {
			return fail("record %d acknowledged at p%d@%d but consumed at p%d@%d",
				i, ackPartition[i], ackOffset[i], st.seenPartition[i], st.seenOffset[i])
		}
	}
	for p := int32(0); p < partitions; p++ {
		if st.nextOffset[p] != ackCount[p] {
			return fail("partition %d: consumed %d records, acknowledged %d", p, st.nextOffset[p], ackCount[p])
		}
		end, ok := ends.Lookup(topic, p)
		if !ok || end.Err != nil || end.Offset != ackCount[p] {
			return fail("partition %d: high watermark %d (present %v, error %v) but %d records written",
				p, end.Offset, ok, end.Err, ackCount[p])
		}
	}
	return nil
}

type state struct {
	topic          string
	partitions     int32
	n              int
	nextOffset     []int64
	seenPartition  []int32
	seenOffset     []int64
	lastIdxOfKey   []int
	partitionOfKey []int32
}

func (s *state) check(r *kgo.Record) error {
	p := r.Partition
	if r.Topic != s.topic || p < 0 || p >= s.partitions {
		return fail("record from unexpected %s-%d", r.Topic, p)
	}
	if r.Offset != s.nextOffset[p] {
		return fail("partition %d: expected offset %d got %d", p, s.nextOffset[p], r.Offset)
	}
	s.nextOffset[p]++
	i, err := indexOfValue(string(r.Value))
	if err != nil {
		return err
	}
	if i < 0 || i >= s.n {
		return fail("value index %d out of range at p%d@%d", i, p, r.Offset)
	}
	if s.seenOffset[i] >= 0 {
		return fail("record %d consumed twice: p%d@%d and p%d@%d", i, s.seenPartition[i], s.seenOffset[i], p, r.Offset)
	}
	s.seenPartition[i] = p
	s.seenOffset[i] = r.Offset
	key := "k" + strconv.Itoa(i%keys)
	if string(r.Key) != key {
		return fail("record %d has key %q, expected %s", i, r.Key, key)
	}
	var idx []byte
	found := false
	for _, h := range r.Headers {
		if h.Key == "idx" {
			idx, found = h.Value, true
		}
	}
	if !found {
		return fail("record %d has no idx header", i)
	}
	if string(idx) != strconv.Itoa(i) {
		return fail("record %d has idx header %q", i, idx)
	}
	k := i % keys
	if s.partitionOfKey[k] >= 0 && s.partitionOfKey[k] != p {
		return fail("key %s seen in partitions %d and %d", key, s.partitionOfKey[k], p)
	}
	s.partitionOfKey[k] = p
	if i <= s.lastIdxOfKey[k] {
		return fail("key %s out of order: record %d after record %d", key, i, s.lastIdxOfKey[k])
	}
	s.lastIdxOfKey[k] = i
	return nil
}

func createTopic(bootstrap, topic string, partitions int32) error {
	cl, err := kgo.NewClient(clientOpts(bootstrap, "roundtrip-go-admin")...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil {
		return fail("create topic %s: %v", topic, err)
	}
	if resp.Err != nil {
		return fail("create topic %s: %v %s", topic, resp.Err, resp.ErrMessage)
	}
	// Wait until metadata shows every partition with a leader.
	deadline := time.Now().Add(topicReadyTimeout)
	last := "no answer"
	for {
		details, err := adm.ListTopics(ctx, topic)
		if err != nil {
			last = err.Error()
		} else if td, ok := details[topic]; !ok {
			last = "topic missing from metadata"
		} else if td.Err != nil {
			last = td.Err.Error()
		} else {
			withLeader := 0
			for _, pd := range td.Partitions {
				if pd.Err == nil && pd.Leader >= 0 {
					withLeader++
				}
			}
			if int32(len(td.Partitions)) > partitions {
				return fail("topic %s has %d partitions, created with %d", topic, len(td.Partitions), partitions)
			}
			if int32(len(td.Partitions)) == partitions && int32(withLeader) == partitions {
				return nil
			}
			last = fmt.Sprintf("%d partitions, %d with a leader", len(td.Partitions), withLeader)
		}
		if time.Now().After(deadline) {
			return fail("topic %s not ready after %d s: %s", topic, int(topicReadyTimeout.Seconds()), last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// versionMain prints the franz-go module version this program was built with.
func versionMain() int {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(os.Stderr, "no build information")
		return 1
	}
	for _, dep := range info.Deps {
		if dep.Path == "github.com/twmb/franz-go" {
			fmt.Println(dep.Version)
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, "franz-go is not a dependency of this build")
	return 1
}
