// NATS JetStream peer of rdkafka-perf.c for bench:report: publishes COUNT messages of SIZE
// bytes to a file-backed stream of REPLICAS replicas, every publish acknowledged by the
// stream (JetStream's acks=all), at RATE messages/s (0: as fast as MAXPENDING allows).
//
//	nats-perf URL STREAM COUNT SIZE REPLICAS RATE [MAXPENDING]
//
// Prints one JSON line with the same fields as rdkafka-perf. Built by bench/report.bench.ts
// with Debian's golang-github-nats-io-go-nats-dev (GOPATH=/usr/share/gocode, no modules).
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[int(p/100*float64(len(sorted)-1))].Microseconds()) / 1000
}

func main() {
	if len(os.Args) < 7 {
		fail("usage: nats-perf URL STREAM COUNT SIZE REPLICAS RATE [MAXPENDING]")
	}
	url, stream := os.Args[1], os.Args[2]
	count, _ := strconv.Atoi(os.Args[3])
	size, _ := strconv.Atoi(os.Args[4])
	replicas, _ := strconv.Atoi(os.Args[5])
	rate, _ := strconv.Atoi(os.Args[6])
	maxPending := 4096
	if len(os.Args) > 7 {
		maxPending, _ = strconv.Atoi(os.Args[7])
	}
	nc, err := nats.Connect(url)
	if err != nil {
		fail("connect: %v", err)
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(maxPending))
	if err != nil {
		fail("jetstream: %v", err)
	}
	subject := stream + ".data"
	// A cluster just started elects its meta leader first: retry the stream's creation.
	for attempt := 0; ; attempt++ {
		if _, err = js.StreamInfo(stream); err == nil {
			break
		}
		_, err = js.AddStream(&nats.StreamConfig{
			Name: stream, Subjects: []string{subject}, Replicas: replicas, Storage: nats.FileStorage,
		})
		if err == nil {
			break
		}
		if attempt >= 100 {
			fail("add stream: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('a' + (i*7+i/13)%26)
	}
	// Warm up, as rdkafka-perf does: connections and the stream leader settle first.
	for i := 0; i < 100; i++ {
		if _, err := js.Publish(subject, payload); err != nil {
			fail("warm-up publish: %v", err)
		}
	}
	latencies := make([]time.Duration, 0, count)
	done := make(chan time.Duration, maxPending)
	failed := 0
	collected := 0
	collect := func(block bool) {
		for collected < count {
			if block {
				latencies = append(latencies, <-done)
			} else {
				select {
				case d := <-done:
					latencies = append(latencies, d)
				default:
					return
				}
			}
			collected++
		}
	}
	start := time.Now()
	for i := 0; i < count; i++ {
		if rate > 0 {
			due := start.Add(time.Duration(float64(i) * float64(time.Second) / float64(rate)))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
		}
		sent := time.Now()
		// A stall (MAXPENDING acks outstanding) waits for acks instead of failing the run.
		future, err := js.PublishAsync(subject, payload, nats.StallWait(60*time.Second))
		if err != nil {
			fail("publish: %v", err)
		}
		go func() {
			select {
			case <-future.Ok():
				done <- time.Since(sent)
			case <-future.Err():
				done <- -1
			}
		}()
		collect(false)
	}
	collect(true)
	secs := time.Since(start).Seconds()
	ok := latencies[:0]
	for _, d := range latencies {
		if d < 0 {
			failed++
		} else {
			ok = append(ok, d)
		}
	}
	sort.Slice(ok, func(a, b int) bool { return ok[a] < ok[b] })
	n := float64(len(ok))
	fmt.Printf("{\"mode\":\"produce\",\"records\":%d,\"failed\":%d,\"seconds\":%.3f,\"recordsPerSec\":%.0f,"+
		"\"mbPerSec\":%.1f,\"p50Ms\":%.3f,\"p99Ms\":%.3f,\"p999Ms\":%.3f,\"maxMs\":%.3f}\n",
		len(ok), failed, secs, n/secs, n*float64(size)/secs/1e6,
		pct(ok, 50), pct(ok, 99), pct(ok, 99.9), pct(ok, 100))
	if failed > 0 {
		os.Exit(1)
	}
}
