/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/hosttools_exec.h - host-tool calls over exec (checklist 14).
 *
 * A transport built only from EXEC, FILES_IN and FILES_OUT (deliberately not
 * FILES_LIST: requests are found by sequential name, never by enumeration),
 * so it works on any backend that serves those three. A kind writes its
 * program and the generated shim into a fresh per-run layout; the transport
 * writes a launcher, starts the program detached behind a start gate, polls
 * the calls directory for request files, answers each through the registry's
 * one door (msb_host_tool_run_call_request) and writes the response back.
 *
 * The shim is not a control: it runs where model-written code can read, edit
 * or ignore it, and a program that writes request files by hand is served
 * identically. Every gate is host-side.
 *
 * Guest file protocol (the calls directory, <run>/host_tools/host_tool_calls):
 *   NNNN.claim          exclusive-create by the guest: the lowest free number
 *   NNNN.request.json   {"id": N, "name": ..., "arguments": {...}}, published
 *                       atomically (write .part, rename), or
 *                       {"id": N, "abandoned": true}
 *   NNNN.response.json  written by the host: {"value": ...} | {"refusal": "..."}
 * NNNN is the number zero-padded to four digits. The host serves strictly in
 * id order, one call at a time.
 *
 * Launcher receipts (14.17, DESIGN 9.31): the launcher prints, on the exec's
 * own stdout, "msb-receipt pid=<N>", optionally "msb-receipt pgid=<N>", then
 * "msb-receipt end", and exits. Only then does the host validate them and
 * create the start gate <run>/host_tools/program_start_gate; the guest-side
 * helper polls for the gate with sleep and only then starts the program.
 * Guest-written pid files never name a signal target (14.19).
 */
#ifndef MSB_HOSTTOOLS_EXEC_H
#define MSB_HOSTTOOLS_EXEC_H

#include <msb/hosttools.h>
#include <msb/sandbox.h>

MSB_BEGIN_DECLS

/* The file names inside a run, fixed (docs/hosttools.md). */
#define MSB_RUN_WORK_DIRECTORY "work"
#define MSB_RUN_TRANSPORT_DIRECTORY "host_tools"
#define MSB_HOST_TOOLS_SHIM_MODULE "maf_host_tools"

/* What a kind using this transport requires: EXEC, FILES_IN, FILES_OUT and
 * HOST_TOOLS - deliberately not FILES_LIST (14.2). */
#define MSB_HOST_TOOLS_OVER_EXEC_REQUIRES                                                          \
	(MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_HOST_TOOLS)

/* Where one run's files live inside the guest (14.4). Every path is under
 * `directory`, which may be relative (to the sandbox's storage base: the
 * launcher resolves it inside the guest, 14.34) or absolute. */
typedef struct msb_guest_run_layout {
	char *directory;
	char *work;	 /* <run>/work: the program's cwd, the only home of model-named files */
	char *transport; /* <run>/host_tools */
	char *program;	 /* <run>/host_tools/<program> (beside the shim, 14.5) */
	char *shim;	 /* <run>/host_tools/maf_host_tools.py */
	char *launcher;	 /* <run>/host_tools/run_program.sh */
	char *calls;	 /* <run>/host_tools/host_tool_calls */
	char *output;	 /* <run>/host_tools/program_output.txt */
	char *exit_code; /* <run>/host_tools/program_exit_code */
	char *pid;	 /* <run>/host_tools/program_pid (guest-written; never a signal target) */
	char *gate;	 /* <run>/host_tools/program_start_gate */
} msb_guest_run_layout;

/*
 * guest_run_layout (14.4-14.9). program NULL = "program.py". Refusals
 * (MSB_E_VALUE): a run directory that is empty, contains ":" (PYTHONPATH's
 * separator) or a backslash, or climbs above its base when relative; a
 * program that is not a plain file name; a program named for a transport
 * file; a program whose module stem is reserved (the shim's own module, a
 * module the shim imports, or one CPython imports at startup).
 */
MSB_EXTERN int msb_guest_run_layout_new(const char *run_directory, const char *program,
					msb_guest_run_layout *out, msb_error **err);
MSB_EXTERN void msb_guest_run_layout_clear(msb_guest_run_layout *l);

/*
 * host_tool_shim (14.10-14.12): the Python module a program imports as
 * maf_host_tools. It offers call(name, **arguments), HostToolError (raised
 * with the host's refusal sentence), and one convenience wrapper per
 * spellable name - an ASCII identifier that is not a Python keyword and not
 * a name the shim itself uses (wrappers grant nothing: call() reaches any
 * name). call_timeout (seconds, finite > 0, default 300) bounds one wait.
 * *out is malloc()ed text.
 */
MSB_EXTERN int msb_host_tool_shim(const char *const *names, size_t n, double call_timeout,
				  char **out, msb_error **err);

typedef struct msb_over_exec_options {
	unsigned version;
	double timeout;		      /* the run's bound, seconds, finite > 0 (14.3) */
	double poll_interval;	      /* seconds between request polls, finite > 0, default 0.2 */
	const char *interpreter;      /* default "python3" */
	const msb_key *key;	      /* stamped on process events; may be NULL */
	const char *call;	      /* likewise */
	const msb_observer *observer; /* ProcessesObserved, ProcessCleanup; may be NULL */
	msb_log_fn log;
	void *log_userdata;
} msb_over_exec_options;
#define MSB_OVER_EXEC_OPTIONS_VERSION 1
#define MSB_OVER_EXEC_OPTIONS_INIT                                                                 \
	{                                                                                          \
		MSB_OVER_EXEC_OPTIONS_VERSION, 30.0, 0.2, NULL, NULL, NULL, NULL, NULL, NULL       \
	}

/* Grace periods (14.23): total transport overhead is at most timeout + 21 s. */
#define MSB_PROCESS_CLEANUP_GRACE 5.0
#define MSB_RECLAIM_GRACE 10.0
#define MSB_FINAL_READ_GRACE 2.0
#define MSB_RESPONSE_WRITE_GRACE 2.0

/*
 * host_tool_calls_over_exec (14.1). The kind has written layout->program and
 * layout->shim already. On completion *out holds the program's combined
 * output (stdout) and its recorded exit code. A launcher that exits non-zero
 * gives an ExecResult with the launcher's code and a stderr note (14.28).
 * The run's own bound expiring is MSB_E_PROGRAM_TIMEOUT carrying the partial
 * output and the signal outcome (msb_error_timeout); any other error - a
 * backend's own MSB_E_TIMEOUT included - is passed through unchanged (14.25).
 * Missing or invalid receipts refuse the start: MSB_E_RUNTIME (14.18).
 * The transport directory is removed on every exit path; work/ is left for
 * collection (14.29, 14.30).
 */
MSB_EXTERN int msb_host_tool_calls_over_exec(msb_sandbox *sb, msb_host_tool_run *run,
					     const msb_guest_run_layout *layout,
					     const msb_over_exec_options *opts,
					     msb_exec_result *out, msb_error **err);

/*
 * reclaim_run (14.31): remove the whole run directory over exec. Returns
 * MSB_E_VALUE for a timeout that is not finite and > 0 (checked first); 0
 * with *removed false when the layout is refused (a path outside its
 * directory, a directory that is not absolute or has fewer than two
 * components) or the removal failed - a data-retention failure to escalate.
 */
MSB_EXTERN int msb_reclaim_run(msb_sandbox *sb, const msb_guest_run_layout *layout, double timeout,
			       bool *removed, msb_error **err);

MSB_END_DECLS

#endif
