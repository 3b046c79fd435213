/*
 * tidelog's native load generator: a librdkafka producer/consumer so the broker, not the
 * client, is what the benchmark measures (a Node client tops out far below the broker).
 *
 *   rdkafka-perf produce BOOTSTRAP TOPIC COUNT SIZE ACKS RATE(0=max) [LINGER_MS] [COMPRESSION]
 *   rdkafka-perf consume BOOTSTRAP TOPIC PARTITIONS COUNT [KEY=VALUE ...]
 *
 * Prints one JSON line with records/s, MB/s and (produce) delivery latency percentiles.
 * A consume's KEY=VALUE arguments are librdkafka properties set over its own ones (its fetch
 * sizes are larger than librdkafka's defaults: 10 MiB a partition, 1 GiB queued).
 *
 * At a fixed RATE the send loop sleeps until each record is due and the delivery reports run
 * on librdkafka's background thread: polling in a loop until then took a whole core (88 % of
 * one at 2,000 records/s) from the brokers it measures on a 2-core machine, where the Go
 * publisher of the NATS peer (nats-perf.go) sleeps. RATE 0 polls between sends, as before.
 */
#define _GNU_SOURCE
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t *latencies_us;
/* Written by one thread (the poller or the background thread), read by main after the flush. */
static long delivered, failed;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque) {
  (void)rk;
  (void)opaque;
  if (msg->err) {
    if (__atomic_fetch_add(&failed, 1, __ATOMIC_RELEASE) < 5)
      fprintf(stderr, "delivery failed: %s\n", rd_kafka_err2str(msg->err));
    return;
  }
  int64_t sent = (int64_t)(intptr_t)msg->_private;
  latencies_us[delivered] = now_us() - sent;
  __atomic_store_n(&delivered, delivered + 1, __ATOMIC_RELEASE);
}

static void on_background_event(rd_kafka_t *rk, rd_kafka_event_t *ev, void *opaque) {
  if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_DR) {
    const rd_kafka_message_t *msg;
    while ((msg = rd_kafka_event_message_next(ev)) != NULL) on_delivery(rk, msg, opaque);
  }
  rd_kafka_event_destroy(ev);
}

static void sleep_until_us(int64_t due) {
  struct timespec ts = {(time_t)(due / 1000000), (long)(due % 1000000) * 1000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
  }
}

/* After rd_kafka_flush: the background thread may not have run the last reports yet (10 s at most). */
static void wait_for_reports(long expected) {
  for (int i = 0; i < 10000; i++) {
    if (__atomic_load_n(&delivered, __ATOMIC_ACQUIRE) + __atomic_load_n(&failed, __ATOMIC_ACQUIRE) >= expected)
      return;
    sleep_until_us(now_us() + 1000);
  }
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct(int64_t *sorted, long n, double p) {
  if (n == 0) return 0;
  long i = (long)(p / 100.0 * (double)(n - 1));
  return (double)sorted[i] / 1000.0;
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v) {
  char err[256];
  if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
    fprintf(stderr, "%s: %s\n", k, err);
    exit(2);
  }
}

static int produce(int argc, char **argv) {
  if (argc < 8) return 2;
  const char *bootstrap = argv[2], *topic = argv[3];
  long count = atol(argv[4]), size = atol(argv[5]), rate = atol(argv[7]);
  const char *acks = argv[6];
  const char *linger = argc > 8 ? argv[8] : "5";
  const char *codec = argc > 9 ? argv[9] : "none";
  char err[256];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", bootstrap);
  set(conf, "acks", acks);
  set(conf, "socket.nagle.disable", "true");
  set(conf, "linger.ms", linger);
  set(conf, "batch.size", "1000000");
  set(conf, "compression.codec", codec);
  set(conf, "queue.buffering.max.kbytes", "1048576");
  set(conf, "queue.buffering.max.messages", "1000000");
  int paced = rate > 0;
  if (paced) {
    rd_kafka_conf_set_events(conf, RD_KAFKA_EVENT_DR);
    rd_kafka_conf_set_background_event_cb(conf, on_background_event);
  } else {
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  }
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (!rk) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  if (paced) {
    /* rd_kafka_poll would serve the forwarded queue and drop its delivery events: not called when paced. */
    rd_kafka_queue_t *main_queue = rd_kafka_queue_get_main(rk), *background = rd_kafka_queue_get_background(rk);
    rd_kafka_queue_forward(main_queue, background);
    rd_kafka_queue_destroy(main_queue);
    rd_kafka_queue_destroy(background);
  }
  latencies_us = calloc((size_t)count + 100, sizeof(int64_t));
  char *payload = malloc((size_t)size);
  for (long i = 0; i < size; i++) payload[i] = (char)('a' + (i * 7 + i / 13) % 26);
  /* Warm up: connections and metadata are set up before timing a steady state. */
  for (int i = 0; i < 100; i++)
    rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE(payload, (size_t)size),
                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE((void *)(intptr_t)now_us()),
                      RD_KAFKA_V_END);
  rd_kafka_flush(rk, 10000);
  if (paced) wait_for_reports(100);
  __atomic_store_n(&delivered, 0, __ATOMIC_RELEASE);
  int64_t start = now_us();
  for (long i = 0; i < count; i++) {
    if (rate > 0) {
      int64_t due = start + (int64_t)((double)i * 1e6 / (double)rate);
      sleep_until_us(due);
    }
    for (;;) {
      rd_kafka_resp_err_t e = rd_kafka_producev(
          rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE(payload, (size_t)size),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE((void *)(intptr_t)now_us()), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        if (paced) sleep_until_us(now_us() + 1000);
        else rd_kafka_poll(rk, 1);
        continue;
      }
      if (e) {
        fprintf(stderr, "produce: %s\n", rd_kafka_err2str(e));
        return 1;
      }
      break;
    }
    if (!paced) rd_kafka_poll(rk, 0);
  }
  rd_kafka_flush(rk, 60000);
  if (paced) wait_for_reports(count);
  double secs = (double)(now_us() - start) / 1e6;
  /* RDKAFKA_PERF_TIMELINE=N: p50/p99/max of each N deliveries in delivery order, on stderr,
     to see when a run is slow (a cold broker) rather than only that it was. */
  const char *timeline = getenv("RDKAFKA_PERF_TIMELINE");
  long window = timeline ? atol(timeline) : 0;
  if (window > 0) {
    int64_t *part = malloc((size_t)window * sizeof(int64_t));
    for (long from = 0; from + window <= delivered; from += window) {
      memcpy(part, latencies_us + from, (size_t)window * sizeof(int64_t));
      qsort(part, (size_t)window, sizeof(int64_t), cmp64);
      fprintf(stderr, "timeline %ld-%ld p50 %.3f p99 %.3f max %.3f ms\n", from, from + window, pct(part, window, 50),
              pct(part, window, 99), pct(part, window, 100));
    }
    free(part);
  }
  qsort(latencies_us, (size_t)delivered, sizeof(int64_t), cmp64);
  printf("{\"mode\":\"produce\",\"records\":%ld,\"failed\":%ld,\"seconds\":%.3f,\"recordsPerSec\":%.0f,"
         "\"mbPerSec\":%.1f,\"p50Ms\":%.3f,\"p99Ms\":%.3f,\"p999Ms\":%.3f,\"maxMs\":%.3f}\n",
         delivered, failed, secs, (double)delivered / secs, (double)delivered * (double)size / secs / 1e6,
         pct(latencies_us, delivered, 50), pct(latencies_us, delivered, 99), pct(latencies_us, delivered, 99.9),
         pct(latencies_us, delivered, 100));
  rd_kafka_destroy(rk);
  return failed > 0;
}

static int consume(int argc, char **argv) {
  if (argc < 6) return 2;
  const char *bootstrap = argv[2], *topic = argv[3];
  int partitions = atoi(argv[4]);
  long count = atol(argv[5]);
  char err[256];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", bootstrap);
  set(conf, "group.id", "tidelog-bench");
  set(conf, "enable.auto.commit", "false");
  set(conf, "fetch.max.bytes", "52428800");
  set(conf, "max.partition.fetch.bytes", "10485760");
  set(conf, "queued.max.messages.kbytes", "1048576");
  for (int i = 6; i < argc; i++) {
    char key[128];
    const char *eq = strchr(argv[i], '=');
    if (!eq || (size_t)(eq - argv[i]) >= sizeof key) {
      fprintf(stderr, "rdkafka-perf consume: '%s' is not KEY=VALUE\n", argv[i]);
      return 2;
    }
    memcpy(key, argv[i], (size_t)(eq - argv[i]));
    key[eq - argv[i]] = '\0';
    set(conf, key, eq + 1);
  }
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (!rk) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; p++) rd_kafka_topic_partition_list_add(list, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(rk, list);
  long got = 0;
  double bytes = 0;
  int64_t start = 0;
  int64_t deadline = now_us() + 120 * 1000000LL;
  while (got < count && now_us() < deadline) {
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
    if (!m) continue;
    if (!m->err) {
      if (got == 0) start = now_us();
      got++;
      bytes += (double)m->len;
    }
    rd_kafka_message_destroy(m);
  }
  double secs = (double)(now_us() - start) / 1e6;
  printf("{\"mode\":\"consume\",\"records\":%ld,\"seconds\":%.3f,\"recordsPerSec\":%.0f,\"mbPerSec\":%.1f}\n", got,
         secs, (double)got / secs, bytes / secs / 1e6);
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return got < count;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "produce") == 0) return produce(argc, argv);
  if (argc > 1 && strcmp(argv[1], "consume") == 0) return consume(argc, argv);
  fprintf(stderr, "usage: rdkafka-perf produce|consume ...\n");
  return 2;
}
