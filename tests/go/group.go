// group-consume: one consumer-group member with franz-go, run as a subprocess
// by tests/e2e/test_groups_java_go.py so that a test can SIGKILL it (a crash:
// no LeaveGroup, no last commit) or SIGTERM it (a clean close: Close() leaves
// the group).
//
// It subscribes to one topic and loops: poll (BlockRebalanceOnPoll, so no
// rebalance callback runs while a poll's records are processed and
// committed), record every record as processed, then commit synchronously
// (CommitOffsetsSync with explicit offsets) the next offset of every
// partition processed since the last commit, once --commit-interval-ms has
// passed since the last commit (0: after every poll), and record the commit
// only after the broker accepted it; then AllowRebalance. On revocation it
// commits what it processed of the revoked partitions first; on loss it
// forgets that progress.
//
// Usage:
//
//	roundtrip group-consume --bootstrap H:P --topic T --group G [--name N]
//	    [--protocol classic|consumer] [--assignor range|roundrobin|sticky|cooperative-sticky]
//	    [--instance-id ID] [--session-timeout-ms MS] [--heartbeat-interval-ms MS]
//	    [--commit-interval-ms MS] [--idle-exit-ms MS]
//
// Without --assignor, franz-go's default (cooperative-sticky). --protocol
// consumer is KIP-848 (kgo.ServerSideBalancer) with the server's range
// (--assignor range) or uniform assignor; franz-go silently falls back to
// classic on a broker without ConsumerGroupHeartbeat v1.
//
// Output: the JSON lines of tests/java/src/main/java/GroupConsume.java (same
// events, same fields), one write(2) each. Client logs go to stderr at info
// (GROUP_LOG=debug|warn to change).

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// monoSeconds reads CLOCK_MONOTONIC, the clock of Python's time.monotonic()
// (Go's own monotonic reading is not exposed as an absolute value).
func monoSeconds() float64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

type events struct {
	mu   sync.Mutex
	name string
}

func (e *events) emit(ev string, kv ...any) {
	m := map[string]any{"ev": ev, "t": monoSeconds(), "wall": float64(time.Now().UnixNano()) / 1e9, "name": e.name}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"ev":"crash","err":%q}`, err.Error()))
	}
	b = append(b, '\n')
	e.mu.Lock()
	os.Stdout.Write(b) // one write(2): a SIGKILL never leaves half a line
	e.mu.Unlock()
}

type groupMember struct {
	ev       *events
	topic    string
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
	pending  map[int32]kgo.EpochOffset // next offset processed but not committed
}

func sortedParts(ps []int32) []int32 {
	out := append([]int32{}, ps...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func offsetsJSON(m map[int32]kgo.EpochOffset) map[string]int64 {
	out := map[string]int64{}
	for p, eo := range m {
		out[strconv.Itoa(int(p))] = eo.Offset
	}
	return out
}

func idxOf(v []byte) any {
	if len(v) < 10 || v[0] != 'v' || v[9] != '|' {
		return nil
	}
	i, err := strconv.Atoi(string(v[1:9]))
	if err != nil {
		return nil
	}
	return i
}

// commit commits the pending offsets of `only` (nil: every partition) that are still assigned.
func (m *groupMember) commit(only []int32, why string) {
	m.mu.Lock()
	next := map[int32]kgo.EpochOffset{}
	for p, eo := range m.pending {
		if !m.assigned[p] {
			continue
		}
		if only != nil {
			found := false
			for _, q := range only {
				found = found || q == p
			}
			if !found {
				continue
			}
		}
		next[p] = eo
	}
	m.mu.Unlock()
	if len(next) == 0 {
		return
	}
	m.ev.emit("committing", "offsets", offsetsJSON(next), "why", why)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{m.topic: next},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				m.ev.emit("commit_err", "err", err.Error(), "offsets", offsetsJSON(next))
				return
			}
			ok := map[int32]kgo.EpochOffset{}
			bad := map[string]string{}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
						bad[strconv.Itoa(int(p.Partition))] = e.Error()
					} else if eo, found := next[p.Partition]; found && t.Topic == m.topic {
						ok[p.Partition] = eo
					}
				}
			}
			m.mu.Lock()
			for p, eo := range ok {
				if m.pending[p] == eo {
					delete(m.pending, p)
				}
			}
			m.mu.Unlock()
			if len(ok) > 0 {
				m.ev.emit("commit", "offsets", offsetsJSON(ok), "why", why)
			}
			if len(bad) > 0 {
				m.ev.emit("commit_err", "err", bad, "offsets", offsetsJSON(next))
			}
		})
}

func (m *groupMember) forget(ps []int32) {
	m.mu.Lock()
	for _, p := range ps {
		delete(m.pending, p)
		delete(m.assigned, p)
	}
	m.mu.Unlock()
}

func balancer(name string) (kgo.GroupBalancer, error) {
	switch name {
	case "range":
		return kgo.RangeBalancer(), nil
	case "roundrobin":
		return kgo.RoundRobinBalancer(), nil
	case "sticky":
		return kgo.StickyBalancer(), nil
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer(), nil
	}
	return nil, fmt.Errorf("unknown assignor %q (range|roundrobin|sticky|cooperative-sticky)", name)
}

func groupLogOpt() kgo.Opt {
	level := kgo.LogLevelInfo
	switch os.Getenv("GROUP_LOG") {
	case "debug":
		level = kgo.LogLevelDebug
	case "warn":
		level = kgo.LogLevelWarn
	case "error":
		level = kgo.LogLevelError
	}
	return kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, func() string {
		return time.Now().Format("15:04:05.000 ")
	}))
}

func groupConsumeMain(args []string) int {
	fs := flag.NewFlagSet("group-consume", flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "", "HOST:PORT")
	topic := fs.String("topic", "", "topic to consume")
	group := fs.String("group", "", "group id")
	name := fs.String("name", "go", "client id and event name")
	protocol := fs.String("protocol", "classic", "classic|consumer")
	assignor := fs.String("assignor", "", "range|roundrobin|sticky|cooperative-sticky")
	instanceID := fs.String("instance-id", "", "group.instance.id (static membership)")
	sessionMs := fs.Int("session-timeout-ms", 6000, "session timeout (classic)")
	heartbeatMs := fs.Int("heartbeat-interval-ms", 500, "heartbeat interval (classic)")
	commitIntervalMs := fs.Int("commit-interval-ms", 0, "commit at most this often (0: after every poll)")
	idleExitMs := fs.Int("idle-exit-ms", 0, "close and exit after this long without records (0: never)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *bootstrap == "" || *topic == "" || *group == "" || fs.NArg() > 0 ||
		(*protocol != "classic" && *protocol != "consumer") {
		fmt.Fprintln(os.Stderr, "usage: group-consume --bootstrap H:P --topic T --group G [options]")
		return 2
	}
	ev := &events{name: *name}
	ev.emit("start", "pid", os.Getpid(), "client", "franz-go", "protocol", *protocol)

	m := &groupMember{ev: ev, topic: *topic, assigned: map[int32]bool{}, pending: map[int32]kgo.EpochOffset{}}
	opts := []kgo.Opt{
		kgo.SeedBrokers(*bootstrap),
		kgo.ClientID(*name),
		groupLogOpt(),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.SessionTimeout(time.Duration(*sessionMs) * time.Millisecond),
		kgo.HeartbeatInterval(time.Duration(*heartbeatMs) * time.Millisecond),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			ps := sortedParts(a[*topic])
			if len(ps) == 0 { // cooperative: a rebalance that gave this member nothing new
				return
			}
			m.mu.Lock()
			for _, p := range ps {
				m.assigned[p] = true
			}
			m.mu.Unlock()
			ev.emit("assign", "parts", ps)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			ps := sortedParts(r[*topic])
			if len(ps) == 0 { // called at the end of every session, also with nothing revoked
				return
			}
			m.commit(ps, "revoke")
			m.forget(ps)
			ev.emit("revoke", "parts", ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			ps := sortedParts(l[*topic])
			m.forget(ps)
			ev.emit("lost", "parts", ps)
		}),
	}
	switch {
	case *protocol == "consumer":
		b := kgo.StickyBalancer() // the server's "uniform"
		if *assignor == "range" {
			b = kgo.RangeBalancer()
		}
		ssb, ok := serverSideBalancer()
		if !ok {
			fmt.Fprintln(os.Stderr, "this franz-go build has no KIP-848 consumer protocol (franz-go < 1.22)")
			return 2
		}
		opts = append(opts, ssb, kgo.Balancers(b))
	case *assignor != "":
		b, err := balancer(*assignor)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		opts = append(opts, kgo.Balancers(b))
	}
	if *instanceID != "" {
		opts = append(opts, kgo.InstanceID(*instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		ev.emit("crash", "err", err.Error())
		return 3
	}
	m.cl = cl
	ev.emit("subscribed")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stopping atomic.Bool
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		stopping.Store(true)
		cancel()
	}()

	lastCommit := time.Now()
	lastRecord := time.Now()
	everAssigned := false
	for !stopping.Load() {
		// A bounded poll, so that --idle-exit-ms is noticed without records.
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fetches := cl.PollRecords(pctx, 500)
		pcancel()
		if fetches.IsClientClosed() {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				ev.emit("error", "err", fmt.Sprintf("%s[%d]: %v", t, p, err))
			}
		})
		var batch [][]any
		m.mu.Lock()
		everAssigned = everAssigned || len(m.assigned) > 0
		fetches.EachRecord(func(r *kgo.Record) {
			batch = append(batch, []any{r.Partition, r.Offset, idxOf(r.Value)})
			if m.assigned[r.Partition] { // never commit a partition already handed over
				if cur, ok := m.pending[r.Partition]; !ok || cur.Offset < r.Offset+1 {
					m.pending[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
				}
			}
		})
		havePending := len(m.pending) > 0
		m.mu.Unlock()
		if len(batch) > 0 {
			ev.emit("recs", "r", batch)
			lastRecord = time.Now()
		}
		if havePending && time.Since(lastCommit) >= time.Duration(*commitIntervalMs)*time.Millisecond {
			lastCommit = time.Now()
			m.commit(nil, "poll")
		}
		if !stopping.Load() && *idleExitMs > 0 && everAssigned && time.Since(lastRecord) > time.Duration(*idleExitMs)*time.Millisecond {
			ev.emit("idle", "idle_ms", *idleExitMs)
			break
		}
		cl.AllowRebalance()
	}
	ev.emit("closing")
	m.commit(nil, "close")
	done := make(chan struct{})
	go func() {
		cl.CloseAllowingRebalance() // leaves the group; the revoke callback commits first
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		ev.emit("crash", "err", "Close did not return within 40 s")
		return 4
	}
	ev.emit("closed")
	return 0
}
