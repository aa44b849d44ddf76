/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/sandbox.h - the guest handle (checklist section 9).
 *
 * An msb_sandbox is what acquire hands out: commands, a confined file plane
 * relative to a working directory, and cleanup primitives. Every operation
 * exists on every sandbox; one a backend cannot serve fails with
 * MSB_E_NOT_IMPLEMENTED and a message naming the backend and the reason.
 *
 * The msb_sandbox_* functions validate their arguments (timeouts finite and
 * positive, paths non-NULL) before the backend sees them.
 *
 * Working directories of the file plane: NULL or "." is the storage base; a
 * relative path is a child of it; an absolute path is accepted only inside
 * the base (legacy addressing, 10.8). exec is not confined: its working
 * directory may be any directory of the guest (msb_exec_request).
 *
 * Thread-safety: a sandbox handle may be used from several threads at once
 * when its backend says so (every backend shipped here does).
 */
#ifndef MSB_SANDBOX_H
#define MSB_SANDBOX_H

#include <msb/common.h>
#include <msb/error.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

typedef struct msb_sandbox msb_sandbox;
typedef struct msb_cancel msb_cancel;

/* ---- Cancellation token (checklist 24.2). -------------------------------- */

MSB_EXTERN int msb_cancel_new(msb_cancel **out, msb_error **err);
/* Request cancellation; wakes every wait that watches the token. Idempotent. */
MSB_EXTERN void msb_cancel_trigger(msb_cancel *c);
MSB_EXTERN bool msb_cancel_requested(const msb_cancel *c);
/* An fd that becomes readable once the token is triggered (for poll loops). */
MSB_EXTERN int msb_cancel_fd(const msb_cancel *c);
MSB_EXTERN void msb_cancel_free(msb_cancel *c);

/* ---- terminals ------------------------------------------------------------ */

/*
 * A terminal's size that the caller can change while a command runs on it
 * (msb_exec_io.tty). Rows and columns are each 1..MSB_TTY_MAX_DIM.
 */
typedef struct msb_tty msb_tty;
#define MSB_TTY_MAX_DIM 4096u

/* MSB_E_VALUE when rows or cols is outside 1..MSB_TTY_MAX_DIM. */
MSB_EXTERN int msb_tty_new(unsigned rows, unsigned cols, msb_tty **out, msb_error **err);
/* Set a new size (clamped into 1..MSB_TTY_MAX_DIM); the command's terminal
 * follows and its foreground process group gets SIGWINCH. Async-signal-safe
 * (a SIGWINCH handler may call it) and thread-safe. NULL ok. */
MSB_EXTERN void msb_tty_resize(msb_tty *t, unsigned rows, unsigned cols);
/* The current size. */
MSB_EXTERN void msb_tty_size(const msb_tty *t, unsigned *rows, unsigned *cols);
/* For backends: a descriptor that becomes readable after a resize, and the
 * call that drains it and answers the size (true when it was resized since
 * the last call). */
MSB_EXTERN int msb_tty_fd(const msb_tty *t);
MSB_EXTERN bool msb_tty_take_resize(msb_tty *t, unsigned *rows, unsigned *cols);
MSB_EXTERN void msb_tty_free(msb_tty *t);

/* ---- exec ---------------------------------------------------------------- */

/*
 * Output handed to the caller as it arrives (msb_exec_io.output): stream 1
 * (stdout) or 2 (stderr), len >= 1 bytes, valid for the call. Called on the
 * exec's thread; while it runs no more output is read, so a slow consumer
 * slows the workload (flow control) rather than filling memory. A negative
 * return abandons the exec: it fails with that code (MSB_E_*), and the
 * command is killed.
 */
typedef int (*msb_exec_output_fn)(void *userdata, int stream, const uint8_t *bytes, size_t len);

/*
 * Streaming and terminals (msb_exec_request.io; version-guarded). Each member
 * is optional; a backend that cannot serve one refuses the exec with
 * MSB_E_NOT_IMPLEMENTED, naming itself and what it cannot do - never by
 * ignoring it.
 *
 *  - stdin_fd >= 0: the command's stdin is read from this descriptor while
 *    it runs, as the workload consumes it (never read whole first), and its
 *    end of file is passed on. Any pollable descriptor: pipe, socket,
 *    terminal, regular file; it is not closed, and its O_NONBLOCK flag is
 *    not changed. Exclusive with stdin_data.
 *  - output: stdout and stderr go to it instead of the result, whose
 *    buffers are then empty. Nothing is held for the caller, so the
 *    unbounded exec's hold cap (64 MiB on ns) does not apply; a bounded
 *    exec's max_output_bytes does.
 *  - tty: the command runs on a pseudo-terminal of this size, allocated
 *    inside the sandbox, as its session's controlling terminal; stdout and
 *    stderr are both the terminal (all output is stream 1, with the
 *    terminal's line discipline: "\n" becomes "\r\n"); the end of stdin
 *    is typed as the terminal's end-of-file character (^D), and no stdin at
 *    all reads as that. Resizes of `tty` reach the terminal while the
 *    command runs.
 */
typedef struct msb_exec_io {
	unsigned version;
	int stdin_fd;
	msb_exec_output_fn output;
	void *userdata;
	msb_tty *tty;
} msb_exec_io;
#define MSB_EXEC_IO_VERSION 1
#define MSB_EXEC_IO_INIT                                                                           \
	{                                                                                          \
		MSB_EXEC_IO_VERSION, -1, NULL, NULL, NULL                                          \
	}

/* What a sandbox's exec serves of msb_exec_io (msb_sandbox_exec_io). */
#define MSB_EXEC_CAN_STDIN_FD 0x1u /* msb_exec_io.stdin_fd */
#define MSB_EXEC_CAN_OUTPUT 0x2u   /* msb_exec_io.output */
#define MSB_EXEC_CAN_TTY 0x4u	   /* msb_exec_io.tty */

/* Bounds on an exec's environment (msb_exec_env_check). */
#define MSB_EXEC_ENV_MAX 1024u		    /* entries */
#define MSB_EXEC_ENV_MAX_NAME 256u	    /* bytes of one name */
#define MSB_EXEC_ENV_MAX_BYTES (48u * 1024) /* bytes of all entries together */

typedef struct msb_exec_request {
	unsigned version;
	/* Exactly one of argv (NULL-terminated, passed natively, never
	 * shell-split) and shell (a command line for the guest shell). */
	const char *const *argv;
	const char *shell;
	/* NULL = "." (the storage base). Any existing directory of the guest:
	 * absolute as it is, relative to the storage base. One that cannot be
	 * entered is not an error of the call: the command does not run, the
	 * exit code is 126 and stderr says why (docs/cli-exec.md). */
	const char *working_directory;
	/* Extra "NAME=VALUE" entries, NULL-terminated, may be NULL; checked by
	 * msb_exec_env_check (reserved names refused). */
	const char *const *env;
	const uint8_t *stdin_data; /* may be NULL */
	size_t stdin_len;
	double timeout;		   /* seconds; finite and > 0 */
	uint64_t max_output_bytes; /* exec_bounded only: combined stdout+stderr budget */
	msb_cancel *cancel;	   /* may be NULL */
	/* version 2 */
	const msb_exec_io *io; /* NULL: stdin from stdin_data, output in the result */
} msb_exec_request;
#define MSB_EXEC_REQUEST_VERSION 2
#define MSB_EXEC_REQUEST_INIT                                                                      \
	{                                                                                          \
		MSB_EXEC_REQUEST_VERSION, NULL, NULL, NULL, NULL, NULL, 0, 30.0, 0, NULL, NULL     \
	}

/*
 * Check an exec's environment as every exec does before a backend sees it:
 * at most MSB_EXEC_ENV_MAX entries and MSB_EXEC_ENV_MAX_BYTES in all; each
 * "NAME=VALUE" with a non-empty NAME of at most MSB_EXEC_ENV_MAX_NAME bytes
 * (NAME holds no '='; a C string holds no NUL). Reserved names are refused
 * with the reason: the egress proxy's HTTP_PROXY, HTTPS_PROXY, http_proxy,
 * https_proxy, NO_PROXY and no_proxy (the sandbox sets them, docs/egress.md),
 * and the host-tool launcher's PYTHONNOUSERSITE; PYTHONPATH is accepted only
 * when the launcher would keep every entry of it (absolute, canonical, no
 * empty entry: docs/hosttools.md), so that nothing is dropped silently.
 * MSB_E_VALUE naming the entry. NULL env is fine.
 */
MSB_EXTERN int msb_exec_env_check(const char *const *env, msb_error **err);

typedef struct msb_exec_result {
	uint8_t *stdout_bytes; /* exact program bytes, NUL-terminated for convenience */
	size_t stdout_len;
	uint8_t *stderr_bytes;
	size_t stderr_len;
	int exit_code;	 /* the guest's status; 128+N when killed by signal N */
	int term_signal; /* N when killed by a signal, else 0 */
	bool truncated;	 /* exec_bounded: output stopped at the budget */
	/*
	 * What the sandbox's resource limits did during this exec, as the
	 * backend observed it from outside (docs/ns.md "Limits"; a backend
	 * without limits leaves them false). The sandbox keeps serving after
	 * each. Limits are per sandbox, not per exec: with concurrent execs on
	 * one sandbox each of them may see a flag another one caused.
	 */
	bool oom_killed;     /* the memory limit's OOM killer killed a process */
	bool pids_exhausted; /* the pids limit refused at least one fork/clone */
	bool no_space;	     /* after the exec the writable layer or the storage
			      * base had no free space (or inodes) left: a write
			      * needing more failed with ENOSPC */
} msb_exec_result;

/* Free the buffers and zero the struct. */
MSB_EXTERN void msb_exec_result_clear(msb_exec_result *r);
/*
 * UTF-8 decode with one U+FFFD per maximal invalid subpart, like Python's
 * errors="replace" (9.6): b"\xff\x00ok" -> "\xef\xbf\xbd" "\x00ok". Newly
 * allocated and NUL-terminated, but the text may itself contain NUL bytes
 * (every NUL of the input is kept): use msb_text_from_bytes_len() when the
 * bytes may hold a NUL. NULL on allocation failure or when bytes is NULL
 * with len > 0.
 */
MSB_EXTERN char *msb_text_from_bytes(const uint8_t *bytes, size_t len);
/* The same, and *text_len (may be NULL) receives the text's length in bytes. */
MSB_EXTERN char *msb_text_from_bytes_len(const uint8_t *bytes, size_t len, size_t *text_len);

/*
 * Run a command. On the caller's bound expiring: MSB_E_TIMEOUT, and only then
 * (9.4). On cancel: MSB_E_CANCELLED.
 */
MSB_EXTERN int msb_sandbox_exec(msb_sandbox *sb, const msb_exec_request *req, msb_exec_result *out,
				msb_error **err);
/* exec with req->max_output_bytes (> 0) enforced by the backend before
 * buffering; output beyond it is dropped and result.truncated set (23.24). */
MSB_EXTERN int msb_sandbox_exec_bounded(msb_sandbox *sb, const msb_exec_request *req,
					msb_exec_result *out, msb_error **err);
/* RUN_CODE (9.9, 9.10). */
MSB_EXTERN int msb_sandbox_run_code(msb_sandbox *sb, const char *code, double timeout,
				    msb_cancel *cancel, msb_exec_result *out, msb_error **err);

/* ---- the file plane ------------------------------------------------------ */

typedef struct msb_entry {
	char *path; /* relative to the working directory */
	msb_entry_kind kind;
	bool size_known; /* false for links and unknown sizes (9.20) */
	uint64_t size_bytes;
} msb_entry;
MSB_EXTERN void msb_entry_clear(msb_entry *e);
MSB_EXTERN void msb_entries_free(msb_entry *entries, size_t n);

MSB_EXTERN int msb_sandbox_write_file(msb_sandbox *sb, const char *path, const uint8_t *data,
				      size_t len, const char *working_directory, msb_error **err);
/* *present = false when the path is absent (then *out is untouched). */
MSB_EXTERN int msb_sandbox_stat_file(msb_sandbox *sb, const char *path,
				     const char *working_directory, bool *present, msb_entry *out,
				     msb_error **err);
/* Regular files only; a file larger than max_bytes is refused with
 * MSB_E_TRANSFER_CAP_EXCEEDED, never truncated (9.23). *data is malloc()ed. */
MSB_EXTERN int msb_sandbox_read_file(msb_sandbox *sb, const char *path,
				     const char *working_directory, uint64_t max_bytes,
				     uint8_t **data, size_t *len, msb_error **err);
MSB_EXTERN int msb_sandbox_list_dir(msb_sandbox *sb, const char *path,
				    const char *working_directory, msb_entry **entries, size_t *n,
				    msb_error **err);
MSB_EXTERN int msb_sandbox_remove(msb_sandbox *sb, const char *path, const char *working_directory,
				  bool recursive, msb_error **err);

/* ---- cleanup primitives -------------------------------------------------- */

MSB_EXTERN int msb_sandbox_reclaim(msb_sandbox *sb, const char *directory,
				   const char *working_directory, double timeout, msb_error **err);
MSB_EXTERN int msb_sandbox_reset(msb_sandbox *sb, double timeout, msb_error **err);
/* Stable id of the physical instance (9.29). Never NULL. */
MSB_EXTERN const char *msb_sandbox_instance_id(const msb_sandbox *sb);
/* The serving backend's name. */
MSB_EXTERN const char *msb_sandbox_backend_name(const msb_sandbox *sb);
/* What exec and exec_bounded serve of msb_exec_io on this sandbox
 * (MSB_EXEC_CAN_* bits; 0 for NULL): a caller can fall back (take output
 * whole, pass stdin as bytes) rather than be refused. */
MSB_EXTERN unsigned msb_sandbox_exec_io(const msb_sandbox *sb);

/* SandboxFingerprint (18.12, 18.13): changed paths since creation and running
 * program identities. */
typedef struct msb_fingerprint {
	char **changed_paths;	 /* msb_strv, sorted */
	char **running_programs; /* msb_strv, sorted */
} msb_fingerprint;
MSB_EXTERN void msb_fingerprint_clear(msb_fingerprint *fp);
/* *supported = false when the backend cannot fingerprint (then *out untouched). */
MSB_EXTERN int msb_sandbox_fingerprint(msb_sandbox *sb, bool *supported, msb_fingerprint *out,
				       msb_error **err);

/* Drop this handle. Does not dispose the sandbox (use the router). NULL ok. */
MSB_EXTERN void msb_sandbox_free(msb_sandbox *sb);

MSB_END_DECLS

#endif
