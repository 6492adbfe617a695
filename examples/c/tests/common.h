/*
 * Helpers shared by the C tests of io-harness: calling methods, checking
 * envelopes, splitting poll batches into events and reading the few
 * fields the tests need. Plain C11 + POSIX, no JSON library: the event
 * format puts "kind" before any nested object (docs/abi.md), so the first
 * "kind" of an event is its own.
 */
#ifndef IOH_TEST_COMMON_H
#define IOH_TEST_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io_harness.h"

static int ioh_failures __attribute__((unused)) = 0;

#define CHECK(cond, ...)                                                   \
	do {                                                                   \
		if (!(cond)) {                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                  \
			fprintf(stderr, "\n");                                         \
			ioh_failures++;                                                \
		}                                                                  \
	} while (0)

#define FATAL(...)                                                         \
	do {                                                                   \
		fprintf(stderr, "FATAL %s:%d: ", __FILE__, __LINE__);              \
		fprintf(stderr, __VA_ARGS__);                                      \
		fprintf(stderr, "\n");                                             \
		exit(2);                                                           \
	} while (0)

/* xsprintf returns a malloc'd formatted string. */
static inline char *xsprintf(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		FATAL("out of memory");
	va_end(ap);
	return s;
}

/* call sends a request and returns the envelope (free with io_harness_free). */
static inline char *call(const char *req) {
	char *out = io_harness_call(req);
	if (out == NULL)
		FATAL("io_harness_call returned NULL for %s", req);
	return out;
}

static inline int is_ok(const char *env) { return strncmp(env, "{\"ok\":true", 10) == 0; }

/* call_ok calls and fails the test unless the envelope is ok. */
static inline char *call_ok(const char *req) {
	char *out = call(req);
	if (!is_ok(out))
		FATAL("%s -> %s", req, out);
	return out;
}

/* str_field copies the first string value of "key" in json, or NULL. */
static inline char *str_field(const char *json, const char *key) {
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":\"", key);
	const char *p = strstr(json, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	const char *e = p;
	while (*e && !(*e == '"' && e[-1] != '\\'))
		e++;
	return strndup(p, (size_t)(e - p));
}

/* num_field reads the first integer value of "key" in json, or -1. */
static inline long long num_field(const char *json, const char *key) {
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(json, pat);
	if (!p)
		return -1;
	return strtoll(p + strlen(pat), NULL, 10);
}

/* error_code copies the error code of a failed envelope. */
static inline char *error_code(const char *env) { return str_field(env, "code"); }

/*
 * next_event finds the next top-level object of a JSON array at *pos,
 * returns a malloc'd copy and advances *pos; NULL at the end.
 */
static inline char *next_event(const char *arr, size_t *pos) {
	size_t i = *pos;
	while (arr[i] && arr[i] != '{')
		i++;
	if (!arr[i])
		return NULL;
	size_t start = i;
	int depth = 0, in_str = 0;
	for (; arr[i]; i++) {
		char c = arr[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
			continue;
		}
		if (c == '"')
			in_str = 1;
		else if (c == '{')
			depth++;
		else if (c == '}' && --depth == 0) {
			*pos = i + 1;
			return strndup(arr + start, i + 1 - start);
		}
	}
	FATAL("unterminated event in %s", arr);
}

/* stats_live returns strings_live from debug.stats. */
static inline long long stats_field(const char *key) {
	char *s = call_ok("{\"method\":\"debug.stats\"}");
	long long v = num_field(s, key);
	io_harness_free(s);
	return v;
}

/* read_file returns a file's content, NUL-terminated, or NULL. */
static inline char *read_file(const char *path) {
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	if (fread(buf, 1, (size_t)n, f) != (size_t)n)
		FATAL("read %s", path);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* replace returns s with every needle replaced, malloc'd. */
static inline char *replace(const char *s, const char *needle, const char *with) {
	size_t n = strlen(needle), w = strlen(with), count = 0;
	for (const char *p = strstr(s, needle); p; p = strstr(p + n, needle))
		count++;
	char *out = malloc(strlen(s) + count * w + 1), *o = out;
	for (const char *p = s;;) {
		const char *q = strstr(p, needle);
		if (!q) {
			strcpy(o, p);
			break;
		}
		memcpy(o, p, (size_t)(q - p));
		o += q - p;
		memcpy(o, with, w);
		o += w;
		p = q + n;
	}
	return out;
}

/* temp_dir makes a fresh directory under $TMPDIR or /tmp. */
static inline char *temp_dir(void) {
	const char *base = getenv("TMPDIR");
	char *tmpl = xsprintf("%s/ioh-c-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpl))
		FATAL("mkdtemp: %s", strerror(errno));
	return tmpl;
}

static inline double now_s(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* check_abi performs the version handshake. */
static inline void check_abi(void) {
	uint32_t v = io_harness_abi_version();
	if ((v >> 16) != IO_HARNESS_ABI_MAJOR || (int)(v & 0xffff) < IO_HARNESS_ABI_MINOR)
		FATAL("library ABI %u.%u, header %d.%d", v >> 16, v & 0xffff, IO_HARNESS_ABI_MAJOR, IO_HARNESS_ABI_MINOR);
}

/* open_harness opens a harness over store and returns its handle. */
static inline uint64_t open_harness(const char *store) {
	char *req = xsprintf("{\"method\":\"harness.open\",\"params\":{\"store\":\"%s\"}}", store);
	char *out = call_ok(req);
	long long h = num_field(out, "harness");
	if (h <= 0)
		FATAL("harness.open: %s", out);
	io_harness_free(out);
	free(req);
	return (uint64_t)h;
}

/* The scripted single-step task that every C example and test can run. */
#define SUCCESS_SPEC \
	"{\"task\":{\"goal\":\"Create hello.txt saying hello, world.\",\"root\":\"%s\"," \
	"\"verification\":[{\"kind\":\"workspace_file_contains\",\"file\":\"hello.txt\",\"text\":\"hello, world\"}]}," \
	"\"provider\":{\"name\":\"scripted\",\"script\":{\"turns\":[{\"text\":\"Writing the greeting.\"," \
	"\"tool_calls\":[{\"name\":\"write_file\",\"arguments\":{\"path\":\"hello.txt\",\"content\":\"hello, world\\n\"}}]}]}}}"

/* A task whose policy asks before any write, so the run waits for approval.resolve. */
#define ASK_SPEC \
	"{\"task\":{\"goal\":\"Write the config.\",\"root\":\"%s\"," \
	"\"verification\":[{\"kind\":\"workspace_file_contains\",\"file\":\"config.toml\",\"text\":\"on\"}]}," \
	"\"provider\":{\"name\":\"scripted\",\"script\":{\"turns\":[{\"text\":\"Writing.\"," \
	"\"tool_calls\":[{\"name\":\"write_file\",\"arguments\":{\"path\":\"config.toml\",\"content\":\"on\\n\"}}]}," \
	"{\"text\":\"Done.\"}]}}," \
	"\"policy\":{\"version\":1,\"defaults\":{\"read\":\"allow\",\"write\":\"ask\",\"exec\":\"deny\",\"net\":\"deny\"}}}"

/* A task whose model takes a minute (it honours cancellation). */
#define SLOW_SPEC \
	"{\"task\":{\"goal\":\"Wait.\",\"root\":\"%s\"," \
	"\"verification\":[{\"kind\":\"workspace_file_contains\",\"file\":\"x.txt\",\"text\":\"x\"}]}," \
	"\"provider\":{\"name\":\"scripted\",\"script\":{\"turns\":[{\"text\":\"slow\",\"latency_ms\":60000}]}}}"

#endif
