/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/client - the host side of the wire protocol (src/proto) to msb-agent,
 * usually reached through msb-shim at `<state dir>/agent.sock`.
 *
 * Trust: the agent runs where guest code can reach it, so every byte from it
 * is untrusted input. Frames go through the proto reader and decoders; then
 * channels, directions, credit, the output budget and every count are
 * checked here. A violation fails the call with MSB_E_PROTOCOL and closes the
 * connection; it never crashes or over-allocates the host.
 *
 * Thread-safety: a client serves one call at a time (calls from several
 * threads are serialised by a mutex). Open one client per concurrent call.
 * A client made from a path reconnects by itself on the next call after its
 * connection was closed (protocol violation, lost agent, abandoned exec).
 */
#ifndef MSB_CLIENT_CLIENT_H
#define MSB_CLIENT_CLIENT_H

#include <msb/sandbox.h>

#include "proto/proto.h"

typedef struct msb_client msb_client;

/* Connect to the agent's unix socket and exchange HELLO within `timeout`
 * seconds. Errors: MSB_E_VALUE (bad path or timeout), MSB_E_RUNTIME (cannot
 * connect), MSB_E_TIMEOUT, MSB_E_PROTOCOL (bad or refused HELLO). */
int msb_client__connect(const char *socket_path, double timeout, msb_client **out, msb_error **err);
/* A client of the agent at socket_path that has not connected yet: its
 * first call connects (MSB_E_VALUE for no path). */
int msb_client__open(const char *socket_path, msb_client **out, msb_error **err);
/* The same over a connected stream socket, which the client owns from now on
 * (closed on failure too). Such a client does not reconnect. */
int msb_client__connect_fd(int fd, double timeout, msb_client **out, msb_error **err);
/* Connected, and nothing unasked-for waiting on the connection between
 * calls (the agent's end reads as readable): false drops the connection.
 * A holder of a kept connection asks before a call, to renew a lost one
 * rather than fail the call on it. */
bool msb_client__idle_ok(msb_client *c);
/* Close the connection (the agent kills any exec still running on it). NULL ok. */
void msb_client__free(msb_client *c);

/* The negotiated protocol version. */
uint16_t msb_client__version(const msb_client *c);

/*
 * Run req through the agent; exec and exec_bounded in one (checklist 9.1-9.8):
 *
 *  - exactly one of req->argv (passed natively) and req->shell (run by the
 *    guest's `/bin/sh -c`); working directory relative to the storage base;
 *    req->env added to PATH and HOME (same key replaces);
 *  - bytes exact and binary-safe; exit_code is the guest's status, or 128+N
 *    with term_signal N when a signal killed it;
 *  - req->max_output_bytes > 0 makes it bounded: the agent forwards at most
 *    that many stdout+stderr bytes and this side never grants nor buffers
 *    more; output beyond it is dropped and out->truncated set (the agent
 *    closes the pipes, so the workload meets SIGPIPE; see protocol.md);
 *  - unbounded output is capped at MSB_CLIENT_MAX_OUTPUT, the host's budget
 *    for what one exec's guest may make it hold (docs/security.md, "Budgets
 *    on guest bytes"): past it the exec is abandoned (the connection is
 *    dropped, so the agent kills the command) with MSB_E_RUNTIME, "exec
 *    output exceeds N bytes";
 *  - req->timeout elapsed: the agent kills the command's process group and
 *    every process descending from it, this side waits up to
 *    MSB_CLIENT_KILL_GRACE for its report, and the call fails with
 *    MSB_E_TIMEOUT carrying msb_error_timeout(): signal MSB_SIGNAL_SENT when
 *    the agent saw nothing of the group survive, else MSB_SIGNAL_UNKNOWN,
 *    and the partial output (stdout then stderr, at most
 *    MSB_CLIENT_PARTIAL_MAX bytes);
 *  - req->cancel triggered: CANCEL is sent (same kill), MSB_E_CANCELLED;
 *  - working directory refusals: MSB_E_VALUE (escapes the base),
 *    MSB_E_NOT_FOUND, MSB_E_NOT_DIRECTORY, MSB_E_PERMISSION.
 *
 * A program that cannot be executed is not an error: exit_code 127 (not
 * found) or 126, with the reason on stderr, as a shell would report it.
 * `out` is written only on success; free it with msb_exec_result_clear().
 */
int msb_client__exec(msb_client *c, const msb_exec_request *req, msb_exec_result *out,
		     msb_error **err);
/* The same within an absolute deadline (msb__now_ns() clock) that the caller
 * took when its call began: reconnecting, HELLO and the command all come out
 * of it, and the agent is given what is left. req->timeout still names the
 * bound in a timeout's message. */
int msb_client__exec_until(msb_client *c, const msb_exec_request *req, int64_t deadline,
			   msb_exec_result *out, msb_error **err);

/* The same with MSB_PROTO_EXEC_FILE: req->argv is a file-plane request the
 * agent serves itself (agent/files.c, docs/internals/vm.md); the result is
 * the request's exit status and output. */
int msb_client__exec_file(msb_client *c, const msb_exec_request *req, msb_exec_result *out,
			  msb_error **err);

#define MSB_CLIENT_MAX_OUTPUT ((uint64_t)64 << 20) /* 64 MiB, unbounded exec */
#define MSB_CLIENT_PARTIAL_MAX ((size_t)1 << 20)   /* timeout payload */
#define MSB_CLIENT_KILL_GRACE 3.0		   /* seconds */

/* One process of a snapshot. */
typedef struct msb_client_proc {
	uint32_t pid, ppid, pgid, sid, uid;
	uint64_t start_ticks; /* clock ticks after boot (/proc/PID/stat field 22) */
	char state;	      /* R, S, D, Z, ... */
	bool argv_truncated;
	char comm[MSB_PROTO_MAX_COMM + 1];
	char **argv; /* msb_strv; empty for kernel threads and zombies */
} msb_client_proc;

/* The host's budget for one process snapshot (docs/security.md, "Budgets on
 * guest bytes"), besides MSB_PROTO_MAX_PS_ENTRIES processes of at most
 * MSB_PROTO_MAX_PS_ARGV command-line bytes each (the request's bounds; more
 * is a protocol violation): command-line bytes and arguments in all. */
#define MSB_CLIENT_PS_MAX_ARGV_BYTES ((size_t)4 << 20)
#define MSB_CLIENT_PS_MAX_ARGS 65536u

/* The process table inside the sandbox, within the bounds above; past the
 * budget MSB_E_RUNTIME, "process snapshot exceeds ...", and the connection
 * is dropped. *procs is an array of *n entries; free with
 * msb_client__procs_free(). */
int msb_client__ps(msb_client *c, double timeout, msb_client_proc **procs, size_t *n,
		   msb_error **err);
void msb_client__procs_free(msb_client_proc *procs, size_t n);

/* Round trip a PING. */
int msb_client__ping(msb_client *c, double timeout, msb_error **err);

/* Give the sandbox the host name `hostname` (IDENTITY: the agent sets it and
 * rewrites the `host` image's /etc/hostname and /etc/hosts); 0 once the
 * agent confirmed. MSB_E_VALUE for a name the protocol does not carry. */
int msb_client__identity(msb_client *c, const char *hostname, double timeout, msb_error **err);

#endif
