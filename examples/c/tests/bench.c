/*
 * Timing helper for the benchmarks of capi (capi/capi_test.go):
 *
 *   bench call N     N round trips of {"method":"version"} through
 *                    io_harness_call + io_harness_free; prints ns per call
 *   bench events N   queues N events on a harness (debug.emit) and drains
 *                    them with batch polls of 1000; prints seconds
 */
#include "common.h"

int main(int argc, char **argv) {
	if (argc != 3)
		FATAL("usage: bench call|events N");
	check_abi();
	long n = atol(argv[2]);
	if (strcmp(argv[1], "call") == 0) {
		for (int i = 0; i < 1000; i++) /* warm up */
			io_harness_free(io_harness_call("{\"method\":\"version\"}"));
		double t0 = now_s();
		for (long i = 0; i < n; i++)
			io_harness_free(io_harness_call("{\"method\":\"version\"}"));
		printf("%.1f\n", (now_s() - t0) * 1e9 / (double)n);
		return 0;
	}
	if (strcmp(argv[1], "events") == 0) {
		uint64_t h = open_harness(":memory:");
		double t0 = now_s();
		char *req = xsprintf("{\"method\":\"debug.emit\",\"params\":{\"harness\":%llu,\"count\":%ld}}", (unsigned long long)h, n);
		io_harness_free(call_ok(req));
		long got = 0;
		int finished = 0;
		while (!finished) {
			char *batch = io_harness_poll(h, 1000, 1000);
			if (!batch)
				FATAL("stalled after %ld events", got);
			size_t pos = 0;
			char *ev;
			while ((ev = next_event(batch, &pos))) {
				if (strstr(ev, "\"kind\":\"debug_done\""))
					finished = 1;
				else
					got++;
				free(ev);
			}
			io_harness_free(batch);
		}
		double took = now_s() - t0;
		if (got != n)
			FATAL("%ld events, want %ld", got, n);
		io_harness_close(h, 5000);
		printf("%.4f\n", took);
		free(req);
		return 0;
	}
	FATAL("unknown mode %s", argv[1]);
}
