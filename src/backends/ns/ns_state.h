/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` backend's state on disk: the state root, key-derived names,
 * labels, shim liveness and teardown. Everything here is read back from the
 * directory, never from process memory, so every process agrees (DESIGN §5).
 *
 *   <root>/ns/<name>/labels.json   who the sandbox belongs to (written first)
 *   <root>/ns/<name>/shim.json     the shim's configuration
 *   <root>/ns/<name>/shim.pid      "PID STARTTIME" of the msb-shim holding it
 *   <root>/ns/<name>/agent.sock    the agent's socket (the shim binds it)
 *   <root>/ns/<name>/work/         the storage base, bind-mounted into the guest
 */
#ifndef MSB_NS_STATE_H
#define MSB_NS_STATE_H

#include <msb/key.h>
#include <msb/ns.h>
#include <msb/vocab.h>

#include "util/util.h"

#define MSB_NS_LABELS "labels.json"

typedef struct msb_ns_labels {
	char *scope;
	char *thread_id;
	char *agent_dir;
	char *kind;
	char *call_id; /* NULL when absent */
	char *instance_id;
	char *work_dir; /* the guest path of the storage base */
	int64_t created_ns;
	char *image; /* the backend's image spelling; NULL in labels written before it */
} msb_ns_labels;

void msb_ns__labels_clear(msb_ns_labels *l);

/* The state root for these options ($MSB_STATE_DIR, /run/msb or
 * $XDG_RUNTIME_DIR/msb), with "/ns" appended. Newly allocated. */
int msb_ns__state_dir(const char *state_root, char **out, msb_error **err);

/* "msb-" + 32 hex of SHA-256 over the length-prefixed key fields and kind;
 * call_id folded in when present (IsolationScope.CALL, 18.10). out[37]. */
void msb_ns__name(const msb_key *key, const char *kind, char out[37]);

int msb_ns__labels_write(int dirfd, const msb_ns_labels *l, msb_error **err);
int msb_ns__labels_read(int dirfd, msb_ns_labels *out, msb_error **err);

/* Does (scope, thread, agent_dir[, call_id]) of `key` select these labels?
 * kind and instance_id narrow when non-NULL. */
bool msb_ns__labels_match(const msb_ns_labels *l, const msb_key *key, const char *kind,
			  const char *instance_id);

/* The shim recorded in dirfd/shim.pid, if it is still that process (a
 * zombie is not): *pid > 0 and a pidfd (O_CLOEXEC) onto it. *pid = 0 when
 * there is none. */
int msb_ns__shim_alive(int dirfd, int64_t *pid, int *pidfd);

/* What a state directory says of its sandbox (issue 15 findings 2 and 5). */
typedef enum msb_ns_liveness {
	MSB_NS_RUNNING, /* its shim is alive and has recorded no death */
	MSB_NS_DEAD,	/* its agent died unasked (the shim's record), or its shim is
			   gone without taking the sandbox down: unclean until disposed */
	MSB_NS_STALE,	/* no shim and no record: never started, or taken down on
			   purpose (a signal to the shim, a failed reset) */
} msb_ns_liveness;

/* The sandbox's liveness; *shim_pid (may be NULL) as msb_ns__shim_alive;
 * for MSB_NS_DEAD, *why (may be NULL; free it) says what happened, one line. */
msb_ns_liveness msb_ns__liveness(int dirfd, int64_t *shim_pid, char **why);

/* As msb_ns__liveness, and *init_alive what msb_ns__init_alive would say,
 * from the same read of init.pid (false unless RUNNING), and *shim_pidfd
 * (may be NULL) a pidfd on the live shim or -1, the caller's to close: one
 * look at the agent and the shim where a caller needs them all (issue 17:
 * the pool's claim). */
msb_ns_liveness msb_ns__liveness_init(int dirfd, int64_t *shim_pid, char **why, bool *init_alive,
				      int *shim_pidfd);

/* As msb_ns__liveness, but an agent found dead before its live shim recorded
 * how is given up to settle_ns for that record, so that *why says how it
 * died (the shim writes it within moments). *shim_pidfd (may be NULL): as
 * msb_ns__liveness_init's, from the last look. */
msb_ns_liveness msb_ns__liveness_settled(int dirfd, int64_t *shim_pid, char **why,
					 int64_t settle_ns, int *shim_pidfd);

/* Is the init recorded in dirfd/init.pid alive (a zombie is not)? */
bool msb_ns__init_alive(int dirfd);

#endif
