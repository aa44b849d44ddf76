/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fingerprint and reset of an `ns` sandbox (checklist 18.12-18.15, 9.28),
 * served on the host from the sandbox's state directory and its shim
 * (docs/internals/ns-boundary.md, "Fingerprint and reset").
 */
#ifndef MSB_NS_SNAPSHOT_H
#define MSB_NS_SNAPSHOT_H

#include <msb/sandbox.h>

/*
 * The host's budget for one fingerprint: every entry and byte it reads from
 * the guest's writable places and process table counts against it, and past
 * any leg the fingerprint is refused (MSB_E_RUNTIME, "cannot attest: more
 * than ...") before the next entry is held (docs/security.md, "Budgets on
 * guest bytes"). Paths count with their guest prefix and NUL; processes as
 * their "PID:STARTTIME:ARGV" identity and NUL.
 */
#define MSB_NS_FINGERPRINT_MAX_PATHS (1u << 18)		     /* entries */
#define MSB_NS_FINGERPRINT_MAX_PATH_BYTES ((size_t)16 << 20) /* all paths' bytes */
#define MSB_NS_FINGERPRINT_MAX_PATH_LEN 4096u		     /* one path (PATH_MAX) */
#define MSB_NS_FINGERPRINT_MAX_PROCS 65536u		     /* processes */
#define MSB_NS_FINGERPRINT_MAX_PROC_BYTES ((size_t)8 << 20)  /* all identities' bytes */

typedef struct msb_ns_fingerprint_budget {
	size_t max_paths, max_path_bytes, max_path_len;
	size_t max_procs, max_proc_bytes;
} msb_ns_fingerprint_budget;
#define MSB_NS_FINGERPRINT_BUDGET_INIT                                                             \
	{                                                                                          \
		MSB_NS_FINGERPRINT_MAX_PATHS, MSB_NS_FINGERPRINT_MAX_PATH_BYTES,                   \
			MSB_NS_FINGERPRINT_MAX_PATH_LEN, MSB_NS_FINGERPRINT_MAX_PROCS,             \
			MSB_NS_FINGERPRINT_MAX_PROC_BYTES                                          \
	}

/*
 * A growable msb_strv under a budget, for what a fingerprint reads of a
 * guest: at most `max` strings, `max_len` bytes each and `max_bytes` in all
 * (NULs included). Zero-initialise with the limits set. (ns_strs.c)
 */
typedef struct msb_ns_strs {
	char **v;
	size_t n, cap, max;
	size_t bytes, max_bytes, max_len;
} msb_ns_strs;
/* Takes str (NULL: -ENOMEM). -E2BIG past the count, -ENAMETOOLONG past one
 * string's length, -EFBIG past the bytes, -ENOMEM; str is freed then and
 * nothing more is held. */
int msb_ns__strs_add(msb_ns_strs *s, char *str);
/* The typed refusal for a failed add: "WHO fingerprint: cannot attest:
 * more than ..." (MSB_E_RUNTIME), or out of memory. */
int msb_ns__strs_refusal(msb_error **err, int r, const msb_ns_strs *s, const char *who,
			 const char *things);
void msb_ns__strs_clear(msb_ns_strs *s);
/* Both lists sorted, duplicates dropped, into out->changed_paths and
 * out->running_programs; the lists are emptied either way. */
int msb_ns__strs_fingerprint(msb_ns_strs *paths, msb_ns_strs *procs, msb_fingerprint *out,
			     msb_error **err);

/*
 * What changed since the sandbox was created, read by the engine (the host),
 * never asked of the guest:
 *  - changed_paths: guest paths of every entry of the overlay's upper
 *    directory (whiteouts, i.e. deletions, included), of the storage base
 *    (`work_dir`/...) and of /dev/shm, sorted;
 *  - running_programs: "PID:STARTTIME:ARGV" of every process in the sandbox
 *    but its init (the agent) and the workloads' reaper (agent/pidns.c); PID as the guest sees it,
 * STARTTIME in clock ticks after boot, so a replacement with the same pid differs. Refused
 * (MSB_E_RUNTIME, "cannot attest") when the sandbox has writable storage that is none of these (a
 * writable mount the fingerprint cannot see), a process in another mount namespace, or more than
 * the budget above. `dfd` is the sandbox's state directory `<state>/<name>` (`dir`, for messages);
 * `work_dir` its guest storage base.
 */
int msb_ns__snapshot_fingerprint(int dfd, const char *dir, const char *work_dir, bool *supported,
				 msb_fingerprint *out, msb_error **err);

/* The same under another budget (tests use small ones); NULL = the default. */
int msb_ns__snapshot_fingerprint_within(int dfd, const char *dir, const char *work_dir,
					const msb_ns_fingerprint_budget *budget, bool *supported,
					msb_fingerprint *out, msb_error **err);

/* The changed paths only (running_programs empty): for a sandbox whose
 * processes and mounts are not the host kernel's (`oci` under gVisor, whose
 * caller asks the guest for those). No mount check, no process walk. */
int msb_ns__snapshot_fingerprint_paths(int dfd, const char *dir, const char *work_dir,
				       msb_fingerprint *out, msb_error **err);

/*
 * Reset to the pristine state of acquire: the shim restarts the sandbox
 * from its configuration (new init, empty writable layer, empty storage
 * base, no process left) under the same name, labels and instance id. Holds
 * the state directory's lock meanwhile, so a concurrent acquire waits.
 * MSB_E_TIMEOUT when `timeout` seconds pass first (the restart may still
 * complete); MSB_E_RUNTIME when the restart failed (the sandbox is then
 * gone: the next acquire makes a new one).
 */
int msb_ns__snapshot_reset(int dfd, const char *dir, double timeout, msb_error **err);

/*
 * One request line to the shim's control socket in the state directory dfd
 * (boundary.h, MSB_NS_CONTROL_*); one answer line into reply (without the
 * newline) and, when fds is given, the two fds that come with "ok". `dir`
 * names the sandbox in messages.
 */
int msb_ns__control(int dfd, const char *dir, const char *req, int64_t deadline, int fds[2],
		    char *reply, size_t size, msb_error **err);

#endif
