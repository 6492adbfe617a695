/*
 * fork: a C host that loaded the library, with a run going, forks. The Go
 * runtime does not survive fork(): in the child, a call that needs a Go
 * thread hangs. The library must answer the child at once with a clear
 * error instead (io_harness_call: "unavailable", details.kind "fork";
 * the others IO_HARNESS_FORKED or NULL), and the parent must go on.
 *
 * With the argument "control" the library under test was built without
 * the guard (-DIOH_NO_FORK_GUARD): the child gets no clear error; it
 * usually hangs in run.start until an alarm ends it, and sometimes starts
 * a run in a runtime missing its threads. The program reports which.
 */
#include "common.h"

#include <signal.h>
#include <sys/wait.h>

int main(int argc, char **argv) {
	int control = argc > 1 && strcmp(argv[1], "control") == 0;
	check_abi();
	uint64_t h = open_harness(":memory:");
	char *ws = temp_dir();
	char *spec = xsprintf(SLOW_SPEC, ws);
	char *req = xsprintf("{\"method\":\"run.start\",\"params\":{\"harness\":%llu,\"spec\":%s}}", (unsigned long long)h, spec);
	char *out = call_ok(req);
	long long run = num_field(out, "run");
	io_harness_free(out);

	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		FATAL("fork: %s", strerror(errno));
	if (pid == 0) {
		/* The child. A hang must not outlive the test. */
		alarm(control ? 5 : 20);
		char *again = io_harness_call(req);
		if (control) {
			printf("fork control: %s: run.start returned in the child: %s\n",
			       again && strstr(again, "\"kind\":\"fork\"") ? "fork error" : "no fork error", again ? again : "(null)");
			fflush(stdout);
			_exit(3);
		}
		int bad = 0;
		if (!again || !strstr(again, "\"code\":\"unavailable\"") || !strstr(again, "\"kind\":\"fork\"") ||
		    !strstr(again, "forked")) {
			fprintf(stderr, "child: run.start answered %s\n", again ? again : "(null)");
			bad = 1;
		}
		io_harness_free(again);
		int32_t st = 0;
		char *batch = io_harness_poll2(h, 1000, 10, &st);
		if (batch != NULL || st != IO_HARNESS_FORKED) {
			fprintf(stderr, "child: poll2 returned %s, status %d\n", batch ? batch : "(null)", st);
			bad = 1;
		}
		if (io_harness_poll(h, 1000, 10) != NULL || io_harness_cancel((uint64_t)run) != IO_HARNESS_FORKED ||
		    io_harness_close(h, 1000) != IO_HARNESS_FORKED || io_harness_set_event_callback(h, NULL, NULL) != IO_HARNESS_FORKED) {
			fprintf(stderr, "child: poll, cancel, close or set_event_callback did not refuse\n");
			bad = 1;
		}
		_exit(bad);
	}
	int status = 0;
	if (waitpid(pid, &status, 0) < 0)
		FATAL("waitpid: %s", strerror(errno));
	if (control) {
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
			printf("fork control: no fork error: the child hung in run.start until its alarm\n");
		else
			printf("fork control: the child ended with status %d, not by its alarm\n", status);
	} else {
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	}

	/* The parent goes on: cancel its run and see it end. */
	CHECK(io_harness_cancel((uint64_t)run) == IO_HARNESS_OK, "cancel in the parent");
	int done = 0;
	double deadline = now_s() + 30;
	while (!done && now_s() < deadline) {
		int32_t st = 0;
		char *batch = io_harness_poll2(h, 200, 100, &st);
		CHECK(st == IO_HARNESS_OK || st == IO_HARNESS_TIMEOUT, "poll2 status %d", st);
		if (batch) {
			done = strstr(batch, "\"kind\":\"done\"") != NULL;
			io_harness_free(batch);
		}
	}
	CHECK(done, "no done event in the parent");
	CHECK(io_harness_close(h, 10000) == IO_HARNESS_OK, "close");
	free(req), free(spec), free(ws);
	if (ioh_failures)
		return 1;
	printf("fork: ok\n");
	return 0;
}
