/*
 * io_harness.h — the C ABI of io-harness, an embeddable AI-agent harness.
 *
 * The library is a Go c-shared library (libio_harness.so.1). Its C surface
 * is eight functions; every operation is a JSON method sent through
 * io_harness_call. The protocol — the JSON envelope, every method, every
 * event, the error codes and the host constraints — is specified in
 * docs/abi.md; this header only declares the entry points.
 *
 * HANDSHAKE. Call io_harness_abi_version() first: the major (value >> 16)
 * must equal IO_HARNESS_ABI_MAJOR exactly and the minor (value & 0xffff)
 * must be at least the minor your code needs.
 *
 * ENVELOPE. io_harness_call answers
 *     {"ok":true,"result":...}
 *     {"ok":false,"error":{"code":"snake_case","message":"...","retryable":bool,"details":{...}}}
 * with the request's "id" echoed. The codes are: invalid_json,
 * invalid_argument, unknown_method, not_found, conflict, cancelled,
 * deadline_exceeded, permission_denied, unavailable, abi_mismatch, internal.
 *
 * REQUESTS. A request is NUL-terminated UTF-8 of at most
 * IO_HARNESS_MAX_REQUEST_BYTES bytes, nesting objects and arrays at most
 * 1000 deep: anything else is refused (invalid_json, or invalid_argument
 * for the size) without being parsed.
 *
 * HOST TOOLS. A run may register tools the host implements ("tools" of
 * run.start): each call arrives as a "host_tool_call" event (poll or the
 * event callback) and is answered with the tool.resolve method, from the
 * callback itself or from any thread, within the tool's timeout.
 *
 * OWNERSHIP. Every char* the library returns (from io_harness_call and
 * io_harness_poll) belongs to the caller, who frees it with io_harness_free
 * and nothing else. Input strings are borrowed for the duration of the call
 * only. The string passed to an event callback is lent: valid only until
 * the callback returns; copy what you keep.
 *
 * THREADING. Every function may be called from any thread, concurrently.
 * Harness and run handles are integers (never pointers) and are never
 * reused: a stale handle is "not found", never a crash.
 *
 * HOST CONSTRAINTS (docs/abi.md, "Host constraints"). The Go runtime starts
 * when the library is loaded and can never be unloaded (dlclose is a
 * no-op). A process that forks after loading must exec before using the
 * library in the child: in a forked child every function refuses at once
 * (io_harness_call answers "unavailable" with details.kind "fork"; the
 * others return IO_HARNESS_FORKED or NULL) instead of hanging. Load at most one Go c-shared library per process.
 * The library reads no environment variable of its own (the Go runtime
 * reads GOGC, GOMAXPROCS, GODEBUG, GOTRACEBACK, GOMEMLIMIT at load time).
 * glibc only: musl dlopen of Go c-shared libraries is unsupported.
 */
#ifndef IO_HARNESS_H
#define IO_HARNESS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. */
#define IO_HARNESS_ABI_MAJOR 1
#define IO_HARNESS_ABI_MINOR 1

/* The largest request io_harness_call accepts, in bytes (16 MiB). */
#define IO_HARNESS_MAX_REQUEST_BYTES (16u << 20)

/* Status codes of the functions that return int32_t. */
#define IO_HARNESS_OK 0
#define IO_HARNESS_UNKNOWN_HANDLE (-1)  /* no such harness or run (or long gone) */
#define IO_HARNESS_CLOSED (-2)          /* the harness is closed */
#define IO_HARNESS_TIMEOUT (-3)         /* close: runs still ending after timeout_ms */
#define IO_HARNESS_ILLEGAL_CONTEXT (-4) /* close or set_event_callback from inside this harness's callback */
#define IO_HARNESS_FORKED (-5)          /* called in a process forked after the library was loaded */

/*
 * An event callback. event_json is one event object (see docs/abi.md,
 * "Events"), valid only during the call. user is the pointer given to
 * io_harness_set_event_callback, passed back verbatim.
 */
typedef void (*io_harness_event_cb)(void *user, const char *event_json);

/*
 * Returns (major << 16) | minor. Cannot fail; allocates nothing.
 */
uint32_t io_harness_abi_version(void);

/*
 * Runs one JSON request {"method": "...", "params": {...}, "id": ...} and
 * returns its envelope, never NULL (except when out of memory). Free the
 * result with io_harness_free. Calls are non-blocking or bounded: run.start
 * returns as soon as the run has its id; the run goes on in the library.
 * request_json must be NUL-terminated UTF-8; it is not retained.
 */
char *io_harness_call(const char *request_json);

/*
 * Frees a string returned by io_harness_call or io_harness_poll. NULL is
 * ignored. Never free a string passed to a callback.
 */
void io_harness_free(char *s);

/*
 * Waits up to timeout_ms (negative: without limit; 0: do not wait) for the
 * first event of any run of the harness, then returns it with up to
 * max_events - 1 more already queued (max_events <= 0 means 256), as a JSON
 * array the caller frees. Returns NULL on timeout, for an unknown handle,
 * and after close — except once: the first poll after (or woken by)
 * io_harness_close returns [{"kind":"closed"}]. Use one poller per harness.
 * While an event callback is registered, poll returns NULL after its
 * timeout: events go to the callback.
 *
 * The queue is bounded (queue_size of harness.open, default 1024): while it
 * is full, the runs producing events wait. A host must keep polling (or
 * keep a callback registered) while runs are live.
 */
char *io_harness_poll(uint64_t harness, int32_t timeout_ms, int32_t max_events);

/*
 * io_harness_poll that says why it returned what it did (ABI 1.1). When
 * status is not NULL, *status is set to IO_HARNESS_OK when events are
 * returned; IO_HARNESS_TIMEOUT when none came within timeout_ms (or a
 * callback takes them); IO_HARNESS_CLOSED when the harness is closed and
 * its "closed" event was already returned; IO_HARNESS_UNKNOWN_HANDLE when
 * the handle is no harness (or one closed long ago); IO_HARNESS_FORKED in a
 * forked child. A poller loop stops on anything but OK and TIMEOUT.
 */
char *io_harness_poll2(uint64_t harness, int32_t timeout_ms, int32_t max_events, int32_t *status);

/*
 * Push mode (optional). Registers cb to receive every event of the harness,
 * one event per call, in order, from one dispatcher thread per harness.
 * The callback must copy what it needs and return quickly; it may call any
 * function except io_harness_close and io_harness_set_event_callback on the
 * same harness (those return IO_HARNESS_ILLEGAL_CONTEXT there). cb == NULL
 * unregisters. When this function returns, the previous callback is not
 * running and will never be called again, so its user data may be freed.
 * Returns IO_HARNESS_OK, IO_HARNESS_UNKNOWN_HANDLE, IO_HARNESS_CLOSED or
 * IO_HARNESS_ILLEGAL_CONTEXT.
 */
int32_t io_harness_set_event_callback(uint64_t harness, io_harness_event_cb cb, void *user);

/*
 * Cancels a run, or every run of a harness when given a harness handle.
 * Never blocks, idempotent, safe from any thread (also from a thread that
 * handles Ctrl-C). Each cancelled run still ends with its one "done" event.
 * Returns IO_HARNESS_OK, IO_HARNESS_UNKNOWN_HANDLE or IO_HARNESS_CLOSED.
 */
int32_t io_harness_cancel(uint64_t handle);

/*
 * Closes a harness: cancels its runs, wakes its poller, unregisters its
 * callback (no callback fires after this returns, even on timeout), waits
 * up to timeout_ms (negative: without limit) for its runs to end, then
 * closes its store. Idempotent: after IO_HARNESS_TIMEOUT, call it again to
 * wait again. Returns IO_HARNESS_OK, IO_HARNESS_UNKNOWN_HANDLE,
 * IO_HARNESS_TIMEOUT or IO_HARNESS_ILLEGAL_CONTEXT.
 */
int32_t io_harness_close(uint64_t harness, int32_t timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* IO_HARNESS_H */
