package main

// The franz-go checks: kgo for producing and consuming, kadm for administration.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func franzChecks(e *env) []check {
	f := &franz{env: e}
	cs := []check{
		{"produce-acks-0", func(ctx context.Context) error { return f.produceAcks(ctx, kgo.NoAck(), "0") }},
		{"produce-acks-1", func(ctx context.Context) error { return f.produceAcks(ctx, kgo.LeaderAck(), "1") }},
		{"produce-acks-all", func(ctx context.Context) error { return f.produceAcks(ctx, kgo.AllISRAcks(), "all") }},
		{"producer-idempotent", f.idempotent},
		{"transactions-commit-abort", f.transactions},
		{"transactions-group-session", f.groupTransactSession},
		{"headers", f.headers},
	}
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		cs = append(cs, check{"compression-" + codec, func(ctx context.Context) error { return f.compression(ctx, codec) }})
	}
	cs = append(cs,
		check{"record-near-message-max-bytes", f.recordNearMax},
		check{"record-too-large", f.recordTooLarge},
	)
	for _, b := range []struct {
		name     string
		balancer func() kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer},
		{"roundrobin", kgo.RoundRobinBalancer},
		{"sticky", kgo.StickyBalancer},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer},
	} {
		cs = append(cs, check{"consumer-group-classic-" + b.name, func(ctx context.Context) error {
			return f.group(ctx, b.name, false, kgo.Balancers(b.balancer()))
		}})
	}
	cs = append(cs,
		// KIP-848: franz-go 1.22 runs the consumer protocol when asked for a server-side
		// balancer and the broker supports ConsumerGroupHeartbeat; "range" names the
		// broker's range assignor.
		check{"consumer-group-protocol-consumer", func(ctx context.Context) error {
			return f.group(ctx, "range", true, kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer())
		}},
		check{"admin-describe-cluster", f.describeCluster},
		check{"admin-topics", f.adminTopics},
		check{"admin-create-partitions", f.createPartitions},
		check{"admin-configs", f.configs},
		check{"admin-acls", f.acls},
		check{"admin-list-offsets", f.listOffsets},
		check{"admin-delete-records", f.deleteRecords},
		check{"admin-group-offsets", f.groupOffsets},
	)
	return cs
}

type franz struct {
	*env
	adm *kadm.Client
}

func franzSetup(ctx context.Context, e *env) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	meta, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	e.brokers = len(meta.Brokers)
	e.rf = int16(min(3, e.brokers))
	return nil
}

func (f *franz) client(opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(f.seeds...),
		kgo.RetryTimeout(30 * time.Second),
		// A freshly created topic may take a moment to have leaders everywhere.
		kgo.UnknownTopicRetries(-1),
	}
	if os.Getenv("GOCONF_DEBUG") != "" {
		base = append(base, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	return kgo.NewClient(append(base, opts...)...)
}

// admin returns a kadm client on a kgo client of its own; close both with the returned func.
func (f *franz) admin() (*kadm.Client, func(), error) {
	cl, err := f.client()
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// createTopic creates a topic and waits until every broker's metadata has a leader for
// each of its partitions.
func (f *franz) createTopic(ctx context.Context, what string, partitions int32, configs map[string]*string) (string, error) {
	topic := f.name(what)
	adm, closeAdm, err := f.admin()
	if err != nil {
		return "", err
	}
	defer closeAdm()
	resp, err := adm.CreateTopic(ctx, partitions, f.rf, configs, topic)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", topic, err)
	}
	if resp.Err != nil {
		return "", fmt.Errorf("create %s: %w (%s)", topic, resp.Err, resp.ErrMessage)
	}
	for {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil {
			d := details[topic]
			ready := d.Err == nil && len(d.Partitions) == int(partitions)
			for _, p := range d.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				// The metadata may name a leader before that broker acts as one; ListOffsets
				// is answered by the leader alone. (An acks=0 record sent to a broker not yet
				// leading is dropped without a word.)
				ends, err := adm.ListEndOffsets(ctx, topic)
				ready = err == nil && ends.Error() == nil && len(ends[topic]) == int(partitions)
			}
			if ready {
				return topic, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("topic %s has no leaders: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readUntil consumes partitions of topic from the start until done says it has enough
// records (or ctx ends), with the given extra consumer options.
func (f *franz) readUntil(ctx context.Context, topic string, partitions int32, done func([]*kgo.Record) bool, opts ...kgo.Opt) ([]*kgo.Record, error) {
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := f.client(append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var got []*kgo.Record
	for !done(got) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return got, fmt.Errorf("read %d records of %s before the deadline", len(got), topic)
		}
		for _, fe := range fs.Errors() {
			return got, fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		got = append(got, fs.Records()...)
	}
	return got, nil
}

func atLeast(n int) func([]*kgo.Record) bool {
	return func(rs []*kgo.Record) bool { return len(rs) >= n }
}

func values(rs []*kgo.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

// byPartition groups values by partition, each in offset order.
func byPartition(rs []*kgo.Record) map[int32][]string {
	out := map[int32][]string{}
	for _, r := range rs {
		out[r.Partition] = append(out[r.Partition], string(r.Value))
	}
	return out
}

func (f *franz) produceAcks(ctx context.Context, acks kgo.Acks, label string) error {
	topic, err := f.createTopic(ctx, "acks-"+label, 3, nil)
	if err != nil {
		return err
	}
	opts := []kgo.Opt{kgo.RequiredAcks(acks), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if label != "all" {
		// Idempotence needs acks=all; Kafka's clients turn it off for the others too.
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl, err := f.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	const n = 90
	want := map[int32][]string{}
	var rs []*kgo.Record
	for i := range n {
		p := int32(i % 3)
		v := fmt.Sprintf("acks%s-%d", label, i)
		rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Key: []byte("k" + strconv.Itoa(i)), Value: []byte(v)})
		want[p] = append(want[p], v)
	}
	results := cl.ProduceSync(ctx, rs...)
	if err := results.FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	if label != "0" {
		// Offsets are known once a broker answers: each partition's records from 0 on.
		next := map[int32]int64{}
		for _, r := range results {
			if err := expectEqual(next[r.Record.Partition], r.Record.Offset, fmt.Sprintf("offset in partition %d", r.Record.Partition)); err != nil {
				return err
			}
			next[r.Record.Partition]++
		}
	}
	got, err := f.readUntil(ctx, topic, 3, atLeast(n))
	if err != nil {
		return err
	}
	gotBy := byPartition(got)
	for p := range int32(3) {
		if err := equalStrings(want[p], gotBy[p], fmt.Sprintf("partition %d", p)); err != nil {
			return err
		}
	}
	return nil
}

func (f *franz) idempotent(ctx context.Context) error {
	topic, err := f.createTopic(ctx, "idempotent", 3, nil)
	if err != nil {
		return err
	}
	// Idempotence is franz-go's default, with several batches in flight per partition.
	cl, err := f.client(kgo.ProducerLinger(5 * time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	const n = 1500
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	produced := map[int32][]*kgo.Record{}
	for i := range n {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i%17)), Value: []byte("idem-" + strconv.Itoa(i))}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			produced[r.Partition] = append(produced[r.Partition], r)
		})
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("produce: %w", firstErr)
	}
	var producerID int64 = -1
	for p, rs := range produced {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		for i, r := range rs {
			if err := expectEqual(int64(i), r.Offset, fmt.Sprintf("offset %d of partition %d", i, p)); err != nil {
				return err
			}
			if producerID == -1 {
				producerID = r.ProducerID
			}
			if err := expectEqual(producerID, r.ProducerID, "producer id of every record"); err != nil {
				return err
			}
		}
	}
	if err := expect(producerID >= 0, "no producer id was assigned (%d)", producerID); err != nil {
		return err
	}
	got, err := f.readUntil(ctx, topic, 3, atLeast(n))
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, r := range got {
		if seen[string(r.Value)] {
			return fmt.Errorf("record %s read twice", r.Value)
		}
		seen[string(r.Value)] = true
		if err := expectEqual(producerID, r.ProducerID, "producer id in the stored batch"); err != nil {
			return err
		}
	}
	return expectEqual(n, len(got), "records read back")
}

func (f *franz) transactions(ctx context.Context) error {
	topic, err := f.createTopic(ctx, "txn", 1, nil)
	if err != nil {
		return err
	}
	cl, err := f.client(kgo.TransactionalID(f.name("txn-id")), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	txn := func(label string, count int, commit kgo.TransactionEndTry) error {
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("begin %s: %w", label, err)
		}
		for i := range count {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s-%d", label, i))).FirstErr(); err != nil {
				return fmt.Errorf("produce %s: %w", label, err)
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			return fmt.Errorf("end %s: %w", label, err)
		}
		return nil
	}
	if err := firstErr(txn("c", 10, kgo.TryCommit), txn("a", 10, kgo.TryAbort), txn("end", 1, kgo.TryCommit)); err != nil {
		return err
	}
	isEnd := func(rs []*kgo.Record) bool { return len(rs) > 0 && string(rs[len(rs)-1].Value) == "end-0" }
	committed, err := f.readUntil(ctx, topic, 1, isEnd, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("c-%d", i))
	}
	if err := equalStrings(append(want, "end-0"), values(committed), "read_committed"); err != nil {
		return err
	}
	// Offsets as Kafka assigns them: each transaction's control record takes one.
	if err := firstErr(
		expectEqual(int64(0), committed[0].Offset, "offset of c-0"),
		expectEqual(int64(22), committed[10].Offset, "offset of end-0 (after two markers and 10 aborted)"),
	); err != nil {
		return err
	}
	all, err := f.readUntil(ctx, topic, 1, isEnd)
	if err != nil {
		return err
	}
	if err := expectEqual(21, len(all), "read_uncommitted records"); err != nil {
		return err
	}
	adm, closeAdm, err := f.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	end, _ := ends.Lookup(topic, 0)
	if err := expectEqual(int64(24), end.Offset, "high watermark (21 records, 3 markers)"); err != nil {
		return err
	}
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return err
	}
	stable, _ := lso.Lookup(topic, 0)
	return expectEqual(int64(24), stable.Offset, "last stable offset")
}

// groupTransactSession is franz-go's consume-transform-produce loop (EOS, KIP-447):
// input offsets are committed in the transaction that writes the output.
func (f *franz) groupTransactSession(ctx context.Context) error {
	in, err := f.createTopic(ctx, "eos-in", 2, nil)
	if err != nil {
		return err
	}
	out, err := f.createTopic(ctx, "eos-out", 1, nil)
	if err != nil {
		return err
	}
	group := f.name("eos-group")
	const n = 40
	plain, err := f.client(kgo.DefaultProduceTopic(in))
	if err != nil {
		return err
	}
	defer plain.Close()
	for i := range n {
		if err := plain.ProduceSync(ctx, kgo.StringRecord("in-"+strconv.Itoa(i))).FirstErr(); err != nil {
			return err
		}
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(f.seeds...),
		kgo.TransactionalID(f.name("eos-txn")),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer sess.Close()
	processed := 0
	for processed < n {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("processed %d of %d before the deadline", processed, n)
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("fetch: %w", fe.Err)
		}
		rs := fs.Records()
		if len(rs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		for _, r := range rs {
			sess.Produce(ctx, &kgo.Record{Topic: out, Value: []byte("out-" + strings.TrimPrefix(string(r.Value), "in-"))}, nil)
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			return fmt.Errorf("end: %w", err)
		}
		if committed {
			processed += len(rs)
		}
	}
	if err := expectEqual(n, processed, "records processed"); err != nil {
		return err
	}
	got, err := f.readUntil(ctx, out, 1, atLeast(n), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	outs := values(got)
	slices.Sort(outs)
	outs = slices.Compact(outs)
	if err := expectEqual(n, len(outs), "distinct output records"); err != nil {
		return err
	}
	adm, closeAdm, err := f.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	var total int64
	offsets.Each(func(o kadm.OffsetResponse) { total += o.At })
	return expectEqual(int64(n), total, "group offsets committed in the transactions")
}

func (f *franz) headers(ctx context.Context) error {
	topic, err := f.createTopic(ctx, "headers", 1, nil)
	if err != nil {
		return err
	}
	cl, err := f.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	hs := []kgo.RecordHeader{
		{Key: "trace", Value: []byte("abc")},
		{Key: "dup", Value: []byte("1")},
		{Key: "dup", Value: []byte("2")},
		{Key: "empty", Value: []byte{}},
		{Key: "nil", Value: nil},
		{Key: "binary", Value: []byte{0, 1, 2, 255}},
		{Key: "ünïcode", Value: []byte("✓")},
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("v"), Headers: hs}).FirstErr(); err != nil {
		return err
	}
	got, err := f.readUntil(ctx, topic, 1, atLeast(1))
	if err != nil {
		return err
	}
	gh := got[0].Headers
	if err := expectEqual(len(hs), len(gh), "header count"); err != nil {
		return err
	}
	for i := range hs {
		if hs[i].Key != gh[i].Key || string(hs[i].Value) != string(gh[i].Value) {
			return fmt.Errorf("header %d: want %s=%q, got %s=%q", i, hs[i].Key, hs[i].Value, gh[i].Key, gh[i].Value)
		}
	}
	return nil
}

func codecOf(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	default:
		return kgo.ZstdCompression()
	}
}

func (f *franz) compression(ctx context.Context, codec string) error {
	topic, err := f.createTopic(ctx, "compression-"+codec, 1, nil)
	if err != nil {
		return err
	}
	cl, err := f.client(kgo.ProducerBatchCompression(codecOf(codec)), kgo.ProducerLinger(20*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var want []string
	var rs []*kgo.Record
	for i := range 200 {
		v := codec + "-" + strconv.Itoa(i)
		if i%50 == 0 {
			v = strings.Repeat(codec+" compressible ", 500)
		}
		want = append(want, v)
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i%7)), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return err
	}
	got, err := f.readUntil(ctx, topic, 1, atLeast(len(want)))
	if err != nil {
		return err
	}
	return equalStrings(want, values(got), "values")
}

func (f *franz) recordNearMax(ctx context.Context) error {
	topic, err := f.createTopic(ctx, "near-max", 1, nil)
	if err != nil {
		return err
	}
	// message.max.bytes is 1048588 by default: a batch of one 1,000,000-byte record fits.
	// Uncompressed, as franz-go would snappy the x's down to nothing otherwise.
	cl, err := f.client(kgo.ProducerBatchMaxBytes(2_000_000), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	value := []byte(strings.Repeat("x", 1_000_000))
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).First()
	if err != nil {
		return err
	}
	if err := expectEqual(int64(0), r.Offset, "offset"); err != nil {
		return err
	}
	got, err := f.readUntil(ctx, topic, 1, atLeast(1))
	if err != nil {
		return err
	}
	return expectEqual(1_000_000, len(got[0].Value), "value length")
}

func (f *franz) recordTooLarge(ctx context.Context) error {
	topic, err := f.createTopic(ctx, "too-large", 1, nil)
	if err != nil {
		return err
	}
	// The client's own limit is raised so that the broker is the one to refuse.
	// Uncompressed, as franz-go would snappy the zeros down to nothing otherwise.
	cl, err := f.client(kgo.ProducerBatchMaxBytes(3_000_000), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: make([]byte, 1_100_000)}).First()
	if !errors.Is(err, kerr.MessageTooLarge) {
		return fmt.Errorf("want MESSAGE_TOO_LARGE, got %v", err)
	}
	// The producer goes on working after the refusal.
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("small")}).First()
	if err != nil {
		return fmt.Errorf("next record: %w", err)
	}
	return expectEqual(int64(0), r.Offset, "offset of the next record")
}

// assignments tracks what each member of a group owns, from franz-go's callbacks.
type assignments struct {
	mu    sync.Mutex
	owned []map[int32]bool
}

func (a *assignments) callbacks(member int) []kgo.Opt {
	update := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			a.mu.Lock()
			defer a.mu.Unlock()
			for _, ps := range m {
				for _, p := range ps {
					if add {
						a.owned[member][p] = true
					} else {
						delete(a.owned[member], p)
					}
				}
			}
		}
	}
	return []kgo.Opt{kgo.OnPartitionsAssigned(update(true)), kgo.OnPartitionsRevoked(update(false)), kgo.OnPartitionsLost(update(false))}
}

// settled says whether every member owns some partitions, none twice, all of them in all.
func (a *assignments) settled(partitions int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[int32]bool{}
	for _, m := range a.owned {
		if len(m) == 0 {
			return false
		}
		for p := range m {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == partitions
}

// group runs two members of a consumer group on a 4-partition topic until the partitions are
// split between them, then produces 10 records to each partition, has the members read all
// of them between them and commit, and checks the committed offsets and what DescribeGroups
// says of the group.
func (f *franz) group(ctx context.Context, protocol string, consumerProtocol bool, opts ...kgo.Opt) error {
	label := "classic-" + protocol
	if consumerProtocol {
		label = "consumer-" + protocol
	}
	topic, err := f.createTopic(ctx, "group-"+label, 4, nil)
	if err != nil {
		return err
	}
	group := f.name("group-" + label)
	a := &assignments{owned: []map[int32]bool{{}, {}}}
	var members []*kgo.Client
	var mu sync.Mutex
	seen := map[string]int{}
	pollErr := make(chan error, 2)
	pollCtx, stopPolling := context.WithCancel(ctx)
	var pollers sync.WaitGroup
	defer func() {
		stopPolling()
		pollers.Wait()
		for _, m := range members {
			m.Close()
		}
	}()
	for i := range 2 {
		memberOpts := append([]kgo.Opt{
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
			kgo.HeartbeatInterval(500 * time.Millisecond),
			kgo.FetchMaxWait(500 * time.Millisecond),
		}, opts...)
		m, err := f.client(append(memberOpts, a.callbacks(i)...)...)
		if err != nil {
			return err
		}
		members = append(members, m)
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			for pollCtx.Err() == nil {
				fs := m.PollFetches(pollCtx)
				for _, fe := range fs.Errors() {
					if pollCtx.Err() == nil {
						pollErr <- fmt.Errorf("member %d fetch: %w", i, fe.Err)
						return
					}
				}
				mu.Lock()
				for _, r := range fs.Records() {
					seen[string(r.Value)]++
				}
				mu.Unlock()
			}
		}()
	}
	for !a.settled(4) {
		select {
		case err := <-pollErr:
			return err
		case <-ctx.Done():
			return fmt.Errorf("the group never split the partitions between its members: %v", a.owned)
		case <-time.After(100 * time.Millisecond):
		}
	}
	producer, err := f.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer producer.Close()
	var rs []*kgo.Record
	for i := range 40 {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % 4), Value: []byte("g-" + strconv.Itoa(i))})
	}
	if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return err
	}
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == 40 {
			break
		}
		select {
		case err := <-pollErr:
			return err
		case <-ctx.Done():
			return fmt.Errorf("the members read %d of 40 records", n)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for i, m := range members {
		if err := m.CommitUncommittedOffsets(ctx); err != nil {
			return fmt.Errorf("member %d commit: %w", i, err)
		}
	}
	mu.Lock()
	for v, times := range seen {
		if times != 1 {
			mu.Unlock()
			return fmt.Errorf("record %s read %d times", v, times)
		}
	}
	mu.Unlock()

	adm, closeAdm, err := f.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	for p := range int32(4) {
		o, ok := offsets.Lookup(topic, p)
		if err := firstErr(expect(ok, "no committed offset for partition %d", p), expectEqual(int64(10), o.At, fmt.Sprintf("committed offset of partition %d", p))); err != nil {
			return err
		}
	}
	if consumerProtocol {
		described, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return err
		}
		d := described[group]
		return firstErr(d.Err, expectEqual("Stable", d.State, "group state"), expectEqual(protocol, d.AssignorName, "assignor"), expectEqual(2, len(d.Members), "members"))
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	d := described[group]
	return firstErr(d.Err, expectEqual("Stable", d.State, "group state"), expectEqual("consumer", d.ProtocolType, "protocol type"),
		expectEqual(protocol, d.Protocol, "protocol"), expectEqual(2, len(d.Members), "members"))
}

func (f *franz) describeCluster(ctx context.Context) error {
	adm, closeAdm, err := f.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	if err := firstErr(
		expect(meta.Cluster != "", "no cluster id"),
		expect(meta.Controller >= 0, "no controller: %d", meta.Controller),
		expectEqual(f.brokers, len(meta.Brokers), "brokers"),
	); err != nil {
		return err
	}
	for _, b := range meta.Brokers {
		if b.Host == "" || b.Port <= 0 {
			return fmt.Errorf("broker %d has no address", b.NodeID)
		}
	}
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		return err
	}
	for _, v := range versions {
		if v.Err != nil {
			return fmt.Errorf("ApiVersions of broker %d: %w", v.NodeID, v.Err)
		}
		for _, key := range []int16{0, 1, 3, 18, 19, 22, 32} {
			if _, _, ok := v.KeyVersions(key); !ok {
				return fmt.Errorf("broker %d lacks API key %d", v.NodeID, key)
			}
		}
	}
	return nil
}

func (f *franz) adminTopics(ctx context.Context) error {
	adm, closeAdm, err := f.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	a, b := f.name("topics-a"), f.name("topics-b")
	retention := "3600000"
	created, err := adm.CreateTopics(ctx, 2, f.rf, map[string]*string{"retention.ms": &retention}, a, b)
	if err != nil {
		return err
	}
	for _, t := range []string{a, b} {
		if err := firstErr(created[t].Err, expectEqual(int32(2), created[t].NumPartitions, "partitions of "+t)); err != nil {
			return err
		}
	}
	again, err := adm.CreateTopic(ctx, 2, f.rf, nil, a)
	if err == nil {
		err = again.Err
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating %s again: want TOPIC_ALREADY_EXISTS, got %v", a, err)
	}
	tooMany, err := adm.CreateTopic(ctx, 1, int16(f.brokers+1), nil, f.name("topics-rf"))
	if err == nil {
		err = tooMany.Err
	}
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		return fmt.Errorf("RF above the brokers: want INVALID_REPLICATION_FACTOR, got %v", err)
	}
	details, err := adm.ListTopics(ctx, a, b)
	if err != nil {
		return err
	}
	for _, t := range []string{a, b} {
		d := details[t]
		if err := firstErr(d.Err, expectEqual(2, len(d.Partitions), "partitions of "+t)); err != nil {
			return err
		}
		for _, p := range d.Partitions {
			if err := expectEqual(int(f.rf), len(p.Replicas), fmt.Sprintf("replicas of %s[%d]", t, p.Partition)); err != nil {
				return err
			}
		}
	}
	deleted, err := adm.DeleteTopics(ctx, a)
	if err != nil {
		return err
	}
	if err := deleted[a].Err; err != nil {
		return fmt.Errorf("delete %s: %w", a, err)
	}
	for {
		all, err := adm.ListTopics(ctx)
		if err == nil && !all.Has(a) && all.Has(b) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still listed after its deletion", a)
		case <-time.After(100 * time.Millisecond):
		}
	}
	missing, err := adm.DeleteTopics(ctx, f.name("topics-missing"))
	if err == nil {
		err = missing[f.name("topics-missing")].Err
	}
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("deleting a missing topic: want UNKNOWN_TOPIC_OR_PARTITION, got %v", err)
	}
	return nil
}

func (f *franz) createPartitions(ctx context.Context) error {
	topic, err := f.createTopic(ctx, "partitions", 1, nil)
	if err != nil {
		return err
	}
	adm, closeAdm, err := f.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	added, err := adm.CreatePartitions(ctx, 2, topic)
	if err != nil {
		return err
	}
	if err := added[topic].Err; err != nil {
		return fmt.Errorf("add 2 partitions: %w", err)
	}
	for {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil && len(details[topic].Partitions) == 3 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the topic never showed 3 partitions")
		case <-time.After(100 * time.Millisecond):
		}
	}
	fewer, err := adm.UpdatePartitions(ctx, 2, topic)
	if err == nil {
		err = fewer[topic].Err
	}
	if !errors.Is(err, kerr.InvalidPartitions) {
		return fmt.Errorf("shrinking to 2 partitions: want INVALID_PARTITIONS, got %v", err)
	}
	// The new partitions take records.
	cl, err := f.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 2, Value: []byte("p2")}).First()
	if err != nil {
		return fmt.Errorf("produce to the new partition: %w", err)
	}
	return expectEqual(int64(0), r.Offset, "offset in the new partition")
}

// configOf finds a config by name in a DescribeConfigs answer for one resource.
func configOf(rcs kadm.ResourceConfigs, key string) (kadm.Config, error) {
	if len(rcs) != 1 {
		return kadm.Config{}, fmt.Errorf("want one resource, got %d", len(rcs))
	}
	if rcs[0].Err != nil {
		return kadm.Config{}, rcs[0].Err
	}
	for _, c := range rcs[0].Configs {
		if c.Key == key {
			return c, nil
		}
	}
	return kadm.Config{}, fmt.Errorf("%s is not listed", key)
}

// alterErr is the error an AlterConfigs answer gives for one topic.
func alterErr(resps kadm.AlterConfigsResponses, topic string) error {
	r, err := resps.On(topic, nil)
	if err != nil {
		return err
	}
	if r.Err != nil {
		return fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
	}
	return nil
}

func (f *franz) configs(ctx context.Context) error {
	topic, err := f.createTopic(ctx, "configs", 1, nil)
	if err != nil {
		return err
	}
	adm, closeAdm, err := f.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	describe := func(key string) (kadm.Config, error) {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return kadm.Config{}, err
		}
		return configOf(rcs, key)
	}
	expectConfig := func(key, value string, source kmsg.ConfigSource, when string) error {
		return eventually(ctx, 15*time.Second, func() error {
			c, err := describe(key)
			if err != nil {
				return fmt.Errorf("%s: %w", when, err)
			}
			return firstErr(expectEqual(value, c.MaybeValue(), key+" "+when), expectEqual(source, c.Source, key+" source "+when))
		})
	}
	if err := expectConfig("retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig, "at first"); err != nil {
		return err
	}
	hour, compact := "3600000", "compact"
	// IncrementalAlterConfigs: set one config, the others stay.
	set, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &hour}}, topic)
	if err == nil {
		err = alterErr(set, topic)
	}
	if err != nil {
		return fmt.Errorf("incremental set: %w", err)
	}
	if err := expectConfig("retention.ms", hour, kmsg.ConfigSourceDynamicTopicConfig, "after an incremental set"); err != nil {
		return err
	}
	unknown, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "no.such.config", Value: &hour}}, topic)
	if err == nil {
		err = alterErr(unknown, topic)
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		return fmt.Errorf("setting an unknown config: want INVALID_CONFIG, got %v", err)
	}
	// AlterConfigs (the legacy request) replaces the whole set: retention.ms goes back to
	// its default.
	legacy, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: &compact}}, topic)
	if err == nil {
		err = alterErr(legacy, topic)
	}
	if err != nil {
		return fmt.Errorf("legacy alter: %w", err)
	}
	if err := firstErr(
		expectConfig("cleanup.policy", compact, kmsg.ConfigSourceDynamicTopicConfig, "after a legacy alter"),
		expectConfig("retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig, "after a legacy alter without it"),
	); err != nil {
		return err
	}
	del, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "cleanup.policy"}}, topic)
	if err == nil {
		err = alterErr(del, topic)
	}
	if err != nil {
		return fmt.Errorf("incremental delete: %w", err)
	}
	if err := expectConfig("cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig, "after an incremental delete"); err != nil {
		return err
	}
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, meta.Brokers[0].NodeID)
	if err != nil {
		return err
	}
	max, err := configOf(rcs, "message.max.bytes")
	if err != nil {
		return fmt.Errorf("broker configs: %w", err)
	}
	return expectEqual("1048588", max.MaybeValue(), "message.max.bytes of a broker")
}

func (f *franz) acls(ctx context.Context) error {
	adm, closeAdm, err := f.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	topic := f.name("acl-topic")
	principal := "User:" + f.name("alice")
	create := kadm.NewACLs().Allow(principal).AllowHosts("*").Topics(topic).
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead, kadm.OpDescribe)
	created, err := adm.CreateACLs(ctx, create)
	if err != nil {
		return err
	}
	if err := expectEqual(2, len(created), "ACLs created"); err != nil {
		return err
	}
	for _, c := range created {
		if c.Err != nil {
			return fmt.Errorf("create ACL: %w (%s)", c.Err, c.ErrMessage)
		}
	}
	filter := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow(principal).AllowHosts().Topics(topic).
			ResourcePatternType(kadm.ACLPatternMatch).Operations(kadm.OpAny)
	}
	describeCount := func() (int, error) {
		described, err := adm.DescribeACLs(ctx, filter())
		if err != nil {
			return 0, err
		}
		n := 0
		for _, d := range described {
			if d.Err != nil {
				return 0, d.Err
			}
			n += len(d.Described)
		}
		return n, nil
	}
	// Each broker's authorizer learns of ACL changes from the metadata a moment later.
	expectCount := func(want int, what string) error {
		return eventually(ctx, 15*time.Second, func() error {
			n, err := describeCount()
			return firstErr(err, expectEqual(want, n, what))
		})
	}
	if err := expectCount(2, "ACLs described"); err != nil {
		return err
	}
	deleted, err := adm.DeleteACLs(ctx, filter())
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	matched := 0
	for _, d := range deleted {
		if d.Err != nil {
			return d.Err
		}
		matched += len(d.Deleted)
	}
	if err := expectEqual(2, matched, "ACLs deleted"); err != nil {
		return err
	}
	return expectCount(0, "ACLs left")
}

func (f *franz) listOffsets(ctx context.Context) error {
	topic, err := f.createTopic(ctx, "list-offsets", 1, nil)
	if err != nil {
		return err
	}
	cl, err := f.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var rs []*kgo.Record
	for i := range 5 {
		// Timestamps 0, 10, 20, 40, 30 s after base: the largest is at offset 3.
		at := []int{0, 10, 20, 40, 30}[i]
		rs = append(rs, &kgo.Record{Topic: topic, Value: []byte("t" + strconv.Itoa(i)), Timestamp: base.Add(time.Duration(at) * time.Second)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	lookup := func(l kadm.ListedOffsets, err error) (kadm.ListedOffset, error) {
		if err != nil {
			return kadm.ListedOffset{}, err
		}
		o, ok := l.Lookup(topic, 0)
		if !ok {
			return o, fmt.Errorf("no answer for %s[0]", topic)
		}
		return o, o.Err
	}
	start, err := lookup(adm.ListStartOffsets(ctx, topic))
	if err != nil {
		return err
	}
	end, err := lookup(adm.ListEndOffsets(ctx, topic))
	if err != nil {
		return err
	}
	after, err := lookup(adm.ListOffsetsAfterMilli(ctx, base.Add(15*time.Second).UnixMilli(), topic))
	if err != nil {
		return err
	}
	maxTs, err := lookup(adm.ListMaxTimestampOffsets(ctx, topic))
	if err != nil {
		return err
	}
	future, err := lookup(adm.ListOffsetsAfterMilli(ctx, time.Now().Add(time.Hour).UnixMilli(), topic))
	if err != nil {
		return err
	}
	return firstErr(
		expectEqual(int64(0), start.Offset, "earliest"),
		expectEqual(int64(5), end.Offset, "latest"),
		expectEqual(int64(2), after.Offset, "first offset at or after base+15s"),
		expectEqual(int64(3), maxTs.Offset, "offset of the largest timestamp"),
		expectEqual(base.Add(40*time.Second).UnixMilli(), maxTs.Timestamp, "largest timestamp"),
		// Kafka answers a timestamp past every record with offset -1; kadm turns it into
		// the end offset.
		expectEqual(int64(5), future.Offset, "offset for a future timestamp"),
	)
}

func (f *franz) deleteRecords(ctx context.Context) error {
	topic, err := f.createTopic(ctx, "delete-records", 1, nil)
	if err != nil {
		return err
	}
	cl, err := f.client(kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, kgo.StringRecord("d"+strconv.Itoa(i)))
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	to := kadm.Offsets{}
	to.Add(kadm.Offset{Topic: topic, Partition: 0, At: 4})
	deleted, err := adm.DeleteRecords(ctx, to)
	if err != nil {
		return err
	}
	d, ok := deleted.Lookup(topic, 0)
	if err := firstErr(expect(ok, "no answer"), d.Err, expectEqual(int64(4), d.LowWatermark, "low watermark")); err != nil {
		return err
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return err
	}
	s, _ := starts.Lookup(topic, 0)
	if err := expectEqual(int64(4), s.Offset, "log start offset"); err != nil {
		return err
	}
	got, err := f.readUntil(ctx, topic, 1, atLeast(6))
	if err != nil {
		return err
	}
	if err := firstErr(expectEqual(int64(4), got[0].Offset, "first offset read"), expectEqual("d4", string(got[0].Value), "first record read")); err != nil {
		return err
	}
	beyond := kadm.Offsets{}
	beyond.Add(kadm.Offset{Topic: topic, Partition: 0, At: 11})
	deleted, err = adm.DeleteRecords(ctx, beyond)
	if err == nil {
		d, _ = deleted.Lookup(topic, 0)
		err = d.Err
	}
	if !errors.Is(err, kerr.OffsetOutOfRange) {
		return fmt.Errorf("deleting past the high watermark: want OFFSET_OUT_OF_RANGE, got %v", err)
	}
	return nil
}

func (f *franz) groupOffsets(ctx context.Context) error {
	topic, err := f.createTopic(ctx, "group-offsets", 3, nil)
	if err != nil {
		return err
	}
	adm, closeAdm, err := f.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	group := f.name("offsets-group")
	commit := kadm.Offsets{}
	for p := range int32(3) {
		commit.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(10 + p), LeaderEpoch: -1, Metadata: "m" + strconv.Itoa(int(p))})
	}
	committed, err := adm.CommitOffsets(ctx, group, commit)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	for p := range int32(3) {
		o, ok := fetched.Lookup(topic, p)
		if err := firstErr(expect(ok, "partition %d not fetched", p),
			expectEqual(int64(10+p), o.At, "offset"), expectEqual("m"+strconv.Itoa(int(p)), o.Metadata, "metadata")); err != nil {
			return err
		}
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	g, ok := listed[group]
	if err := firstErr(expect(ok, "group %s not listed", group), expectEqual("Empty", g.State, "state of a group with offsets only")); err != nil {
		return err
	}
	lag, err := adm.Lag(ctx, group)
	if err != nil {
		return err
	}
	groupLag := lag[group]
	if err := groupLag.Error(); err != nil {
		return fmt.Errorf("lag: %w", err)
	}
	gone, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}})
	if err == nil {
		err = gone.Error()
	}
	if err != nil {
		return fmt.Errorf("delete offsets: %w", err)
	}
	fetched, err = adm.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	if o, ok := fetched.Lookup(topic, 0); ok && o.At >= 0 {
		return fmt.Errorf("partition 0's offset is still %d after its deletion", o.At)
	}
	if o, _ := fetched.Lookup(topic, 1); o.At != 11 {
		return fmt.Errorf("partition 1's offset is %d after deleting partition 0's", o.At)
	}
	deletedGroup, err := adm.DeleteGroup(ctx, group)
	if err == nil {
		err = deletedGroup.Err
	}
	if err != nil {
		return fmt.Errorf("delete group: %w", err)
	}
	fetched, err = adm.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	n := 0
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			n++
		}
	})
	return expectEqual(0, n, "offsets left after deleting the group")
}
