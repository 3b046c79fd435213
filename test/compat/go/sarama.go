package main

// The sarama checks (github.com/IBM/sarama): SyncProducer and AsyncProducer, the partition
// consumer, ConsumerGroup, transactions and ClusterAdmin.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaVersion is the protocol generation sarama is told to speak; it picks request
// versions from it rather than from ApiVersions. 4.0 is the first without the old message
// formats, which Kafka 4 no longer accepts.
var saramaVersion = sarama.V4_0_0_0

func saramaChecks(e *env) []check {
	s := &saramaRun{env: e}
	cs := []check{
		{"produce-acks-0", func(ctx context.Context) error { return s.produceAcks(ctx, sarama.NoResponse, "0") }},
		{"produce-acks-1", func(ctx context.Context) error { return s.produceAcks(ctx, sarama.WaitForLocal, "1") }},
		{"produce-acks-all", func(ctx context.Context) error { return s.produceAcks(ctx, sarama.WaitForAll, "all") }},
		{"producer-idempotent", s.idempotent},
		{"transactions-commit-abort", s.transactions},
		{"transactions-send-offsets", s.transactionalOffsets},
		{"headers", s.headers},
	}
	for _, codec := range []sarama.CompressionCodec{sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4, sarama.CompressionZSTD} {
		cs = append(cs, check{"compression-" + codec.String(), func(ctx context.Context) error { return s.compression(ctx, codec) }})
	}
	cs = append(cs,
		check{"record-near-message-max-bytes", s.recordNearMax},
		check{"record-too-large", s.recordTooLarge},
	)
	for _, b := range []sarama.BalanceStrategy{
		sarama.NewBalanceStrategyRange(), sarama.NewBalanceStrategyRoundRobin(), sarama.NewBalanceStrategySticky(),
	} {
		cs = append(cs, check{"consumer-group-" + b.Name(), func(ctx context.Context) error { return s.group(ctx, b) }})
	}
	cs = append(cs,
		check{"admin-describe-cluster", s.describeCluster},
		check{"admin-topics", s.adminTopics},
		check{"admin-create-partitions", s.createPartitions},
		check{"admin-configs", s.configs},
		check{"admin-acls", s.acls},
		check{"admin-delete-records", s.deleteRecords},
		check{"admin-consumer-groups", s.adminGroups},
	)
	return cs
}

type saramaRun struct {
	*env
}

func saramaSetup(_ context.Context, e *env) error {
	if os.Getenv("GOCONF_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags)
	}
	adm, err := sarama.NewClusterAdmin(e.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	brokers, _, err := adm.DescribeCluster()
	if err != nil {
		return err
	}
	e.brokers = len(brokers)
	e.rf = int16(min(3, e.brokers))
	return nil
}

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = saramaVersion
	c.ClientID = "goconf-sarama"
	c.Net.DialTimeout = 10 * time.Second
	c.Metadata.Retry.Max = 20
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	c.Producer.Return.Successes = true
	// acks=all unless a check says otherwise: with acks=1 the high watermark may trail the
	// answer, and DeleteRecords or a read right after it may not see the records yet.
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Retry.Max = 10
	c.Producer.Retry.Backoff = 200 * time.Millisecond
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.MaxWaitTime = 250 * time.Millisecond
	c.Admin.Timeout = 15 * time.Second
	return c
}

// createTopic creates a topic with sarama's admin and waits until the leader of each
// partition answers ListOffsets for it.
func (s *saramaRun) createTopic(ctx context.Context, what string, partitions int32, configs map[string]*string) (string, error) {
	topic := s.name(what)
	adm, err := sarama.NewClusterAdmin(s.seeds, saramaConfig())
	if err != nil {
		return "", err
	}
	defer adm.Close()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: s.rf, ConfigEntries: configs}, false); err != nil {
		return "", fmt.Errorf("create %s: %w", topic, err)
	}
	cl, err := sarama.NewClient(s.seeds, saramaConfig())
	if err != nil {
		return "", err
	}
	defer cl.Close()
	for p := range partitions {
		for {
			_ = cl.RefreshMetadata(topic)
			if _, err := cl.GetOffset(topic, p, sarama.OffsetNewest); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("%s[%d] has no leader", topic, p)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return topic, nil
}

// read consumes partitions of topic from the oldest offset until it has n records in all,
// in partition and offset order.
func (s *saramaRun) read(ctx context.Context, topic string, partitions int32, n int, configure func(*sarama.Config)) ([]*sarama.ConsumerMessage, error) {
	c := saramaConfig()
	if configure != nil {
		configure(c)
	}
	consumer, err := sarama.NewConsumer(s.seeds, c)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	msgs := make(chan *sarama.ConsumerMessage, n+16)
	errs := make(chan error, partitions)
	for p := range partitions {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("consume %s[%d]: %w", topic, p, err)
		}
		defer pc.AsyncClose()
		go func() {
			for m := range pc.Messages() {
				msgs <- m
			}
		}()
		go func() {
			for e := range pc.Errors() {
				errs <- e
			}
		}()
	}
	var got []*sarama.ConsumerMessage
	for len(got) < n {
		select {
		case m := <-msgs:
			got = append(got, m)
		case err := <-errs:
			return got, err
		case <-ctx.Done():
			return got, fmt.Errorf("read %d of %d records of %s before the deadline", len(got), n, topic)
		}
	}
	slices.SortStableFunc(got, func(a, b *sarama.ConsumerMessage) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return got, nil
}

func messageValues(ms []*sarama.ConsumerMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Value)
	}
	return out
}

func (s *saramaRun) produceAcks(ctx context.Context, acks sarama.RequiredAcks, label string) error {
	topic, err := s.createTopic(ctx, "acks-"+label, 2, nil)
	if err != nil {
		return err
	}
	c := saramaConfig()
	c.Producer.RequiredAcks = acks
	p, err := sarama.NewSyncProducer(s.seeds, c)
	if err != nil {
		return err
	}
	defer p.Close()
	var msgs []*sarama.ProducerMessage
	want := [2][]string{}
	for i := range 40 {
		v := fmt.Sprintf("acks%s-%d", label, i)
		want[i%2] = append(want[i%2], v)
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: int32(i % 2), Key: sarama.StringEncoder("k" + strconv.Itoa(i)), Value: sarama.StringEncoder(v)})
	}
	if err := p.SendMessages(msgs); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if acks != sarama.NoResponse {
		next := [2]int64{}
		for i, m := range msgs {
			if err := expectEqual(next[m.Partition], m.Offset, "offset of record "+strconv.Itoa(i)); err != nil {
				return err
			}
			next[m.Partition]++
		}
	}
	got, err := s.read(ctx, topic, 2, 40, nil)
	if err != nil {
		return err
	}
	return equalStrings(append(want[0], want[1]...), messageValues(got), "values in partition and offset order")
}

func (s *saramaRun) idempotent(ctx context.Context) error {
	topic, err := s.createTopic(ctx, "idempotent", 3, nil)
	if err != nil {
		return err
	}
	c := saramaConfig()
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Flush.Messages = 20
	p, err := sarama.NewAsyncProducer(s.seeds, c)
	if err != nil {
		return err
	}
	const n = 600
	go func() {
		for i := range n {
			p.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: int32(i % 3), Value: sarama.StringEncoder(fmt.Sprintf("%04d", i))}
		}
	}()
	next := [3]int64{}
	for range n {
		select {
		case m := <-p.Successes():
			if err := expectEqual(next[m.Partition], m.Offset, fmt.Sprintf("offset in partition %d", m.Partition)); err != nil {
				p.Close()
				return err
			}
			next[m.Partition]++
		case e := <-p.Errors():
			p.Close()
			return fmt.Errorf("produce: %w", e.Err)
		case <-ctx.Done():
			p.Close()
			return fmt.Errorf("produced %v records before the deadline", next)
		}
	}
	if err := p.Close(); err != nil {
		return err
	}
	got, err := s.read(ctx, topic, 3, n, nil)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, m := range got {
		if seen[string(m.Value)] {
			return fmt.Errorf("record %s stored twice", m.Value)
		}
		seen[string(m.Value)] = true
	}
	return nil
}

func transactionalConfig(id string) *sarama.Config {
	c := saramaConfig()
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Transaction.ID = id
	c.Producer.Transaction.Timeout = 30 * time.Second
	c.Net.MaxOpenRequests = 1
	return c
}

// sendTxn produces values in one transaction of p and commits or aborts it.
func sendTxn(p sarama.AsyncProducer, topic string, values []string, commit bool) error {
	if err := p.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for _, v := range values {
		p.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(v)}
	}
	for range values {
		select {
		case <-p.Successes():
		case e := <-p.Errors():
			return fmt.Errorf("produce: %w", e.Err)
		}
	}
	if commit {
		return p.CommitTxn()
	}
	return p.AbortTxn()
}

func labelled(label string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", label, i))
	}
	return out
}

func (s *saramaRun) transactions(ctx context.Context) error {
	topic, err := s.createTopic(ctx, "txn", 1, nil)
	if err != nil {
		return err
	}
	p, err := sarama.NewAsyncProducer(s.seeds, transactionalConfig(s.name("txn-id")))
	if err != nil {
		return err
	}
	defer p.Close()
	if err := firstErr(
		sendTxn(p, topic, labelled("c", 10), true),
		sendTxn(p, topic, labelled("a", 10), false),
		sendTxn(p, topic, []string{"end"}, true),
	); err != nil {
		return err
	}
	committed, err := s.read(ctx, topic, 1, 11, func(c *sarama.Config) { c.Consumer.IsolationLevel = sarama.ReadCommitted })
	if err != nil {
		return err
	}
	if err := firstErr(
		equalStrings(append(labelled("c", 10), "end"), messageValues(committed), "read_committed"),
		expectEqual(int64(22), committed[10].Offset, "offset of end (after two markers and 10 aborted)"),
	); err != nil {
		return err
	}
	all, err := s.read(ctx, topic, 1, 21, nil)
	if err != nil {
		return err
	}
	return equalStrings(append(append(labelled("c", 10), labelled("a", 10)...), "end"), messageValues(all), "read_uncommitted")
}

// transactionalOffsets commits a group's offsets in a transaction (AddOffsetsToTxn and
// TxnOffsetCommit): they appear once it commits, and not when it aborts.
func (s *saramaRun) transactionalOffsets(ctx context.Context) error {
	topic, err := s.createTopic(ctx, "txn-offsets", 1, nil)
	if err != nil {
		return err
	}
	group := s.name("txn-offsets-group")
	p, err := sarama.NewAsyncProducer(s.seeds, transactionalConfig(s.name("txn-offsets-id")))
	if err != nil {
		return err
	}
	defer p.Close()
	adm, err := sarama.NewClusterAdmin(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	committedOffset := func() (int64, error) {
		resp, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
		if err != nil {
			return 0, err
		}
		b := resp.GetBlock(topic, 0)
		if b == nil {
			return -1, nil
		}
		return b.Offset, nil
	}
	withOffset := func(offset int64, commit bool) error {
		if err := p.BeginTxn(); err != nil {
			return err
		}
		p.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder("o" + strconv.FormatInt(offset, 10))}
		select {
		case <-p.Successes():
		case e := <-p.Errors():
			return e.Err
		}
		offsets := map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 0, Offset: offset}}}
		if err := p.AddOffsetsToTxn(offsets, group); err != nil {
			return fmt.Errorf("add offsets: %w", err)
		}
		if commit {
			return p.CommitTxn()
		}
		return p.AbortTxn()
	}
	if err := withOffset(5, true); err != nil {
		return err
	}
	// The coordinator writes the commit markers after EndTxn has answered, and the offset
	// is pending until its marker is written.
	for {
		got, err := committedOffset()
		if err != nil {
			return err
		}
		if got == 5 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("offset committed in the transaction: want 5, got %d", got)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := withOffset(9, false); err != nil {
		return err
	}
	// The abort's markers too are written after EndTxn answers: once the last stable offset
	// has passed them (two records, two markers), the aborted offset is settled.
	if err := s.awaitStableOffset(ctx, topic, 4); err != nil {
		return err
	}
	got, err := committedOffset()
	return firstErr(err, expectEqual(int64(5), got, "offset after an aborted transaction"))
}

// awaitStableOffset waits until ListOffsets(latest, read_committed) of partition 0 is want.
func (s *saramaRun) awaitStableOffset(ctx context.Context, topic string, want int64) error {
	cl, err := sarama.NewClient(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer cl.Close()
	last := int64(-1)
	for {
		leader, err := cl.Leader(topic, 0)
		if err != nil {
			return err
		}
		req := sarama.NewOffsetRequest(saramaVersion)
		req.IsolationLevel = sarama.ReadCommitted
		req.AddBlock(topic, 0, sarama.OffsetNewest, 1)
		resp, err := leader.GetAvailableOffsets(req)
		if err != nil {
			return err
		}
		if b := resp.GetBlock(topic, 0); b != nil {
			if b.Err != sarama.ErrNoError {
				return b.Err
			}
			last = b.Offset
			if last == want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("last stable offset: want %d, got %d", want, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *saramaRun) headers(ctx context.Context) error {
	topic, err := s.createTopic(ctx, "headers", 1, nil)
	if err != nil {
		return err
	}
	p, err := sarama.NewSyncProducer(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer p.Close()
	hs := []sarama.RecordHeader{
		{Key: []byte("trace"), Value: []byte("abc")},
		{Key: []byte("dup"), Value: []byte("1")},
		{Key: []byte("dup"), Value: []byte("2")},
		{Key: []byte("empty"), Value: []byte{}},
		{Key: []byte("binary"), Value: []byte{0, 1, 2, 255}},
	}
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("v"), Headers: hs}); err != nil {
		return err
	}
	got, err := s.read(ctx, topic, 1, 1, nil)
	if err != nil {
		return err
	}
	gh := got[0].Headers
	if err := expectEqual(len(hs), len(gh), "header count"); err != nil {
		return err
	}
	for i := range hs {
		if string(hs[i].Key) != string(gh[i].Key) || string(hs[i].Value) != string(gh[i].Value) {
			return fmt.Errorf("header %d: want %s=%q, got %s=%q", i, hs[i].Key, hs[i].Value, gh[i].Key, gh[i].Value)
		}
	}
	return nil
}

func (s *saramaRun) compression(ctx context.Context, codec sarama.CompressionCodec) error {
	topic, err := s.createTopic(ctx, "compression-"+codec.String(), 1, nil)
	if err != nil {
		return err
	}
	c := saramaConfig()
	c.Producer.Compression = codec
	c.Producer.Flush.Frequency = 20 * time.Millisecond
	p, err := sarama.NewSyncProducer(s.seeds, c)
	if err != nil {
		return err
	}
	defer p.Close()
	var want []string
	var msgs []*sarama.ProducerMessage
	for i := range 200 {
		v := codec.String() + "-" + strconv.Itoa(i)
		if i%50 == 0 {
			v = strings.Repeat(codec.String()+" compressible ", 500)
		}
		want = append(want, v)
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k" + strconv.Itoa(i%7)), Value: sarama.StringEncoder(v)})
	}
	if err := p.SendMessages(msgs); err != nil {
		return err
	}
	got, err := s.read(ctx, topic, 1, len(want), nil)
	if err != nil {
		return err
	}
	return equalStrings(want, messageValues(got), "values")
}

func (s *saramaRun) recordNearMax(ctx context.Context) error {
	topic, err := s.createTopic(ctx, "near-max", 1, nil)
	if err != nil {
		return err
	}
	c := saramaConfig()
	// message.max.bytes is 1048588 by default: a batch of one 1,000,000-byte record fits.
	c.Producer.MaxMessageBytes = 2_000_000
	p, err := sarama.NewSyncProducer(s.seeds, c)
	if err != nil {
		return err
	}
	defer p.Close()
	_, offset, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(strings.Repeat("x", 1_000_000))})
	if err := firstErr(err, expectEqual(int64(0), offset, "offset")); err != nil {
		return err
	}
	got, err := s.read(ctx, topic, 1, 1, nil)
	if err != nil {
		return err
	}
	return expectEqual(1_000_000, len(got[0].Value), "value length")
}

func (s *saramaRun) recordTooLarge(ctx context.Context) error {
	topic, err := s.createTopic(ctx, "too-large", 1, nil)
	if err != nil {
		return err
	}
	c := saramaConfig()
	// The client's own limit is raised so that the broker is the one to refuse.
	c.Producer.MaxMessageBytes = 3_000_000
	c.Producer.Retry.Max = 0
	p, err := sarama.NewSyncProducer(s.seeds, c)
	if err != nil {
		return err
	}
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(make([]byte, 1_100_000))})
	if !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
		return fmt.Errorf("want MESSAGE_TOO_LARGE, got %v", err)
	}
	_, offset, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("small")})
	return firstErr(err, expectEqual(int64(0), offset, "offset of the next record"))
}

// groupHandler is one member of a sarama consumer group: it records what it is given and
// what it reads, and marks each record consumed.
type groupHandler struct {
	// mu and seen are shared by the members of one group.
	mu    *sync.Mutex
	seen  map[string]int
	owned map[int32]bool
}

func (h *groupHandler) Setup(sess sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.owned = map[int32]bool{}
	for _, ps := range sess.Claims() {
		for _, p := range ps {
			h.owned[p] = true
		}
	}
	return nil
}

func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.owned = map[int32]bool{}
	return nil
}

func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		h.seen[string(m.Value)]++
		h.mu.Unlock()
		sess.MarkMessage(m, "")
		// Auto-commit is off: commit each record as it is read, synchronously.
		sess.Commit()
	}
	return nil
}

// group runs two members of a consumer group on a 4-partition topic until the partitions
// are split between them, produces 10 records to each partition, has the members read all of
// them and commit, then checks the committed offsets and what DescribeGroups says.
func (s *saramaRun) group(ctx context.Context, strategy sarama.BalanceStrategy) error {
	topic, err := s.createTopic(ctx, "group-"+strategy.Name(), 4, nil)
	if err != nil {
		return err
	}
	group := s.name("group-" + strategy.Name())
	seen := map[string]int{}
	mu := &sync.Mutex{}
	handlers := []*groupHandler{}
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	var groups []sarama.ConsumerGroup
	defer func() {
		stop()
		for _, g := range groups {
			g.Close()
		}
		running.Wait()
	}()
	errs := make(chan error, 8)
	for i := range 2 {
		c := saramaConfig()
		c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
		c.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
		c.Consumer.Offsets.AutoCommit.Enable = false
		g, err := sarama.NewConsumerGroup(s.seeds, group, c)
		if err != nil {
			return err
		}
		groups = append(groups, g)
		h := &groupHandler{mu: mu, seen: seen, owned: map[int32]bool{}}
		handlers = append(handlers, h)
		running.Add(2)
		go func() {
			defer running.Done()
			for runCtx.Err() == nil {
				if err := g.Consume(runCtx, []string{topic}, h); err != nil && runCtx.Err() == nil {
					errs <- fmt.Errorf("member %d: %w", i, err)
					return
				}
			}
		}()
		go func() {
			defer running.Done()
			for e := range g.Errors() {
				if runCtx.Err() == nil {
					errs <- fmt.Errorf("member %d: %w", i, e)
				}
			}
		}()
	}
	settled := func() bool {
		mu.Lock()
		defer mu.Unlock()
		owned := map[int32]bool{}
		for _, h := range handlers {
			if len(h.owned) == 0 {
				return false
			}
			for p := range h.owned {
				if owned[p] {
					return false
				}
				owned[p] = true
			}
		}
		return len(owned) == 4
	}
	for !settled() {
		select {
		case err := <-errs:
			return err
		case <-ctx.Done():
			return fmt.Errorf("the group never split the partitions between its members")
		case <-time.After(100 * time.Millisecond):
		}
	}
	p, err := sarama.NewSyncProducer(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer p.Close()
	var msgs []*sarama.ProducerMessage
	for i := range 40 {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: int32(i % 4), Value: sarama.StringEncoder("g-" + strconv.Itoa(i))})
	}
	if err := p.SendMessages(msgs); err != nil {
		return err
	}
	count := func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		for v, times := range seen {
			if times != 1 {
				return 0, fmt.Errorf("record %s read %d times", v, times)
			}
		}
		return len(seen), nil
	}
	for {
		n, err := count()
		if err != nil {
			return err
		}
		if n == 40 {
			break
		}
		select {
		case err := <-errs:
			return err
		case <-ctx.Done():
			return fmt.Errorf("the members read %d of 40 records", n)
		case <-time.After(50 * time.Millisecond):
		}
	}
	adm, err := sarama.NewClusterAdmin(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	described, err := adm.DescribeConsumerGroups([]string{group})
	if err != nil {
		return err
	}
	d := described[0]
	if err := firstErr(expectEqual(sarama.ErrNoError, d.Err, "describe error"), expectEqual("Stable", d.State, "group state"),
		expectEqual("consumer", d.ProtocolType, "protocol type"), expectEqual(strategy.Name(), d.Protocol, "protocol"),
		expectEqual(2, len(d.Members), "members")); err != nil {
		return err
	}
	stop()
	for _, g := range groups {
		if err := g.Close(); err != nil {
			return fmt.Errorf("close: %w", err)
		}
	}
	groups = nil
	resp, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2, 3}})
	if err != nil {
		return err
	}
	for p := range int32(4) {
		b := resp.GetBlock(topic, p)
		if b == nil {
			return fmt.Errorf("no committed offset for partition %d", p)
		}
		if err := expectEqual(int64(10), b.Offset, fmt.Sprintf("committed offset of partition %d", p)); err != nil {
			return err
		}
	}
	return nil
}

func (s *saramaRun) describeCluster(_ context.Context) error {
	adm, err := sarama.NewClusterAdmin(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	brokers, controller, err := adm.DescribeCluster()
	if err != nil {
		return err
	}
	if err := firstErr(expectEqual(s.brokers, len(brokers), "brokers"), expect(controller >= 0, "no controller: %d", controller)); err != nil {
		return err
	}
	dirs, err := adm.DescribeLogDirs([]int32{brokers[0].ID()})
	if err != nil {
		return err
	}
	return expect(len(dirs[brokers[0].ID()]) > 0, "broker %d lists no log dirs", brokers[0].ID())
}

func (s *saramaRun) adminTopics(ctx context.Context) error {
	adm, err := sarama.NewClusterAdmin(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	topic := s.name("topics-a")
	retention := "3600000"
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: s.rf, ConfigEntries: map[string]*string{"retention.ms": &retention}}, false); err != nil {
		return err
	}
	err = adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: s.rf}, false)
	if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("creating %s again: want TOPIC_ALREADY_EXISTS, got %v", topic, err)
	}
	err = adm.CreateTopic(s.name("topics-rf"), &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: int16(s.brokers + 1)}, false)
	if !errors.Is(err, sarama.ErrInvalidReplicationFactor) {
		return fmt.Errorf("RF above the brokers: want INVALID_REPLICATION_FACTOR, got %v", err)
	}
	if err := adm.CreateTopic(s.name("topics-validate"), &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: s.rf}, true); err != nil {
		return fmt.Errorf("validate-only create: %w", err)
	}
	var metas []*sarama.TopicMetadata
	for {
		metas, err = adm.DescribeTopics([]string{topic})
		if err == nil && len(metas) == 1 && metas[0].Err == sarama.ErrNoError {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("describe %s: %v", topic, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := expectEqual(2, len(metas[0].Partitions), "partitions"); err != nil {
		return err
	}
	for _, p := range metas[0].Partitions {
		if err := expectEqual(int(s.rf), len(p.Replicas), "replicas"); err != nil {
			return err
		}
	}
	if err := adm.DeleteTopic(topic); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	for {
		topics, err := adm.ListTopics()
		_, listed := topics[topic]
		_, validated := topics[s.name("topics-validate")]
		if validated {
			return fmt.Errorf("a validate-only create made the topic")
		}
		if err == nil && !listed {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still listed after its deletion", topic)
		case <-time.After(100 * time.Millisecond):
		}
	}
	err = adm.DeleteTopic(s.name("topics-missing"))
	if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return fmt.Errorf("deleting a missing topic: want UNKNOWN_TOPIC_OR_PARTITION, got %v", err)
	}
	return nil
}

func (s *saramaRun) createPartitions(ctx context.Context) error {
	topic, err := s.createTopic(ctx, "partitions", 1, nil)
	if err != nil {
		return err
	}
	adm, err := sarama.NewClusterAdmin(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	if err := adm.CreatePartitions(topic, 3, nil, false); err != nil {
		return fmt.Errorf("grow to 3: %w", err)
	}
	err = adm.CreatePartitions(topic, 2, nil, false)
	if !errors.Is(err, sarama.ErrInvalidPartitions) {
		return fmt.Errorf("shrinking to 2 partitions: want INVALID_PARTITIONS, got %v", err)
	}
	for {
		metas, err := adm.DescribeTopics([]string{topic})
		if err == nil && len(metas) == 1 && len(metas[0].Partitions) == 3 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the topic never showed 3 partitions")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *saramaRun) configs(ctx context.Context) error {
	topic, err := s.createTopic(ctx, "configs", 1, nil)
	if err != nil {
		return err
	}
	adm, err := sarama.NewClusterAdmin(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	expectConfig := func(name, value string, source sarama.ConfigSource, when string) error {
		return eventually(ctx, 15*time.Second, func() error {
			entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{name}})
			if err != nil {
				return fmt.Errorf("describe %s: %w", when, err)
			}
			if len(entries) != 1 {
				return fmt.Errorf("%s: %d entries for %s", when, len(entries), name)
			}
			return firstErr(expectEqual(value, entries[0].Value, name+" "+when), expectEqual(source, entries[0].Source, name+" source "+when))
		})
	}
	if err := expectConfig("retention.ms", "604800000", sarama.SourceDefault, "at first"); err != nil {
		return err
	}
	hour := "3600000"
	if err := adm.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &hour},
	}, false); err != nil {
		return fmt.Errorf("incremental set: %w", err)
	}
	if err := expectConfig("retention.ms", hour, sarama.SourceTopic, "after an incremental set"); err != nil {
		return err
	}
	compact := "compact"
	if err := adm.AlterConfig(sarama.TopicResource, topic, map[string]*string{"cleanup.policy": &compact}, false); err != nil {
		return fmt.Errorf("legacy alter: %w", err)
	}
	if err := firstErr(
		expectConfig("cleanup.policy", compact, sarama.SourceTopic, "after a legacy alter"),
		expectConfig("retention.ms", "604800000", sarama.SourceDefault, "after a legacy alter without it"),
	); err != nil {
		return err
	}
	err = adm.AlterConfig(sarama.TopicResource, topic, map[string]*string{"cleanup.policy": &hour}, false)
	if !errors.Is(err, sarama.ErrInvalidConfig) {
		return fmt.Errorf("an invalid cleanup.policy: want INVALID_CONFIG, got %v", err)
	}
	brokers, _, err := adm.DescribeCluster()
	if err != nil {
		return err
	}
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: strconv.Itoa(int(brokers[0].ID())), ConfigNames: []string{"message.max.bytes"}})
	if err != nil {
		return fmt.Errorf("broker configs: %w", err)
	}
	if len(entries) != 1 {
		return fmt.Errorf("broker configs: %d entries for message.max.bytes", len(entries))
	}
	return expectEqual("1048588", entries[0].Value, "message.max.bytes of a broker")
}

func (s *saramaRun) acls(ctx context.Context) error {
	adm, err := sarama.NewClusterAdmin(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	topic := s.name("acl-topic")
	principal := "User:" + s.name("bob")
	resource := sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: topic, ResourcePatternType: sarama.AclPatternLiteral}
	for _, op := range []sarama.AclOperation{sarama.AclOperationRead, sarama.AclOperationWrite} {
		if err := adm.CreateACL(resource, sarama.Acl{Principal: principal, Host: "*", Operation: op, PermissionType: sarama.AclPermissionAllow}); err != nil {
			return fmt.Errorf("create: %w", err)
		}
	}
	filter := sarama.AclFilter{
		ResourceType: sarama.AclResourceTopic, ResourceName: &topic, ResourcePatternTypeFilter: sarama.AclPatternMatch,
		Principal: &principal, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny,
	}
	// Each broker's authorizer learns of ACL changes from the metadata a moment later.
	expectCount := func(want int, what string) error {
		return eventually(ctx, 15*time.Second, func() error {
			listed, err := adm.ListAcls(filter)
			if err != nil {
				return fmt.Errorf("list: %w", err)
			}
			n := 0
			for _, r := range listed {
				n += len(r.Acls)
			}
			return expectEqual(want, n, what)
		})
	}
	if err := expectCount(2, "ACLs listed"); err != nil {
		return err
	}
	deleted, err := adm.DeleteACL(filter, false)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if err := expectEqual(2, len(deleted), "ACLs deleted"); err != nil {
		return err
	}
	return expectCount(0, "ACLs left")
}

func (s *saramaRun) deleteRecords(ctx context.Context) error {
	topic, err := s.createTopic(ctx, "delete-records", 1, nil)
	if err != nil {
		return err
	}
	p, err := sarama.NewSyncProducer(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer p.Close()
	var msgs []*sarama.ProducerMessage
	for i := range 10 {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("d" + strconv.Itoa(i))})
	}
	if err := p.SendMessages(msgs); err != nil {
		return err
	}
	adm, err := sarama.NewClusterAdmin(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	if err := adm.DeleteRecords(topic, map[int32]int64{0: 4}); err != nil {
		return fmt.Errorf("delete to 4: %w", err)
	}
	cl, err := sarama.NewClient(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer cl.Close()
	oldest, err := cl.GetOffset(topic, 0, sarama.OffsetOldest)
	if err := firstErr(err, expectEqual(int64(4), oldest, "log start offset")); err != nil {
		return err
	}
	got, err := s.read(ctx, topic, 1, 6, nil)
	if err := firstErr(err, expectEqual(int64(4), got[0].Offset, "first offset read")); err != nil {
		return err
	}
	err = adm.DeleteRecords(topic, map[int32]int64{0: 11})
	if !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		return fmt.Errorf("deleting past the high watermark: want OFFSET_OUT_OF_RANGE, got %v", err)
	}
	return nil
}

func (s *saramaRun) adminGroups(ctx context.Context) error {
	topic, err := s.createTopic(ctx, "admin-groups", 2, nil)
	if err != nil {
		return err
	}
	group := s.name("admin-group")
	adm, err := sarama.NewClusterAdmin(s.seeds, saramaConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	resp, err := adm.AlterConsumerGroupOffsets(group, map[string]map[int32]sarama.OffsetAndMetadata{
		topic: {0: {Offset: 3, Metadata: "m0"}, 1: {Offset: 7, Metadata: "m1"}},
	}, nil)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, ps := range resp.Errors {
		for p, kerr := range ps {
			if kerr != sarama.ErrNoError {
				return fmt.Errorf("commit partition %d: %w", p, kerr)
			}
		}
	}
	fetched, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1}})
	if err != nil {
		return err
	}
	b0, b1 := fetched.GetBlock(topic, 0), fetched.GetBlock(topic, 1)
	if err := firstErr(expect(b0 != nil && b1 != nil, "offsets not fetched"), expectEqual(int64(3), b0.Offset, "offset 0"),
		expectEqual("m0", b0.Metadata, "metadata 0"), expectEqual(int64(7), b1.Offset, "offset 1")); err != nil {
		return err
	}
	groups, err := adm.ListConsumerGroups()
	if err != nil {
		return err
	}
	if _, ok := groups[group]; !ok {
		return fmt.Errorf("group %s not listed", group)
	}
	described, err := adm.DescribeConsumerGroups([]string{group})
	if err != nil {
		return err
	}
	if err := firstErr(expectEqual(sarama.ErrNoError, described[0].Err, "describe"), expectEqual("Empty", described[0].State, "state")); err != nil {
		return err
	}
	if err := adm.DeleteConsumerGroupOffset(group, topic, 0); err != nil {
		return fmt.Errorf("delete offset: %w", err)
	}
	fetched, err = adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1}})
	if err != nil {
		return err
	}
	if err := firstErr(expectEqual(int64(-1), fetched.GetBlock(topic, 0).Offset, "offset 0 after its deletion"),
		expectEqual(int64(7), fetched.GetBlock(topic, 1).Offset, "offset 1 after deleting offset 0")); err != nil {
		return err
	}
	if err := adm.DeleteConsumerGroup(group); err != nil {
		return fmt.Errorf("delete group: %w", err)
	}
	err = adm.DeleteConsumerGroup(group)
	if !errors.Is(err, sarama.ErrGroupIDNotFound) {
		return fmt.Errorf("deleting it again: want GROUP_ID_NOT_FOUND, got %v", err)
	}
	return nil
}
