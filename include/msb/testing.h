/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/testing.h - the testing fake (checklist section 19). Reached by name:
 * msb/msb.h does not include this header (19.14).
 *
 * InProcessSandboxBackend: a real implementation of the backend protocol,
 * in memory. It declares isolation `none`, so a router must lower its floor
 * to NONE to use it. Every acquire returns the one shared fake sandbox,
 * whatever the key or kind (a documented simplification, 19.4).
 *
 * InProcessSandbox: a bytes-backed store keyed by normalised absolute guest
 * paths, with the same confinement rules as section 9 (seeded links have no
 * target: shape only, not safety). exec and run_code never run anything:
 * they record and answer from scripted outputs (exit code 0, no stderr).
 *
 * Working directories: NULL or "." is the storage base MSB_DEFAULT_WORK_DIR
 * (which exists from creation, with its ancestors); a relative one resolves
 * beneath it and may not climb out; an absolute one is used as given, so
 * tests can address seeded trees such as "/w" directly. Every ancestor of a
 * seed is created as a directory.
 *
 * fingerprint() (19.12, 18.16) compares the store with its state at
 * creation: changed_paths lists every path added, removed, or changed in
 * kind or bytes; running_programs is always empty. Bytes changed and then
 * restored leave no trace. instance_id is stable for the fake's life, and
 * every handle onto one fake shares it (so dispose-then-acquire through the
 * fake backend does not change it).
 *
 * Thread-safety: every function here may be called from any thread.
 */
#ifndef MSB_TESTING_H
#define MSB_TESTING_H

#include <msb/backend.h>
#include <msb/common.h>
#include <msb/error.h>
#include <msb/key.h>
#include <msb/sandbox.h>
#include <msb/spec.h>

MSB_BEGIN_DECLS

/* FAKE_BACKEND_DECLARATIONS (19.2, 23.37): DEFAULT_CAPABILITIES | {RECLAIM},
 * egress {allowlist, closed}, default limits, no OS family. Replacing the
 * capabilities must re-add RECLAIM. */
MSB_EXTERN extern const msb_declarations MSB_FAKE_BACKEND_DECLARATIONS;

typedef struct msb_fake_sandbox msb_fake_sandbox;
typedef struct msb_fake_backend msb_fake_backend;

/* A seeded entry (19.5). */
typedef enum msb_fake_seed_kind {
	MSB_FAKE_SEED_BYTES = 0, /* a regular file with `data` */
	MSB_FAKE_SEED_SYMLINK,
	MSB_FAKE_SEED_DIRECTORY,
	MSB_FAKE_SEED_OTHER, /* a non-regular entry (device, fifo, ...) */
} msb_fake_seed_kind;

typedef struct msb_fake_seed {
	const char *path; /* absolute guest path */
	msb_fake_seed_kind kind;
	const uint8_t *data;
	size_t len;
} msb_fake_seed;

/* A scripted output: the first whose `marker` is a substring of the command
 * (or program) answers with `stdout_text` (19.6). */
typedef struct msb_fake_output {
	const char *marker;
	const char *stdout_text;
} msb_fake_output;

typedef struct msb_fake_sandbox_options {
	unsigned version;
	const msb_fake_output *outputs;
	size_t n_outputs;
	int raises;		    /* non-zero: every exec/exec_bounded fails with this MSB_E_*
				     * code, after being recorded (run_code is not affected) */
	const char *default_stdout; /* NULL = "" */
	const msb_fake_seed *seed_files;
	size_t n_seed_files;
	const char *instance_id; /* NULL = generated */
	/*
	 * An emulated POSIX guest for the conformance suites (msb conformance
	 * fake): exec then answers, over the fake's own store, the handful of
	 * commands the suites verify with - printf, cat, test -e/-f/-d/-L,
	 * pwd, sleep (bounded by the timeout, which it reports as
	 * TimeoutError), mkdir -p, ln -sfn, tee, true, false, and the shell
	 * form `exit N`. Anything else exits 127. Commands are still recorded
	 * first; scripted outputs are not consulted. Links have no target in
	 * the fake, so the emulated guest never follows one. It runs nothing:
	 * it tests a harness and the fake's own rules, never a boundary.
	 */
	bool posix_guest;
} msb_fake_sandbox_options;
#define MSB_FAKE_SANDBOX_OPTIONS_VERSION 1
#define MSB_FAKE_SANDBOX_OPTIONS_INIT                                                              \
	{                                                                                          \
		MSB_FAKE_SANDBOX_OPTIONS_VERSION, NULL, 0, 0, NULL, NULL, 0, NULL, false           \
	}

/* opts may be NULL for the defaults. Free with msb_fake_sandbox_unref(). */
MSB_EXTERN int msb_fake_sandbox_new(const msb_fake_sandbox_options *opts, msb_fake_sandbox **out,
				    msb_error **err);
MSB_EXTERN msb_fake_sandbox *msb_fake_sandbox_ref(msb_fake_sandbox *fs);
MSB_EXTERN void msb_fake_sandbox_unref(msb_fake_sandbox *fs);
/* A handle onto the fake usable as any msb_sandbox (release when done). */
MSB_EXTERN int msb_fake_sandbox_handle(msb_fake_sandbox *fs, msb_sandbox **out, msb_error **err);

/* Records. Each returns a newly allocated msb_strv (free with msb_strv_free). */
/* exec: the POSIX-quoted command lines, in order (19.6). */
MSB_EXTERN char **msb_fake_sandbox_commands(msb_fake_sandbox *fs);
/* exec: the working directory of each command as the caller gave it, "."
 * when it gave NULL (the base). */
MSB_EXTERN char **msb_fake_sandbox_command_dirs(msb_fake_sandbox *fs);
/* exec: the timeout of command i; NAN when there is no command i. */
MSB_EXTERN double msb_fake_sandbox_command_timeout(msb_fake_sandbox *fs, size_t i);
/* run_code: the programs, in order (19.7). */
MSB_EXTERN char **msb_fake_sandbox_programs(msb_fake_sandbox *fs);
/* run_code: the timeout of program i; NAN when there is no program i. */
MSB_EXTERN double msb_fake_sandbox_program_timeout(msb_fake_sandbox *fs, size_t i);
/* reclaim: the absolute directories reclaimed, in order (19.11). */
MSB_EXTERN char **msb_fake_sandbox_reclaims(msb_fake_sandbox *fs);
/* The stored paths (sorted). */
MSB_EXTERN char **msb_fake_sandbox_paths(msb_fake_sandbox *fs);

/* Raw content of a stored regular file. MSB_E_NOT_FOUND when absent or not
 * a regular file. *data is malloc()ed. */
MSB_EXTERN int msb_fake_sandbox_contents(msb_fake_sandbox *fs, const char *abs_path, uint8_t **data,
					 size_t *len, msb_error **err);
/* The `files` text view (19.10): refuses non-UTF-8 content with MSB_E_VALUE
 * ("decode error"). *text is malloc()ed and NUL-terminated; a NUL byte in
 * the content is valid UTF-8 and ends the C string early (use _contents). */
MSB_EXTERN int msb_fake_sandbox_file_text(msb_fake_sandbox *fs, const char *abs_path, char **text,
					  msb_error **err);

typedef struct msb_fake_backend_options {
	unsigned version;
	msb_fake_sandbox *sandbox;	      /* NULL = a fresh default fake sandbox */
	const char *name;		      /* NULL = "in-process" */
	const char *isolation;		      /* NULL = "none" */
	const msb_declarations *declarations; /* NULL = MSB_FAKE_BACKEND_DECLARATIONS */
	int acquire_error;		      /* non-zero: every acquire fails with this code */
	const char *acquire_error_message;
} msb_fake_backend_options;
#define MSB_FAKE_BACKEND_OPTIONS_VERSION 1
#define MSB_FAKE_BACKEND_OPTIONS_INIT                                                              \
	{                                                                                          \
		MSB_FAKE_BACKEND_OPTIONS_VERSION, NULL, NULL, NULL, NULL, 0, NULL                  \
	}

/*
 * Make the fake backend. *backend is the msb_backend to register (owned by
 * the caller: msb_backend_unref); *fake (optional, may be NULL) is a
 * borrowed view onto its records, valid while *backend lives.
 */
MSB_EXTERN int msb_fake_backend_new(const msb_fake_backend_options *opts, msb_backend **backend,
				    msb_fake_backend **fake, msb_error **err);
/* The shared sandbox (borrowed). */
MSB_EXTERN msb_fake_sandbox *msb_fake_backend_sandbox(msb_fake_backend *fb);
/* Keys acquired, in order (19.3): count and i-th (borrowed). */
MSB_EXTERN size_t msb_fake_backend_key_count(msb_fake_backend *fb);
MSB_EXTERN const msb_key *msb_fake_backend_key(msb_fake_backend *fb, size_t i);
MSB_EXTERN const msb_spec *msb_fake_backend_spec(msb_fake_backend *fb, size_t i);
/* Keys disposed, in order, with the kind/instance selectors given. */
MSB_EXTERN size_t msb_fake_backend_disposed_count(msb_fake_backend *fb);
MSB_EXTERN const msb_key *msb_fake_backend_disposed(msb_fake_backend *fb, size_t i,
						    const char **kind, const char **instance_id);
/* (scope, thread) pairs purged. */
MSB_EXTERN size_t msb_fake_backend_purged_count(msb_fake_backend *fb);
MSB_EXTERN void msb_fake_backend_purged(msb_fake_backend *fb, size_t i, const char **scope,
					const char **thread_id);
/* What dispose_scope returns (default 1). */
MSB_EXTERN void msb_fake_backend_set_purge_count(msb_fake_backend *fb, uint64_t count);
/* Script dispose: failure code (or -1 for "report nothing", the default) and
 * detail; raise_code != 0 makes dispose "raise". */
MSB_EXTERN void msb_fake_backend_set_dispose_result(msb_fake_backend *fb, int failure_code,
						    const char *detail, int raise_code);
/* Refuse acquire while a purge is active (7.15, 4.21). */
MSB_EXTERN void msb_fake_backend_set_purging(msb_fake_backend *fb, bool purging);

MSB_END_DECLS

#endif
