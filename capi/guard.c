// The public entry points of libio_harness. Each is a few lines of C in
// front of its Go implementation (capi.go), for one reason: a process that
// forked after loading the library must get a clear error, not a hang.
// The Go runtime does not survive fork(): in the child, anything that
// needs a second Go thread (starting a run, waiting for an event) blocks
// forever. So no Go code runs in a forked child: these wrappers notice the
// fork (the pid differs from the one that loaded the library) and answer
// on their own.
//
// Building with -DIOH_NO_FORK_GUARD (CGO_CFLAGS) turns the check off; the
// tests build that variant once, to show the hang the guard prevents.

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_harness.h"
#include "_cgo_export.h"

static pid_t ioh_loaded_pid;

// Runs when the library is loaded, beside the Go runtime's own
// constructor; it only records the pid.
__attribute__((constructor)) static void ioh_record_pid(void) { ioh_loaded_pid = getpid(); }

static int ioh_forked(void) {
#ifdef IOH_NO_FORK_GUARD
	return 0;
#else
	return getpid() != ioh_loaded_pid;
#endif
}

static const char ioh_fork_envelope[] =
	"{\"ok\":false,\"error\":{\"code\":\"unavailable\",\"message\":\"io_harness was loaded before this process forked: "
	"the Go runtime inside the library does not survive fork(), and a call in the child could hang. Use the library "
	"only in the process that loaded it; a child must exec a new program first (posix_spawn, fork then exec).\","
	"\"retryable\":false,\"details\":{\"kind\":\"fork\"}}}";

uint32_t io_harness_abi_version(void) {
	return ((uint32_t)IO_HARNESS_ABI_MAJOR << 16) | (uint32_t)IO_HARNESS_ABI_MINOR;
}

char *io_harness_call(const char *request_json) {
	if (ioh_forked())
		return strdup(ioh_fork_envelope);
	// Measure at most one byte past the limit: a request that is too
	// large is refused without being read, let alone copied.
	size_t n = request_json ? strnlen(request_json, (size_t)IO_HARNESS_MAX_REQUEST_BYTES + 1) : 0;
	return ioh_go_call(request_json, n);
}

void io_harness_free(char *s) {
	if (s == NULL)
		return;
	if (ioh_forked()) {
		free(s);
		return;
	}
	ioh_go_free(s);
}

char *io_harness_poll(uint64_t harness, int32_t timeout_ms, int32_t max_events) {
	if (ioh_forked())
		return NULL;
	return ioh_go_poll(harness, timeout_ms, max_events, NULL);
}

char *io_harness_poll2(uint64_t harness, int32_t timeout_ms, int32_t max_events, int32_t *status) {
	if (ioh_forked()) {
		if (status)
			*status = IO_HARNESS_FORKED;
		return NULL;
	}
	return ioh_go_poll(harness, timeout_ms, max_events, status);
}

int32_t io_harness_set_event_callback(uint64_t harness, io_harness_event_cb cb, void *user) {
	if (ioh_forked())
		return IO_HARNESS_FORKED;
	return ioh_go_set_event_callback(harness, cb, user);
}

int32_t io_harness_cancel(uint64_t handle) {
	if (ioh_forked())
		return IO_HARNESS_FORKED;
	return ioh_go_cancel(handle);
}

int32_t io_harness_close(uint64_t harness, int32_t timeout_ms) {
	if (ioh_forked())
		return IO_HARNESS_FORKED;
	return ioh_go_close(harness, timeout_ms);
}
