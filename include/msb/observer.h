/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/observer.h - the observer seam (checklist section 17).
 *
 * Ten immutable events, joined by SandboxKey and by `call` (the host-minted
 * tool-call id). An observer is a struct of optional callbacks: NULL slots are
 * ignored. Events are passed as const pointers valid only for the duration of
 * the callback - copy what you keep.
 *
 * An observer cannot fail a call: a callback's non-zero return is contained
 * and reported through the log callback, never to the caller (17.17).
 * Callbacks are entered from whichever thread serves the call, possibly
 * several at once: hand events to a thread-safe queue and do no slow I/O.
 * With no observer registered, no event is built (17.18).
 *
 * Failures are recorded by the error's seed name, never its message (17.16).
 */
#ifndef MSB_OBSERVER_H
#define MSB_OBSERVER_H

#include <msb/common.h>
#include <msb/error.h>
#include <msb/key.h>
#include <msb/spec.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

/* SandboxAcquired: a served or refused acquire (17.6). */
typedef struct msb_ev_sandbox_acquired {
	const msb_key *key;
	const msb_spec *spec;
	const char *refusal;	 /* error name, NULL when served */
	const char *call;	 /* NULL outside a call */
	const char *backend;	 /* serving backend, NULL when refused */
	const char *instance_id; /* NULL when refused */
} msb_ev_sandbox_acquired;

/* One backend's answer inside a disposal. */
typedef struct msb_ev_disposal_result {
	const char *backend;
	bool failed;
	msb_disposal_code code; /* meaningful when failed */
} msb_ev_disposal_result;

/* SandboxDisposed (17.7). */
typedef struct msb_ev_sandbox_disposed {
	const msb_key *key;
	const char *kind;	 /* NULL = every kind */
	const char *instance_id; /* NULL = every instance */
	bool disposed;		 /* every backend reported success */
	const msb_ev_disposal_result *results;
	size_t n_results;
	const char *origin; /* "host" or "framework" */
	const char *call;
} msb_ev_sandbox_disposed;

/* ScopeDisposed (17.8): no key, a conversation and a count. */
typedef struct msb_ev_scope_disposed {
	const char *scope;
	const char *thread_id;
	uint64_t disposed;
	uint64_t undisposed;
} msb_ev_scope_disposed;

/* EgressObserved (17.9): one proxy decision. call is always NULL. */
typedef enum msb_egress_decision {
	MSB_EGRESS_ALLOW = 0,
	MSB_EGRESS_DENY = 1,
} msb_egress_decision;

struct msb_egress_record {
	int64_t time_ns; /* CLOCK_REALTIME */
	msb_egress_decision decision;
	const char *host;
	uint16_t port;
	const char *method; /* NULL where the verb is not visible (CONNECT tunnels) */
	const char *reason; /* short token, e.g. "not-allowlisted", "non-global-address" */
	uint64_t bytes_up;
	uint64_t bytes_down;
};
typedef struct msb_ev_egress_observed {
	const msb_key *key;
	const struct msb_egress_record *record;
	const char *call; /* always NULL */
} msb_ev_egress_observed;

/* HostToolCalled (17.10). */
typedef struct msb_ev_host_tool_called {
	const char *tool; /* bounded to 120 bytes when guest-supplied */
	bool tool_guest_influenced;
	const char *sink;    /* the declaration's sink leg, NULL = none */
	const char *outcome; /* "result", "refused", "error" */
	uint64_t response_bytes;
	const char *refusal; /* the sanitised sentence the guest got; guest-influenced */
	const msb_key *key;  /* may be NULL */
	const char *call;
} msb_ev_host_tool_called;

/* One process in a snapshot. */
typedef struct msb_ev_process {
	int64_t pid;
	int64_t ppid;
	uint64_t start_ticks;
	int64_t uid;
	const char *argv; /* space-joined, bounded */
} msb_ev_process;

/* ProcessesObserved (17.11). */
typedef struct msb_ev_processes_observed {
	const msb_key *key;
	const char *call;
	const char *phase; /* "before-launch", "after-launch", "before-signal", "after-cleanup" */
	bool available;
	bool complete;
	const msb_ev_process *processes;
	size_t n_processes;
} msb_ev_processes_observed;

/* ProcessCleanup (17.11). */
typedef struct msb_ev_process_cleanup {
	const msb_key *key;
	const char *call;
	msb_signal_outcome signal;
	size_t targets_signalled;
	size_t confirmations;
	const msb_ev_process *survivors;
	size_t n_survivors;
	bool unclean;
} msb_ev_process_cleanup;

/* StoreFileRead (17.12). */
typedef struct msb_ev_store_file_read {
	const char *path;
	const char *outcome; /* "read", "absent", "refused" */
	msb_integrity integrity;
	const msb_key *key;
	const char *call;
} msb_ev_store_file_read;

/* OutputsCollected (17.13). */
typedef struct msb_ev_outputs_collected {
	const msb_key *key;
	const char *call;
	const char *const *landed; /* names, n_landed of them */
	size_t n_landed;
	uint64_t bytes;
	const char *refusal; /* error name, NULL on success */
} msb_ev_outputs_collected;

/* ToolCallEnded (17.14, 17.15). */
typedef struct msb_ev_tool_call_ended {
	const char *call; /* never NULL */
	const msb_key *const *keys;
	size_t n_keys;
	const char *outcome; /* "result", "refusal", an error name, or "cancelled" */
	bool fed;	     /* false: the call read nothing that carried text */
	msb_integrity fed_weakest;
	size_t fed_count;
} msb_ev_tool_call_ended;

typedef struct msb_observer {
	unsigned version;
	void *userdata;
	int (*sandbox_acquired)(void *ud, const msb_ev_sandbox_acquired *ev);
	int (*sandbox_disposed)(void *ud, const msb_ev_sandbox_disposed *ev);
	int (*scope_disposed)(void *ud, const msb_ev_scope_disposed *ev);
	int (*egress_observed)(void *ud, const msb_ev_egress_observed *ev);
	int (*host_tool_called)(void *ud, const msb_ev_host_tool_called *ev);
	int (*processes_observed)(void *ud, const msb_ev_processes_observed *ev);
	int (*process_cleanup)(void *ud, const msb_ev_process_cleanup *ev);
	int (*store_file_read)(void *ud, const msb_ev_store_file_read *ev);
	int (*outputs_collected)(void *ud, const msb_ev_outputs_collected *ev);
	int (*tool_call_ended)(void *ud, const msb_ev_tool_call_ended *ev);
} msb_observer;
#define MSB_OBSERVER_VERSION 1
#define MSB_OBSERVER_INIT                                                                          \
	{                                                                                          \
		MSB_OBSERVER_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,  \
			NULL                                                                       \
	}

/*
 * A JSON-lines recorder: every event becomes one line {"event": "...", ...}
 * written with a single write(2) to `fd` (which it does not close), so
 * concurrent events never interleave. Fill *out with an observer whose
 * userdata is the recorder; free the recorder after the last event.
 */
typedef struct msb_jsonl_recorder msb_jsonl_recorder;
MSB_EXTERN int msb_jsonl_recorder_new(int fd, msb_jsonl_recorder **rec, msb_observer *out,
				      msb_error **err);
MSB_EXTERN void msb_jsonl_recorder_free(msb_jsonl_recorder *rec);

MSB_END_DECLS

#endif
