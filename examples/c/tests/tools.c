/*
 * tools: a tool written in C, registered with a run over the ABI. The
 * host answers each host_tool_call event with tool.resolve, from inside
 * its event callback (mode "callback") or from another thread (mode
 * "thread"). The model's call is validated against the tool's schema
 * before the host sees it; a failure the host reports is an observation.
 */
#include "common.h"

#include <pthread.h>

/* The spec: the model calls "upper" with {"text": "hello"}, then with an
   argument the schema refuses, then writes the answer it got. */
#define TOOL_SPEC \
	"{\"task\":{\"goal\":\"Shout.\",\"root\":\"%s\"," \
	"\"verification\":[{\"kind\":\"workspace_file_contains\",\"file\":\"out.txt\",\"text\":\"HELLO\"}]}," \
	"\"provider\":{\"name\":\"scripted\",\"script\":{\"turns\":[" \
	"{\"text\":\"Shouting.\",\"tool_calls\":[{\"name\":\"upper\",\"arguments\":{\"text\":\"hello\"}}," \
	"{\"name\":\"upper\",\"arguments\":{\"text\":42}},{\"name\":\"upper\",\"arguments\":{\"text\":\"fail\"}}]}," \
	"{\"text\":\"Writing.\",\"tool_calls\":[{\"name\":\"write_file\",\"arguments\":{\"path\":\"out.txt\",\"content\":\"HELLO\\n\"}}]}]}}}"

#define TOOLS \
	"[{\"name\":\"upper\",\"description\":\"Upper-cases text.\",\"parameters\":{\"type\":\"object\"," \
	"\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"],\"additionalProperties\":false}}]"

typedef struct {
	uint64_t h;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int calls, done, errors_seen, ok_seen;
	char *pending[8]; /* events to answer from the worker thread */
	int npending;
	int threaded;
} host_t;

/* answer is the tool itself: it upper-cases "text", and fails on "fail". */
static void answer(host_t *hs, const char *ev) {
	char *run_id = str_field(ev, "run_id"), *req_id = str_field(ev, "request_id"), *text = str_field(ev, "text");
	char *req;
	if (text && strcmp(text, "fail") == 0) {
		req = xsprintf("{\"method\":\"tool.resolve\",\"params\":{\"harness\":%llu,\"run_id\":\"%s\",\"request_id\":\"%s\","
		               "\"error\":\"the C tool refuses to shout fail\"}}", (unsigned long long)hs->h, run_id, req_id);
	} else {
		for (char *p = text; p && *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 'a' + 'A');
		req = xsprintf("{\"method\":\"tool.resolve\",\"params\":{\"harness\":%llu,\"run_id\":\"%s\",\"request_id\":\"%s\","
		               "\"output\":\"%s\"}}", (unsigned long long)hs->h, run_id, req_id, text ? text : "");
	}
	char *out = call(req);
	CHECK(strstr(out, "\"state\":\"delivered\"") != NULL, "tool.resolve: %s", out);
	io_harness_free(out);
	free(req), free(run_id), free(req_id), free(text);
}

static void on_event(void *user, const char *ev) {
	host_t *hs = user;
	char *kind = str_field(ev, "kind");
	pthread_mutex_lock(&hs->mu);
	if (strcmp(kind, "host_tool_call") == 0) {
		hs->calls++;
		if (hs->threaded) {
			hs->pending[hs->npending++] = strdup(ev);
			pthread_cond_broadcast(&hs->cv);
		}
	} else if (strcmp(kind, "tool_result") == 0 && strstr(ev, "\"tool\":\"upper\"")) {
		if (strstr(ev, "\"is_error\":true"))
			hs->errors_seen++;
		else if (strstr(ev, "\"output\":\"HELLO\""))
			hs->ok_seen++;
	} else if (strcmp(kind, "done") == 0) {
		CHECK(strstr(ev, "\"kind\":\"success\"") != NULL, "done: %s", ev);
		hs->done = 1;
		pthread_cond_broadcast(&hs->cv);
	}
	pthread_mutex_unlock(&hs->mu);
	if (strcmp(kind, "host_tool_call") == 0 && !hs->threaded)
		answer(hs, ev); /* re-entrant: from inside the callback */
	free(kind);
}

static void *worker(void *arg) {
	host_t *hs = arg;
	pthread_mutex_lock(&hs->mu);
	while (!hs->done) {
		if (hs->npending == 0) {
			pthread_cond_wait(&hs->cv, &hs->mu);
			continue;
		}
		char *ev = hs->pending[--hs->npending];
		pthread_mutex_unlock(&hs->mu);
		answer(hs, ev);
		free(ev);
		pthread_mutex_lock(&hs->mu);
	}
	pthread_mutex_unlock(&hs->mu);
	return NULL;
}

static void run_mode(int threaded) {
	host_t hs = {.threaded = threaded};
	pthread_mutex_init(&hs.mu, NULL);
	pthread_cond_init(&hs.cv, NULL);
	hs.h = open_harness(":memory:");
	CHECK(io_harness_set_event_callback(hs.h, on_event, &hs) == IO_HARNESS_OK, "set callback");
	pthread_t th;
	if (threaded)
		pthread_create(&th, NULL, worker, &hs);
	char *ws = temp_dir();
	char *spec = xsprintf(TOOL_SPEC, ws);
	char *req = xsprintf("{\"method\":\"run.start\",\"params\":{\"harness\":%llu,\"spec\":%s,\"tools\":%s}}",
	                     (unsigned long long)hs.h, spec, TOOLS);
	io_harness_free(call_ok(req));
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	pthread_mutex_lock(&hs.mu);
	while (!hs.done)
		if (pthread_cond_timedwait(&hs.cv, &hs.mu, &until) != 0)
			break;
	int done = hs.done, calls = hs.calls, errs = hs.errors_seen, oks = hs.ok_seen;
	pthread_mutex_unlock(&hs.mu);
	CHECK(done, "no done event within 30s");
	/* The host saw two calls: the one with a bad argument never reached it. */
	CHECK(calls == 2, "the host saw %d calls, want 2", calls);
	CHECK(oks == 1 && errs == 2, "tool results: %d ok, %d errors", oks, errs);
	CHECK(io_harness_close(hs.h, 10000) == IO_HARNESS_OK, "close");
	if (threaded) {
		pthread_mutex_lock(&hs.mu);
		hs.done = 1;
		pthread_cond_broadcast(&hs.cv);
		pthread_mutex_unlock(&hs.mu);
		pthread_join(th, NULL);
	}
	free(req), free(spec), free(ws);
}

int main(void) {
	check_abi();
	run_mode(0);
	run_mode(1);
	CHECK(stats_field("strings_live") == 0, "strings live");
	if (ioh_failures)
		return 1;
	printf("tools: ok\n");
	return 0;
}
