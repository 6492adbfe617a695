/*
 * Callback re-entry test: in push mode, the event callback calls back
 * into the library — approval.resolve for the request it was just told
 * about, version, run.start of a second run, io_harness_cancel of a slow
 * run — and checks that close and set_event_callback on its own harness
 * are refused (IO_HARNESS_ILLEGAL_CONTEXT) instead of deadlocking. All
 * callbacks come from one thread; after unregistering, none comes again.
 */
#include "common.h"

#include <pthread.h>

struct state {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t harness;
	char *dir;
	int callbacks;
	int dones;
	int chained; /* the second run was started from the callback */
	int illegal_close, illegal_unregister;
	long long slow_run;
	int slow_cancelled;
	pthread_t thread;
	int threads_differ;
	char kinds[8192];
};

static void on_event(void *user, const char *ev) {
	struct state *s = user;
	pthread_mutex_lock(&s->mu);
	if (s->callbacks++ == 0)
		s->thread = pthread_self();
	else if (!pthread_equal(s->thread, pthread_self()))
		s->threads_differ = 1;
	pthread_mutex_unlock(&s->mu);

	char *kind = str_field(ev, "kind");
	long long run = num_field(ev, "run");
	/* Re-entry: a plain call from inside the callback. */
	io_harness_free(call_ok("{\"method\":\"version\"}"));

	if (strcmp(kind, "approval_pending") == 0) {
		char *run_id = str_field(ev, "run_id"), *req_id = str_field(ev, "request_id");
		char *req = xsprintf("{\"method\":\"approval.resolve\",\"params\":{\"harness\":%llu,\"run_id\":\"%s\","
		                     "\"request_id\":\"%s\",\"decision\":{\"kind\":\"approve\"}}}",
		                     (unsigned long long)s->harness, run_id, req_id);
		char *out = call_ok(req);
		CHECK(strstr(out, "delivered") || strstr(out, "stored"), "resolve from the callback: %s", out);
		io_harness_free(out);
		free(req), free(run_id), free(req_id);
		/* Close and unregister from inside the callback are refused. */
		int c = io_harness_close(s->harness, 1000);
		int u = io_harness_set_event_callback(s->harness, NULL, NULL);
		pthread_mutex_lock(&s->mu);
		s->illegal_close = c == IO_HARNESS_ILLEGAL_CONTEXT;
		s->illegal_unregister = u == IO_HARNESS_ILLEGAL_CONTEXT;
		pthread_mutex_unlock(&s->mu);
	}
	if (strcmp(kind, "step_started") == 0 && run == s->slow_run) {
		pthread_mutex_lock(&s->mu);
		s->slow_cancelled = io_harness_cancel((uint64_t)run) == IO_HARNESS_OK;
		pthread_mutex_unlock(&s->mu);
	}
	if (strcmp(kind, "done") == 0) {
		pthread_mutex_lock(&s->mu);
		int first = s->dones == 0 && !s->chained;
		if (first)
			s->chained = 1;
		pthread_mutex_unlock(&s->mu);
		if (first) {
			/* Start the next run from inside the callback. */
			char *ws = xsprintf("%s/ws-chained", s->dir);
			mkdir(ws, 0755);
			char *spec = xsprintf(SUCCESS_SPEC, ws);
			char *req = xsprintf("{\"method\":\"run.start\",\"params\":{\"harness\":%llu,\"spec\":%s}}",
			                     (unsigned long long)s->harness, spec);
			io_harness_free(call_ok(req));
			free(req), free(spec), free(ws);
		}
		pthread_mutex_lock(&s->mu);
		s->dones++;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_lock(&s->mu);
	strncat(s->kinds, kind, sizeof s->kinds - strlen(s->kinds) - 2);
	strncat(s->kinds, " ", sizeof s->kinds - strlen(s->kinds) - 1);
	pthread_mutex_unlock(&s->mu);
	free(kind);
}

static void wait_dones(struct state *s, int n) {
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	pthread_mutex_lock(&s->mu);
	while (s->dones < n)
		if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0)
			break;
	int got = s->dones;
	pthread_mutex_unlock(&s->mu);
	if (got < n)
		FATAL("%d of %d done events within 30s; kinds: %s", got, n, s->kinds);
}

int main(void) {
	check_abi();
	struct state s = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .slow_run = -1};
	s.dir = temp_dir();
	s.harness = open_harness(":memory:");
	CHECK(io_harness_set_event_callback(s.harness, on_event, &s) == IO_HARNESS_OK, "register");

	/* Run 1 asks for approval (answered in the callback); its done event
	   starts run 2 from the callback. */
	char *ws = xsprintf("%s/ws-ask", s.dir);
	mkdir(ws, 0755);
	char *spec = xsprintf(ASK_SPEC, ws);
	char *req = xsprintf("{\"method\":\"run.start\",\"params\":{\"harness\":%llu,\"spec\":%s}}", (unsigned long long)s.harness, spec);
	io_harness_free(call_ok(req));
	free(req), free(spec), free(ws);
	wait_dones(&s, 2);

	/* Run 3 is slow; the callback cancels it at its first step. */
	ws = xsprintf("%s/ws-slow", s.dir);
	mkdir(ws, 0755);
	spec = xsprintf(SLOW_SPEC, ws);
	req = xsprintf("{\"method\":\"run.start\",\"params\":{\"harness\":%llu,\"spec\":%s}}", (unsigned long long)s.harness, spec);
	pthread_mutex_lock(&s.mu);
	char *out = call_ok(req);
	s.slow_run = num_field(out, "run");
	pthread_mutex_unlock(&s.mu);
	io_harness_free(out);
	free(req), free(spec), free(ws);
	wait_dones(&s, 3);

	/* Unregister from the main thread; afterwards no callback comes. */
	CHECK(io_harness_set_event_callback(s.harness, NULL, NULL) == IO_HARNESS_OK, "unregister");
	pthread_mutex_lock(&s.mu);
	int before = s.callbacks;
	pthread_mutex_unlock(&s.mu);
	req = xsprintf("{\"method\":\"debug.emit\",\"params\":{\"harness\":%llu,\"count\":5}}", (unsigned long long)s.harness);
	io_harness_free(call_ok(req));
	free(req);
	char *batch = io_harness_poll(s.harness, 2000, 100);
	CHECK(batch != NULL, "poll after unregistering got nothing");
	io_harness_free(batch);
	usleep(50000);
	pthread_mutex_lock(&s.mu);
	CHECK(s.callbacks == before, "%d callbacks after unregistering", s.callbacks - before);
	CHECK(s.illegal_close, "close from the callback was not refused");
	CHECK(s.illegal_unregister, "set_event_callback from the callback was not refused");
	CHECK(s.slow_cancelled, "cancel from the callback failed");
	CHECK(!s.threads_differ, "callbacks came from more than one thread");
	CHECK(strstr(s.kinds, "approval_pending") != NULL, "kinds: %s", s.kinds);
	pthread_mutex_unlock(&s.mu);

	/* Re-register, then close from the main thread: close stops the
	   dispatcher and no callback fires after it returns. */
	CHECK(io_harness_set_event_callback(s.harness, on_event, &s) == IO_HARNESS_OK, "re-register");
	CHECK(io_harness_close(s.harness, 10000) == IO_HARNESS_OK, "close");
	pthread_mutex_lock(&s.mu);
	before = s.callbacks;
	pthread_mutex_unlock(&s.mu);
	usleep(50000);
	CHECK(s.callbacks == before, "callbacks after close");
	CHECK(io_harness_set_event_callback(s.harness, on_event, &s) == IO_HARNESS_CLOSED, "register after close");
	CHECK(stats_field("strings_live") == 0, "strings_live %lld", stats_field("strings_live"));

	char *rm = xsprintf("rm -rf '%s'", s.dir);
	if (system(rm) != 0)
		fprintf(stderr, "could not remove %s\n", s.dir);
	free(rm), free(s.dir);
	if (ioh_failures) {
		fprintf(stderr, "reentry: %d failure(s)\n", ioh_failures);
		return 1;
	}
	printf("reentry: ok (%d callbacks)\n", s.callbacks);
	return 0;
}
