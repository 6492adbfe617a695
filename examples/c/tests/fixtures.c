/*
 * Replays the shared scripted-run fixtures (internal/abi/testdata/fixtures)
 * through the C ABI and checks that each produces exactly the event kinds
 * of its events.golden — the same files the Go, Python and Node tests use.
 *
 *   fixtures DIR
 */
#include "common.h"

#include <dirent.h>

/* play_run polls until the run's done event, answering approvals with
   answer (may be NULL); it appends the run's kinds to kinds and returns
   the done event. */
static char *play_run(uint64_t h, long long run, const char *answer, char *kinds, size_t cap) {
	double deadline = now_s() + 30;
	while (now_s() < deadline) {
		char *batch = io_harness_poll(h, 100, 256);
		if (!batch)
			continue;
		size_t pos = 0;
		char *ev, *done = NULL;
		while ((ev = next_event(batch, &pos))) {
			char *kind = str_field(ev, "kind");
			if (strcmp(kind, "approval_pending") == 0 && answer) {
				char *run_id = str_field(ev, "run_id"), *req_id = str_field(ev, "request_id");
				char *req = xsprintf("{\"method\":\"approval.resolve\",\"params\":{\"harness\":%llu,\"run_id\":\"%s\","
				                     "\"request_id\":\"%s\",\"decision\":%s}}",
				                     (unsigned long long)h, run_id, req_id, answer);
				io_harness_free(call_ok(req));
				free(req), free(run_id), free(req_id);
			}
			if (num_field(ev, "run") == run) {
				strncat(kinds, kind, cap - strlen(kinds) - 2);
				strncat(kinds, " ", cap - strlen(kinds) - 1);
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
	FATAL("run %lld: no done event within 30s; kinds so far: %s", run, kinds);
}

static long long start(uint64_t h, const char *method, const char *params) {
	char *req = xsprintf("{\"method\":\"%s\",\"params\":{\"harness\":%llu,%s}}", method, (unsigned long long)h, params);
	char *out = call_ok(req);
	long long run = num_field(out, "run");
	io_harness_free(out);
	free(req);
	return run;
}

/* trim_file reads a file and strips trailing whitespace; NULL if absent. */
static char *trim_file(const char *dir, const char *name) {
	char *path = xsprintf("%s/%s", dir, name);
	char *s = read_file(path);
	free(path);
	if (s) {
		size_t n = strlen(s);
		while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r'))
			s[--n] = 0;
	}
	return s;
}

static int play(const char *dir, const char *name) {
	char *fdir = xsprintf("%s/%s", dir, name);
	char *spec_tmpl = trim_file(fdir, "spec.json");
	if (!spec_tmpl) {
		free(fdir);
		return 0;
	}
	char *answer = trim_file(fdir, "approve.json");
	char *resume = trim_file(fdir, "resume.json");
	char *golden = trim_file(fdir, "events.golden");
	if (!golden)
		FATAL("%s: no events.golden", fdir);
	for (char *p = golden; *p; p++)
		if (*p == '\n')
			*p = ' ';

	char *ws = temp_dir();
	char *quoted = xsprintf("\"%s\"", ws);
	char *spec = replace(spec_tmpl, "\"$WORKSPACE\"", quoted);
	uint64_t h = open_harness(":memory:");
	static char kinds[16384];
	kinds[0] = 0;
	char *params = xsprintf("\"spec\":%s", spec);
	char *done = play_run(h, start(h, "run.start", params), answer, kinds, sizeof kinds);
	free(params);
	if (resume) {
		char *run_id = str_field(done, "run_id"), *req_id = str_field(done, "request_id");
		CHECK(strstr(done, "awaiting_approval") && req_id, "%s: first run: %s", name, done);
		params = xsprintf("\"run_id\":\"%s\",\"request_id\":\"%s\",\"decision\":%s,\"spec\":%s", run_id, req_id, resume, spec);
		free(done);
		done = play_run(h, start(h, "run.resume_with_decision", params), NULL, kinds, sizeof kinds);
		free(params), free(run_id), free(req_id);
	}
	size_t n = strlen(kinds);
	if (n && kinds[n - 1] == ' ')
		kinds[n - 1] = 0;
	CHECK(strcmp(kinds, golden) == 0, "fixture %s:\n  got    %s\n  golden %s", name, kinds, golden);
	CHECK(io_harness_close(h, 10000) == IO_HARNESS_OK, "close");
	io_harness_free(io_harness_poll(h, 0, 1));

	char *rm = xsprintf("rm -rf '%s'", ws);
	if (system(rm) != 0)
		fprintf(stderr, "could not remove %s\n", ws);
	free(rm), free(done), free(spec), free(quoted), free(ws), free(golden), free(resume), free(answer), free(spec_tmpl), free(fdir);
	return 1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
	if (argc != 2)
		FATAL("usage: fixtures DIR");
	check_abi();
	DIR *d = opendir(argv[1]);
	if (!d)
		FATAL("open %s: %s", argv[1], strerror(errno));
	char *names[256];
	int count = 0;
	struct dirent *e;
	while ((e = readdir(d)) && count < 256)
		if (e->d_name[0] != '.')
			names[count++] = strdup(e->d_name);
	closedir(d);
	qsort(names, (size_t)count, sizeof names[0], by_name);
	int played = 0;
	for (int i = 0; i < count; i++) {
		played += play(argv[1], names[i]);
		free(names[i]);
	}
	CHECK(played > 0, "no fixture in %s", argv[1]);
	CHECK(stats_field("strings_live") == 0, "strings_live %lld", stats_field("strings_live"));
	if (ioh_failures) {
		fprintf(stderr, "fixtures: %d failure(s)\n", ioh_failures);
		return 1;
	}
	printf("fixtures: ok: %d fixtures match their golden event kinds\n", played);
	return 0;
}
