/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/conformance.h - the conformance suites (checklist section 18).
 * Reached by name: msb/msb.h does not include this header.
 *
 * A suite attacks a real backend instance through the public surface: it
 * plants a hostile layout through a msb_conformance_subject and checks what
 * the sandbox answers. Every probe carries the reason it exists; each
 * probe's outcome is passed, failed (with what it found) or skipped (with
 * why it did not run). A probe needing a capability the subject does not
 * declare is skipped, never passed; a subject that does not declare the
 * suite's gating capability is refused with MSB_E_VALUE before anything is
 * planted (18.1): a green run that attacked nothing is forbidden.
 *
 * The hostile layout, for a working directory W (absolute, normalised):
 *   W-outside/              a sibling sharing W's string prefix; outside W
 *   W-outside/secret.txt    bytes no probe may ever bring back
 *   W/link-dir -> W-outside the escape as a parent component
 *   W/link-file -> W-outside/secret.txt   the escape as a final component
 * Planting goes through the subject, because making a link is the guest's
 * move: a sandbox that offered it would hand the attacker the tool.
 *
 * Suites verify through exec (`cat`, `test`, `printf`, `pwd`, `sleep`,
 * `mkdir`, `ln`, `tee`; `curl` for EGRESS) rather than the pull surface, so a
 * backend with no pull surface still answers for FILES_IN and FILES_DELETE.
 * The EXEC suite may not leave the sandbox alive (its last probe times a
 * command out): run it last on a shared sandbox.
 *
 * The run_* functions return every result and fail only when the suite
 * cannot run at all (a refused subject, a layout that could not be
 * planted). The assert_* functions also fail with MSB_E_CONFORMANCE_FAILURE
 * (an assertion-class error, 18.17) when any probe failed, with the message
 * "N of M <SUITE> conformance probes failed: <probe> (<what it found>; why
 * it is in the suite: <reason>), ..." - and then still hand back the report
 * (*out is set on success and on a ConformanceFailure, never otherwise).
 *
 * Thread-safety: a suite uses its subject from the calling thread only.
 */
#ifndef MSB_CONFORMANCE_H
#define MSB_CONFORMANCE_H

#include <msb/backend.h>
#include <msb/common.h>
#include <msb/error.h>
#include <msb/key.h>
#include <msb/sandbox.h>
#include <msb/spec.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

/* ---- results ------------------------------------------------------------- */

typedef enum msb_probe_outcome {
	MSB_PROBE_PASSED = 0,
	MSB_PROBE_FAILED,
	MSB_PROBE_SKIPPED,
} msb_probe_outcome;

/* "passed", "failed", "skipped". */
MSB_EXTERN const char *msb_probe_outcome_name(msb_probe_outcome o);

typedef struct msb_probe_result {
	const char *name; /* static: "stat-through-a-linked-parent" */
	const char *why;  /* static: the reason the probe is in the suite */
	msb_probe_outcome outcome;
	char *detail; /* failed: what it found; skipped: why; passed: NULL */
} msb_probe_result;

typedef struct msb_conformance_report {
	char *suite; /* "FILES_OUT", ... */
	msb_probe_result *results;
	size_t n_results;
	size_t n_failed;
	size_t n_skipped;
} msb_conformance_report;

MSB_EXTERN void msb_conformance_report_free(msb_conformance_report *r);
/* The report as one JSON object {"suite", "results": [{"probe", "outcome",
 * "why", "detail"}], "failed", "skipped", "total"}. Newly allocated. */
MSB_EXTERN char *msb_conformance_report_json(const msb_conformance_report *r);

/* ---- the subject --------------------------------------------------------- */

/*
 * ConformanceSubject: the sandbox under attack (borrowed, already acquired),
 * the absolute working directory every probe's relative path resolves
 * against, what the backend declares (pass the backend's own capabilities,
 * never a narrower set), and the two planting operations. Both planting
 * callbacks take absolute guest paths and create missing parents;
 * plant_symlink replaces an existing link.
 */
typedef struct msb_conformance_subject {
	unsigned version;
	msb_sandbox *sandbox;
	const char *working_directory;
	msb_capset capabilities;
	int (*plant_file)(void *userdata, const char *abs_path, const uint8_t *data, size_t len,
			  msb_error **err);
	int (*plant_symlink)(void *userdata, const char *abs_path, const char *target,
			     msb_error **err);
	void *userdata;
	double exec_timeout; /* seconds for each verifying exec; 0 = 60 */
} msb_conformance_subject;
#define MSB_CONFORMANCE_SUBJECT_VERSION 1
#define MSB_CONFORMANCE_SUBJECT_INIT                                                               \
	{                                                                                          \
		MSB_CONFORMANCE_SUBJECT_VERSION, NULL, NULL, 0, NULL, NULL, NULL, 0                \
	}

/*
 * PosixGuestSubject: plants through exec in a POSIX guest - files with
 * `mkdir -p` and `tee` (the bytes on stdin), links with `ln -sfn` - so it
 * can plant outside the working directory, where the file plane refuses to
 * go. Fills *out; userdata is the sandbox, which must outlive the subject.
 */
MSB_EXTERN void msb_posix_guest_subject(msb_sandbox *sandbox, const char *working_directory,
					msb_capset capabilities, msb_conformance_subject *out);

/* ---- the suites (18.4-18.7, 18.9, 18.11) ---------------------------------- */

typedef enum msb_conformance_suite {
	MSB_SUITE_FILES_IN = 0,
	MSB_SUITE_FILES_OUT,
	MSB_SUITE_EXEC,
	MSB_SUITE_FILES_DELETE,
	MSB_SUITE_EGRESS,
	MSB_SUITE_CALL_SCOPE,
	MSB_SUITE_RECLAIM,
	MSB_SUITE_NOTHING_LEFT_BEHIND,
} msb_conformance_suite;
#define MSB_SUITE_COUNT 8

/* "FILES_IN", ... "NOTHING_LEFT_BEHIND"; NULL outside the enum. */
MSB_EXTERN const char *msb_conformance_suite_name(msb_conformance_suite s);
/* Case-insensitive; MSB_E_VALUE for an unknown name. */
MSB_EXTERN int msb_conformance_suite_parse(const char *s, msb_conformance_suite *out,
					   msb_error **err);
/* The probes of a suite, in run order: names and reasons (static). */
MSB_EXTERN size_t msb_conformance_probe_count(msb_conformance_suite s);
MSB_EXTERN void msb_conformance_probe_info(msb_conformance_suite s, size_t i, const char **name,
					   const char **why);

/* FILES_IN (18.5): gate FILES_IN; verifies through exec (probes needing EXEC
 * are skipped without it). */
MSB_EXTERN int msb_run_files_in_probes(const msb_conformance_subject *s,
				       msb_conformance_report **out, msb_error **err);
MSB_EXTERN int msb_assert_files_in_conformance(const msb_conformance_subject *s,
					       msb_conformance_report **out, msb_error **err);

/* FILES_OUT (18.4): gate FILES_OUT; the last four need FILES_LIST. */
MSB_EXTERN int msb_run_files_out_probes(const msb_conformance_subject *s,
					msb_conformance_report **out, msb_error **err);
MSB_EXTERN int msb_assert_files_out_conformance(const msb_conformance_subject *s,
						msb_conformance_report **out, msb_error **err);

/* EXEC (18.6): gate EXEC; plants its own working directory (a marker file
 * through write_file) first; the timeout probe runs last. */
MSB_EXTERN int msb_run_exec_probes(const msb_conformance_subject *s, msb_conformance_report **out,
				   msb_error **err);
MSB_EXTERN int msb_assert_exec_conformance(const msb_conformance_subject *s,
					   msb_conformance_report **out, msb_error **err);

/* FILES_DELETE (18.7): gate FILES_DELETE; each probe plants its own fixture. */
MSB_EXTERN int msb_run_files_delete_probes(const msb_conformance_subject *s,
					   msb_conformance_report **out, msb_error **err);
MSB_EXTERN int msb_assert_files_delete_conformance(const msb_conformance_subject *s,
						   msb_conformance_report **out, msb_error **err);
/* 18.8: every delete probe with no capability gate and no verdict, for a
 * mechanism that is implemented but not declared. Never a ConformanceFailure. */
MSB_EXTERN int msb_measure_files_delete_probes(const msb_conformance_subject *s,
					       msb_conformance_report **out, msb_error **err);

/* RECLAIM (18.11): gate RECLAIM; the reach rule under links, replaced
 * ancestors and outside targets; an absent directory is success. */
MSB_EXTERN int msb_run_reclaim_probes(const msb_conformance_subject *s,
				      msb_conformance_report **out, msb_error **err);
MSB_EXTERN int msb_assert_reclaim_conformance(const msb_conformance_subject *s,
					      msb_conformance_report **out, msb_error **err);

/*
 * EGRESS (18.9). The subject's sandbox must have been acquired with
 * Egress.ALLOWLIST and an allowlist holding allowed_url's host (and not
 * denied_url's). Needs EXEC and `curl` in the guest. Both URLs must answer
 * 2xx when reachable. Asserts the allowed URL answers 2xx and the denied one
 * does not (any other status, or no connection, is "not reached"). The
 * gate: `egress_modes` (the backend's declared modes) contains ALLOWLIST and
 * the subject declares EXEC; else MSB_E_VALUE before anything runs.
 * exec_timeout: seconds for each curl; 0 = 30.
 */
typedef struct msb_egress_conformance_options {
	unsigned version;
	const char *allowed_url;
	const char *denied_url;
	msb_egress_set egress_modes;
	double exec_timeout;
} msb_egress_conformance_options;
#define MSB_EGRESS_CONFORMANCE_OPTIONS_VERSION 1
#define MSB_EGRESS_CONFORMANCE_OPTIONS_INIT                                                        \
	{                                                                                          \
		MSB_EGRESS_CONFORMANCE_OPTIONS_VERSION, NULL, NULL, 0, 0                           \
	}
MSB_EXTERN int msb_run_egress_probes(const msb_conformance_subject *s,
				     const msb_egress_conformance_options *opts,
				     msb_conformance_report **out, msb_error **err);
MSB_EXTERN int msb_assert_egress_conformance(const msb_conformance_subject *s,
					     const msb_egress_conformance_options *opts,
					     msb_conformance_report **out, msb_error **err);

/*
 * CALL_SCOPE (18.10): holds a backend declaring IsolationScope.CALL to
 * folding SandboxKey.call_id into whatever names a sandbox. Acquires
 * directly from the backend (scope, thread and agent_dir of `key`, two call
 * ids of its own) with `spec` at call scope (NULL: a kind "conformance"
 * spec), writes a marker in one call's sandbox, and looks for it from the
 * other; disposes every sandbox it made before returning. Gate: the
 * backend's isolation_scopes contain CALL (else MSB_E_VALUE, nothing made).
 */
MSB_EXTERN int msb_run_call_scope_probes(msb_backend *backend, const msb_key *key,
					 const msb_spec *spec, msb_conformance_report **out,
					 msb_error **err);
MSB_EXTERN int msb_assert_call_scope_conformance(msb_backend *backend, const msb_key *key,
						 const msb_spec *spec, msb_conformance_report **out,
						 msb_error **err);

/* ---- assert_nothing_left_behind (18.12-18.16) ------------------------------ */

/*
 * FingerprintSubject: *supported = false when fingerprinting is unsupported
 * (then *out untouched); a negative return is a measurement error.
 */
typedef struct msb_fingerprint_subject {
	unsigned version;
	int (*fingerprint)(void *userdata, bool *supported, msb_fingerprint *out, msb_error **err);
	void *userdata;
} msb_fingerprint_subject;
#define MSB_FINGERPRINT_SUBJECT_VERSION 1

/* The subject answered by msb_sandbox_fingerprint() (the engine's answer). */
MSB_EXTERN void msb_sandbox_fingerprint_subject(msb_sandbox *sandbox, msb_fingerprint_subject *out);

/* The callback that runs the kind's call and awaits its cleanup. */
typedef int (*msb_conformance_call_fn)(void *userdata, msb_error **err);

/*
 * Fingerprint a pristine sandbox, run `call`, fingerprint again:
 *  - initially unsupported: both probes skipped, `call` not run, returns 0;
 *  - initially any changed path (not pristine): refused with MSB_E_VALUE
 *    before `call` runs;
 *  - an initial measurement error: that error, `call` not run;
 *  - `call` failing, the final fingerprint lost (unsupported) or failing,
 *    a changed path, or a running program not there before (or one gone):
 *    MSB_E_CONFORMANCE_FAILURE naming each path and program.
 * Probes: "no-path-left-behind", "no-program-left-behind".
 */
MSB_EXTERN int msb_assert_nothing_left_behind(const msb_fingerprint_subject *subject,
					      msb_conformance_call_fn call, void *userdata,
					      msb_conformance_report **out, msb_error **err);

MSB_END_DECLS

#endif
