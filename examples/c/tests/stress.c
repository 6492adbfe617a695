/*
 * Stress test of the C ABI: many threads start runs on one harness at
 * once (successes, approvals answered by the poller thread, cancellations),
 * others call version and debug.stats in a loop, and one more opens and
 * closes harnesses of its own. Every run must get exactly one done event,
 * and no string, run or goroutine may be left over.
 */
#include "common.h"

#include <pthread.h>

#define THREADS 8
#define RUNS_PER_THREAD 12
#define MAX_RUNS (THREADS * RUNS_PER_THREAD)

static uint64_t harness;
static char *base_dir;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long long started[MAX_RUNS];
static int n_started;
static int done_count[1 << 16]; /* by run handle; handles are small here */
static volatile int stop_poller, stop_callers;

static void *starter(void *arg) {
	long t = (long)arg;
	for (int i = 0; i < RUNS_PER_THREAD; i++) {
		char *ws = xsprintf("%s/ws-%ld-%d", base_dir, t, i);
		mkdir(ws, 0755);
		const char *fmt = i % 3 == 0 ? SUCCESS_SPEC : i % 3 == 1 ? ASK_SPEC : SLOW_SPEC;
		char *spec = xsprintf(fmt, ws);
		char *req = xsprintf("{\"method\":\"run.start\",\"params\":{\"harness\":%llu,\"spec\":%s}}",
		                     (unsigned long long)harness, spec);
		char *out = call_ok(req);
		long long run = num_field(out, "run");
		io_harness_free(out);
		pthread_mutex_lock(&mu);
		started[n_started++] = run;
		pthread_mutex_unlock(&mu);
		if (i % 3 == 2)
			CHECK(io_harness_cancel((uint64_t)run) == IO_HARNESS_OK, "cancel %lld", run);
		free(req), free(spec), free(ws);
	}
	return NULL;
}

static void *poller(void *arg) {
	(void)arg;
	while (!stop_poller) {
		char *batch = io_harness_poll(harness, 50, 500);
		if (!batch)
			continue;
		size_t pos = 0;
		char *ev;
		while ((ev = next_event(batch, &pos))) {
			char *kind = str_field(ev, "kind");
			if (strcmp(kind, "approval_pending") == 0) {
				char *run_id = str_field(ev, "run_id"), *req_id = str_field(ev, "request_id");
				char *req = xsprintf("{\"method\":\"approval.resolve\",\"params\":{\"harness\":%llu,\"run_id\":\"%s\","
				                     "\"request_id\":\"%s\",\"decision\":{\"kind\":\"approve\"}}}",
				                     (unsigned long long)harness, run_id, req_id);
				io_harness_free(call_ok(req));
				free(req), free(run_id), free(req_id);
			} else if (strcmp(kind, "done") == 0) {
				long long run = num_field(ev, "run");
				pthread_mutex_lock(&mu);
				if (run > 0 && run < (1 << 16))
					done_count[run]++;
				pthread_mutex_unlock(&mu);
			}
			free(kind), free(ev);
		}
		io_harness_free(batch);
	}
	return NULL;
}

static void *caller(void *arg) {
	(void)arg;
	while (!stop_callers) {
		io_harness_free(call_ok("{\"method\":\"version\"}"));
		io_harness_free(call_ok("{\"method\":\"debug.stats\"}"));
		char *bad = call("{\"method\":\"run.status\",\"params\":{\"run\":\"x\"}}");
		CHECK(!is_ok(bad), "run.status with a string handle: %s", bad);
		io_harness_free(bad);
	}
	return NULL;
}

static void *opener(void *arg) {
	(void)arg;
	while (!stop_callers) {
		uint64_t h = open_harness(":memory:");
		char *req = xsprintf("{\"method\":\"debug.emit\",\"params\":{\"harness\":%llu,\"count\":50}}", (unsigned long long)h);
		io_harness_free(call_ok(req));
		free(req);
		char *b = io_harness_poll(h, 100, 10);
		io_harness_free(b);
		CHECK(io_harness_close(h, 5000) == IO_HARNESS_OK, "close of a scratch harness");
	}
	return NULL;
}

static int all_done(void) {
	pthread_mutex_lock(&mu);
	int ok = n_started == MAX_RUNS;
	for (int i = 0; ok && i < n_started; i++)
		ok = done_count[started[i]] >= 1;
	pthread_mutex_unlock(&mu);
	return ok;
}

int main(void) {
	check_abi();
	base_dir = temp_dir();
	harness = open_harness(":memory:");
	pthread_t starters[THREADS], poll_t, callers[2], open_t;
	pthread_create(&poll_t, NULL, poller, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&callers[i], NULL, caller, NULL);
	pthread_create(&open_t, NULL, opener, NULL);
	double t0 = now_s();
	for (long i = 0; i < THREADS; i++)
		pthread_create(&starters[i], NULL, starter, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(starters[i], NULL);
	while (!all_done() && now_s() - t0 < 120)
		usleep(20000);
	stop_callers = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(callers[i], NULL);
	pthread_join(open_t, NULL);
	stop_poller = 1;
	pthread_join(poll_t, NULL);

	CHECK(all_done(), "not every run ended within 120s");
	for (int i = 0; i < n_started; i++)
		CHECK(done_count[started[i]] == 1, "run %lld got %d done events", started[i], done_count[started[i]]);
	CHECK(io_harness_close(harness, 20000) == IO_HARNESS_OK, "close");
	char *last = io_harness_poll(harness, 0, 10);
	io_harness_free(last);
	CHECK(stats_field("strings_live") == 0, "strings_live %lld", stats_field("strings_live"));
	double deadline = now_s() + 10;
	while ((stats_field("goroutines") != 0 || stats_field("runs") != 0) && now_s() < deadline)
		usleep(10000);
	CHECK(stats_field("goroutines") == 0, "goroutines %lld", stats_field("goroutines"));
	CHECK(stats_field("harnesses") == 0, "harnesses %lld", stats_field("harnesses"));

	char *rm = xsprintf("rm -rf '%s'", base_dir);
	if (system(rm) != 0)
		fprintf(stderr, "could not remove %s\n", base_dir);
	free(rm);
	if (ioh_failures) {
		fprintf(stderr, "stress: %d failure(s)\n", ioh_failures);
		return 1;
	}
	printf("stress: ok: %d runs from %d threads in %.2fs\n", n_started, THREADS, now_s() - t0);
	return 0;
}
