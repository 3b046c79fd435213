// Issue 32: the Go clients franz-go (kgo, kadm) and sarama against a broker.
//
//	goconf franz|sarama BOOTSTRAP [CHECK...]
//
// Runs each check of one client (all of them when none is named) against the brokers at
// BOOTSTRAP, one after the other, each on topics and groups of its own, and prints one JSON
// line per check, then a closing line:
//
//	{"check":"produce-acks-1","ok":true,"detail":"","ms":412}
//	{"done":true,"passed":N,"failed":M}
//
// The same checks run against tidelog and against Apache Kafka 4.4
// (test/compat/go-clients.test.ts): a check that fails on Kafka is a bad check. Every check
// bounds its own time (checkTimeout); one that runs over is reported and left behind, since
// a Go client has no way to be stopped from outside.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// checkTimeout bounds one check; each takes a few seconds on a quiet machine, and the
// consumer group checks wait for rebalances on a loaded 2-core one.
const checkTimeout = 90 * time.Second

type check struct {
	name string
	run  func(ctx context.Context) error
}

type outcome struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Ms     int64  `json:"ms"`
}

// env is what every check of both clients shares.
type env struct {
	seeds []string
	// prefix is unique per run, so that a check never sees another run's topics or groups.
	prefix string
	// brokers is how many brokers the cluster has, rf the replication factor of new topics.
	brokers int
	rf      int16
}

func (e *env) name(what string) string { return e.prefix + "-" + what }

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: goconf franz|sarama BOOTSTRAP [CHECK...]")
		os.Exit(2)
	}
	client, bootstrap := os.Args[1], os.Args[2]
	e := &env{
		seeds:  strings.Split(bootstrap, ","),
		prefix: "go" + client[:1] + "-" + strconv.FormatInt(time.Now().UnixMilli()%100_000_000, 36),
	}
	var checks []check
	var setup func(context.Context, *env) error
	switch client {
	case "franz":
		checks, setup = franzChecks(e), franzSetup
	case "sarama":
		checks, setup = saramaChecks(e), saramaSetup
	default:
		fmt.Fprintf(os.Stderr, "unknown client %q\n", client)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	if err := setup(ctx, e); err != nil {
		cancel()
		fmt.Fprintf(os.Stderr, "setup failed: %v\n", err)
		os.Exit(1)
	}
	cancel()

	wanted := os.Args[3:]
	if len(wanted) == 0 {
		for _, c := range checks {
			wanted = append(wanted, c.name)
		}
	}
	byName := map[string]check{}
	for _, c := range checks {
		byName[c.name] = c
	}
	out := json.NewEncoder(os.Stdout)
	passed, failed := 0, 0
	for _, name := range wanted {
		start := time.Now()
		var err error
		if c, ok := byName[name]; ok {
			err = runBounded(c)
		} else {
			err = fmt.Errorf("no such check")
		}
		o := outcome{Check: name, OK: err == nil, Ms: time.Since(start).Milliseconds()}
		if err != nil {
			o.Detail = strings.Join(strings.Fields(err.Error()), " ")
			failed++
		} else {
			passed++
		}
		_ = out.Encode(o)
	}
	_ = out.Encode(map[string]any{"done": true, "passed": passed, "failed": failed})
}

// runBounded runs a check with a deadline, turning a panic into its failure.
func runBounded(c check) error {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		done <- c.run(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// Give the check a moment to return its own, more telling, error.
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-time.After(2 * time.Second):
		}
		return fmt.Errorf("timed out after %s", checkTimeout)
	}
}

func expect(cond bool, format string, args ...any) error {
	if cond {
		return nil
	}
	return fmt.Errorf(format, args...)
}

func expectEqual[T comparable](want, got T, what string) error {
	if want == got {
		return nil
	}
	return fmt.Errorf("%s: want %v, got %v", what, want, got)
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func equalStrings(want, got []string, what string) error {
	if len(want) != len(got) {
		return fmt.Errorf("%s: want %d values, got %d (first %s)", what, len(want), len(got), head(got))
	}
	for i := range want {
		if want[i] != got[i] {
			return fmt.Errorf("%s: value %d is %q, want %q", what, i, got[i], want[i])
		}
	}
	return nil
}

func head(values []string) string {
	if len(values) > 5 {
		values = values[:5]
	}
	return fmt.Sprintf("%q", values)
}

// eventually retries cond until it returns nil or within runs out, and returns its last
// error: for what a cluster of several brokers shows a moment after it changed (a config
// altered through one broker is described by another once the metadata reaches it).
func eventually(ctx context.Context, within time.Duration, cond func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
