/*
 * Drift check: the hand-written public header and the header cgo generates
 * from the //export functions (the Go halves, ioh_go_*, that guard.c's
 * public functions call) are included together. If a declaration of one
 * clashes with the other, this file does not compile. The assignments
 * below pin each public function to the exact type the header promises,
 * and each Go half to the type guard.c calls it with.
 */
#include "io_harness.h"
#include "libio_harness.so.h"

int main(void) {
	uint32_t (*abi_version)(void) = io_harness_abi_version;
	char *(*call)(const char *) = io_harness_call;
	void (*free_)(char *) = io_harness_free;
	char *(*poll)(uint64_t, int32_t, int32_t) = io_harness_poll;
	int32_t (*set_cb)(uint64_t, io_harness_event_cb, void *) = io_harness_set_event_callback;
	int32_t (*cancel)(uint64_t) = io_harness_cancel;
	int32_t (*close_)(uint64_t, int32_t) = io_harness_close;
	char *(*poll2)(uint64_t, int32_t, int32_t, int32_t *) = io_harness_poll2;

	char *(*go_call)(const char *, size_t) = ioh_go_call;
	void (*go_free)(char *) = ioh_go_free;
	char *(*go_poll)(uint64_t, int32_t, int32_t, int32_t *) = ioh_go_poll;
	int32_t (*go_set_cb)(uint64_t, io_harness_event_cb, void *) = ioh_go_set_event_callback;
	int32_t (*go_cancel)(uint64_t) = ioh_go_cancel;
	int32_t (*go_close)(uint64_t, int32_t) = ioh_go_close;
	return !(abi_version && call && free_ && poll && set_cb && cancel && close_ && poll2 && go_call && go_free && go_poll &&
	         go_set_cb && go_cancel && go_close);
}
