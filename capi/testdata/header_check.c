/*
 * Drift check: the hand-written public header and the header cgo generates
 * from the //export functions are included together. If a prototype of
 * one disagrees with the other (a type, a const, a parameter), this file
 * does not compile. The assignments below also pin each function to the
 * exact type the public header promises.
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
	return !(abi_version && call && free_ && poll && set_cb && cancel && close_);
}
