/*
 * quickstart — io-harness from C: a scripted agent writes hello.txt in a
 * fresh workspace, the verification gate checks it, and the program
 * prints the run's events as they arrive and its outcome.
 *
 *   cc -Iinclude examples/c/quickstart.c -Lbin -lio_harness -Wl,-rpath,$PWD/bin -o quickstart
 *   ./quickstart
 *
 * (or `pkg-config --cflags --libs io-harness` after make install). No API
 * key and no network are needed: the model is scripted.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_harness.h"

/* field copies the first string value of "key" in json (enough for the
   flat fields this example reads; use a JSON parser in real code). */
static char *field(const char *json, const char *key) {
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":\"", key);
	const char *p = strstr(json, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	return strndup(p, strcspn(p, "\""));
}

int main(void) {
	uint32_t v = io_harness_abi_version();
	if ((v >> 16) != IO_HARNESS_ABI_MAJOR) {
		fprintf(stderr, "libio_harness ABI %u.%u, this program needs %d.x\n", v >> 16, v & 0xffff, IO_HARNESS_ABI_MAJOR);
		return 1;
	}
	char ws[] = "/tmp/io-harness-c-XXXXXX";
	if (!mkdtemp(ws)) {
		perror("mkdtemp");
		return 1;
	}

	char *out = io_harness_call("{\"method\":\"harness.open\",\"params\":{\"store\":\":memory:\"}}");
	if (strncmp(out, "{\"ok\":true", 10) != 0) {
		fprintf(stderr, "harness.open: %s\n", out);
		return 1;
	}
	uint64_t h = strtoull(strstr(out, "\"harness\":") + 10, NULL, 10);
	io_harness_free(out);

	char req[2048];
	snprintf(req, sizeof req,
	         "{\"method\":\"run.start\",\"params\":{\"harness\":%llu,\"spec\":{"
	         "\"task\":{\"goal\":\"Create hello.txt saying hello, world.\",\"root\":\"%s\","
	         "\"verification\":[{\"kind\":\"workspace_file_contains\",\"file\":\"hello.txt\",\"text\":\"hello, world\"}]},"
	         "\"provider\":{\"name\":\"scripted\",\"script\":{\"turns\":[{\"text\":\"Writing the greeting.\","
	         "\"tool_calls\":[{\"name\":\"write_file\",\"arguments\":{\"path\":\"hello.txt\",\"content\":\"hello, world\\n\"}}]}]}}}}}",
	         (unsigned long long)h, ws);
	out = io_harness_call(req);
	if (strncmp(out, "{\"ok\":true", 10) != 0) {
		fprintf(stderr, "run.start: %s\n", out);
		return 1;
	}
	char *run_id = field(out, "run_id");
	printf("run %s in %s\n", run_id, ws);
	io_harness_free(out);

	int rc = 1, done = 0;
	for (int waited = 0; !done && waited < 300; waited++) {
		char *batch = io_harness_poll(h, 100, 64);
		if (!batch)
			continue;
		/* Walk the array's top-level objects; an event's first "kind"
		   is its own (docs/abi.md, "Events"). */
		int depth = 0, in_str = 0;
		for (char *p = batch, *start = NULL; *p; p++) {
			if (in_str) {
				if (*p == '\\')
					p++;
				else if (*p == '"')
					in_str = 0;
				continue;
			}
			if (*p == '"')
				in_str = 1;
			else if (*p == '{' && depth++ == 0)
				start = p;
			else if (*p == '}' && --depth == 0) {
				char saved = p[1];
				p[1] = 0;
				char *kind = field(start, "kind");
				if (kind && strcmp(kind, "model_delta") != 0)
					printf("  %s\n", kind);
				if (kind && strcmp(kind, "done") == 0) {
					done = 1;
					rc = strstr(start, "\"outcome\":{\"kind\":\"success\"") ? 0 : 1;
					printf("outcome: %s\n", rc == 0 ? "success" : start);
				}
				free(kind);
				p[1] = saved;
			}
		}
		io_harness_free(batch);
	}
	if (!done)
		fprintf(stderr, "no outcome within 30s\n");
	io_harness_close(h, 5000);
	free(run_id);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", ws);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", ws);
	return rc;
}
