/*
 * Smoke test of the C ABI: every export, every error path a host meets,
 * a scripted run to success, an approval answered live, an approval
 * deferred and answered later, a cancelled run, and the string balance of
 * debug.stats at the end.
 */
#include "common.h"

/* wait_done polls until the run's done event; it answers approvals with
   decision (a JSON object) when one is given, and returns the done event
   (malloc'd). kinds receives the event kinds, space-separated. */
static char *wait_done(uint64_t h, long long run, const char *decision, char *kinds, size_t cap) {
	double deadline = now_s() + 30;
	if (kinds)
		kinds[0] = 0;
	while (now_s() < deadline) {
		char *batch = io_harness_poll(h, 100, 100);
		if (!batch)
			continue;
		size_t pos = 0;
		char *ev, *done = NULL;
		while ((ev = next_event(batch, &pos))) {
			char *kind = str_field(ev, "kind");
			if (num_field(ev, "run") == run && kinds) {
				strncat(kinds, kind, cap - strlen(kinds) - 2);
				strncat(kinds, " ", cap - strlen(kinds) - 1);
			}
			if (strcmp(kind, "approval_pending") == 0 && decision) {
				char *run_id = str_field(ev, "run_id"), *req_id = str_field(ev, "request_id");
				char *req = xsprintf("{\"method\":\"approval.resolve\",\"params\":{\"harness\":%llu,"
				                     "\"run_id\":\"%s\",\"request_id\":\"%s\",\"decision\":%s}}",
				                     (unsigned long long)h, run_id, req_id, decision);
				io_harness_free(call_ok(req));
				free(req), free(run_id), free(req_id);
			}
			if (strcmp(kind, "done") == 0 && num_field(ev, "run") == run)
				done = ev;
			else
				free(ev);
			free(kind);
		}
		io_harness_free(batch);
		if (done)
			return done;
	}
	FATAL("run %lld: no done event within 30s", run);
}

static long long start(uint64_t h, const char *spec_fmt, const char *ws, const char *extra) {
	char *spec = xsprintf(spec_fmt, ws);
	char *req = xsprintf("{\"method\":\"run.start\",\"params\":{\"harness\":%llu,\"spec\":%s%s}}",
	                     (unsigned long long)h, spec, extra ? extra : "");
	char *out = call_ok(req);
	long long run = num_field(out, "run");
	CHECK(run > 0, "run.start: %s", out);
	io_harness_free(out);
	free(req), free(spec);
	return run;
}

static void expect_code(const char *req, const char *code) {
	char *out = call(req);
	char *got = error_code(out);
	CHECK(!is_ok(out) && got && strcmp(got, code) == 0, "%s -> %s, want %s", req, out, code);
	free(got);
	io_harness_free(out);
}

int main(void) {
	check_abi();

	/* Envelopes and error paths of call. */
	char *out = io_harness_call(NULL);
	char *code = error_code(out);
	CHECK(code && strcmp(code, "invalid_json") == 0, "call(NULL) -> %s", out);
	free(code);
	io_harness_free(out);
	expect_code("{\"method\":", "invalid_json");
	expect_code("not json at all", "invalid_json");
	expect_code("{\"method\":\"no.such\"}", "unknown_method");
	expect_code("{\"method\":\"version\",\"abi\":99}", "abi_mismatch");
	expect_code("{\"method\":\"harness.open\",\"params\":{}}", "invalid_argument");
	expect_code("{\"method\":\"run.cancel\",\"params\":{\"run\":987654}}", "not_found");
	/* Invalid UTF-8 (here in the id, which used to be echoed as is) and a
	   request past the size limit are refused before they are parsed. */
	expect_code("{\"method\":\"version\",\"id\":\"\xff\xfe\"}", "invalid_json");
	{
		size_t n = (size_t)IO_HARNESS_MAX_REQUEST_BYTES + 1;
		char *big = malloc(n + 1);
		memset(big, ' ', n);
		memcpy(big, "{\"method\":\"version\"}", 20);
		big[n] = 0;
		out = call(big);
		CHECK(strstr(out, "\"code\":\"invalid_argument\"") && strstr(out, "max_bytes"), "a request past the limit: %.200s", out);
		io_harness_free(out);
		big[n - 1] = 0; /* exactly the limit: parsed and answered */
		out = call(big);
		CHECK(is_ok(out), "a request of exactly the limit: %.200s", out);
		io_harness_free(out);
		free(big);
	}
	out = call_ok("{\"method\":\"version\",\"id\":7}");
	CHECK(strstr(out, "\"id\":7") != NULL, "id not echoed: %s", out);
	CHECK(num_field(out, "major") == IO_HARNESS_ABI_MAJOR, "version: %s", out);
	io_harness_free(out);
	io_harness_free(NULL);

	/* Integer entry points on unknown handles. */
	CHECK(io_harness_cancel(987654) == IO_HARNESS_UNKNOWN_HANDLE, "cancel(unknown)");
	CHECK(io_harness_close(987654, 100) == IO_HARNESS_UNKNOWN_HANDLE, "close(unknown)");
	CHECK(io_harness_poll(987654, 10, 10) == NULL, "poll(unknown)");
	int32_t st = 0;
	CHECK(io_harness_poll2(987654, 10, 10, &st) == NULL && st == IO_HARNESS_UNKNOWN_HANDLE, "poll2(unknown): %d", st);
	CHECK(io_harness_set_event_callback(987654, NULL, NULL) == IO_HARNESS_UNKNOWN_HANDLE, "set_event_callback(unknown)");

	char *dir = temp_dir();
	char *db = xsprintf("%s/trace.db", dir);
	uint64_t h = open_harness(db);
	CHECK(io_harness_poll(h, 0, 10) == NULL, "poll of an idle harness");
	CHECK(io_harness_poll2(h, 10, 10, &st) == NULL && st == IO_HARNESS_TIMEOUT, "poll2 of an idle harness: %d", st);

	/* A scripted run to success. */
	char *ws = xsprintf("%s/ws1", dir);
	mkdir(ws, 0755);
	char kinds[4096];
	long long run = start(h, SUCCESS_SPEC, ws, NULL);
	char *done = wait_done(h, run, NULL, kinds, sizeof kinds);
	CHECK(strstr(done, "\"status\":\"ok\"") && strstr(done, "\"kind\":\"success\""), "done: %s", done);
	CHECK(strncmp(kinds, "run_started step_started", 24) == 0, "kinds: %s", kinds);
	char *run_id = str_field(done, "run_id");
	char *req = xsprintf("{\"method\":\"trace.get\",\"params\":{\"harness\":%llu,\"run_id\":\"%s\",\"format\":\"text\"}}",
	                     (unsigned long long)h, run_id);
	out = call_ok(req);
	CHECK(strstr(out, "outcome: success") != NULL, "trace: %.300s", out);
	io_harness_free(out);
	free(req), free(run_id), free(done), free(ws);

	/* An approval answered while the run waits. */
	ws = xsprintf("%s/ws2", dir);
	mkdir(ws, 0755);
	run = start(h, ASK_SPEC, ws, NULL);
	done = wait_done(h, run, "{\"kind\":\"approve\"}", kinds, sizeof kinds);
	CHECK(strstr(done, "\"kind\":\"success\"") && strstr(kinds, "approval_pending"), "approved run: %s / %s", done, kinds);
	free(done), free(ws);

	/* An approval deferred, then answered with run.resume_with_decision. */
	ws = xsprintf("%s/ws3", dir);
	mkdir(ws, 0755);
	char *spec = xsprintf(ASK_SPEC, ws);
	run = start(h, ASK_SPEC, ws, NULL);
	done = wait_done(h, run, "{\"kind\":\"defer\"}", kinds, sizeof kinds);
	CHECK(strstr(done, "awaiting_approval") != NULL, "deferred run: %s", done);
	run_id = str_field(done, "run_id");
	char *req_id = str_field(done, "request_id");
	req = xsprintf("{\"method\":\"run.resume_with_decision\",\"params\":{\"harness\":%llu,\"run_id\":\"%s\","
	               "\"request_id\":\"%s\",\"decision\":{\"kind\":\"approve\"},\"spec\":%s}}",
	               (unsigned long long)h, run_id, req_id, spec);
	out = call_ok(req);
	long long run2 = num_field(out, "run");
	io_harness_free(out);
	free(done);
	done = wait_done(h, run2, NULL, kinds, sizeof kinds);
	CHECK(strstr(done, "\"kind\":\"success\"") != NULL, "resumed run: %s", done);
	free(done), free(req), free(run_id), free(req_id), free(spec), free(ws);

	/* A run cancelled midway. */
	ws = xsprintf("%s/ws4", dir);
	mkdir(ws, 0755);
	run = start(h, SLOW_SPEC, ws, NULL);
	CHECK(io_harness_cancel((uint64_t)run) == IO_HARNESS_OK, "cancel");
	double t0 = now_s();
	done = wait_done(h, run, NULL, kinds, sizeof kinds);
	CHECK(strstr(done, "\"status\":\"cancelled\"") != NULL, "cancelled run: %s", done);
	CHECK(now_s() - t0 < 10, "cancel took %.1fs", now_s() - t0);
	free(done), free(ws);

	/* Bad run spec: a typed error. */
	req = xsprintf("{\"method\":\"run.start\",\"params\":{\"harness\":%llu,\"spec\":{\"task\":{}}}}", (unsigned long long)h);
	expect_code(req, "invalid_argument");
	free(req);

	/* Close: the poller gets the closed marker once; everything after is closed. */
	CHECK(io_harness_close(h, 10000) == IO_HARNESS_OK, "close");
	char *batch = io_harness_poll(h, 100, 10);
	CHECK(batch && strcmp(batch, "[{\"kind\":\"closed\"}]") == 0, "poll after close: %s", batch ? batch : "NULL");
	io_harness_free(batch);
	CHECK(io_harness_poll(h, 100, 10) == NULL, "second poll after close");
	CHECK(io_harness_poll2(h, 100, 10, &st) == NULL && st == IO_HARNESS_CLOSED, "poll2 after close: %d", st);
	CHECK(io_harness_close(h, 100) == IO_HARNESS_OK, "close is idempotent");
	CHECK(io_harness_cancel(h) == IO_HARNESS_CLOSED, "cancel after close");

	/* Every string handed out was freed. */
	CHECK(stats_field("strings_live") == 0, "strings_live %lld", stats_field("strings_live"));
	CHECK(stats_field("runs") == 0, "runs %lld", stats_field("runs"));
	double deadline = now_s() + 5;
	while (stats_field("goroutines") != 0 && now_s() < deadline)
		usleep(10000);
	CHECK(stats_field("goroutines") == 0, "goroutines %lld", stats_field("goroutines"));

	free(db);
	char *rm = xsprintf("rm -rf '%s'", dir);
	if (system(rm) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	free(rm), free(dir);
	if (ioh_failures) {
		fprintf(stderr, "smoke: %d failure(s)\n", ioh_failures);
		return 1;
	}
	printf("smoke: ok\n");
	return 0;
}
