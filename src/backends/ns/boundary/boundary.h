/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` boundary: what a native sandbox is made of (namespaces, rootfs,
 * id mapping, cgroup limits, rlimits) and the calls that build it, hold it
 * and take it down. Library-internal; used by msb-shim and by the `ns`
 * backend. docs/internals/ns-boundary.md describes the design.
 *
 * Nothing here is thread-safe unless said so. msb_ns__spawn() refuses to run
 * in a multi-threaded process (namespaces are created around a fork).
 */
#ifndef MSB_BACKENDS_NS_BOUNDARY_H
#define MSB_BACKENDS_NS_BOUNDARY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/util.h"

/* ---- configuration ------------------------------------------------------ */

typedef enum msb_ns_image {
	MSB_NS_IMAGE_HOST = 0, /* the host's /usr, /bin, /sbin, /lib* read-only, synthesized /etc */
	MSB_NS_IMAGE_DIR = 1,  /* a rootfs directory, read-only below a tmpfs-backed overlay */
	MSB_NS_IMAGE_OCI = 2,  /* unpacked OCI layers (top first), read-only below the overlay */
} msb_ns_image;

typedef enum msb_ns_cgroup_mode {
	MSB_NS_CGROUP_AUTO =
		0, /* v2 when it offers the needed controllers, else v1; none without limits */
	MSB_NS_CGROUP_V1 = 1,
	MSB_NS_CGROUP_V2 = 2,
	MSB_NS_CGROUP_NONE = 3, /* refuses any limit */
} msb_ns_cgroup_mode;

#define MSB_NS_MAX_RLIMITS 16

typedef struct msb_ns_rlimit {
	int resource; /* RLIMIT_* */
	uint64_t value;
} msb_ns_rlimit;

/* Defaults (docs/internals/ns-boundary.md). */
#define MSB_NS_DEFAULT_HOSTNAME "msb"
#define MSB_NS_DEFAULT_WORK_DIR "/maf-sandbox/work"
#define MSB_NS_DEFAULT_ID_BASE 1000000000u /* host uid/gid of the guest's root (root mode) */
#define MSB_NS_ID_COUNT 65536u		   /* guest ids 0..65535 (root mode) */
#define MSB_NS_DEFAULT_ROOTFS_SIZE (256ull << 20)
#define MSB_NS_DEFAULT_SHM_SIZE (64ull << 20)
#define MSB_NS_CPU_PERIOD_US 100000ull
#define MSB_NS_MAX_LAYERS 128 /* lower layers of an `oci` image */

typedef struct msb_ns_config {
	unsigned version;
	msb_ns_image image;
	char *image_path; /* MSB_NS_IMAGE_DIR: absolute path of the rootfs directory */
	char **layers;	  /* MSB_NS_IMAGE_OCI: absolute paths of the unpacked layers, top first */
	size_t n_layers;
	char *hostname;
	char *work_dir;	      /* guest path of the working directory */
	uint32_t uid_base;    /* root mode only */
	uint32_t gid_base;    /* root mode only */
	uint64_t rootfs_size; /* bytes: the tmpfs holding the writable layer */
	uint64_t shm_size;    /* bytes: /dev/shm */
	msb_ns_cgroup_mode cgroup;
	char *cgroup_parent; /* relative to each hierarchy's root; NULL: the caller's own cgroup */
	uint64_t memory_max; /* bytes; 0 = no limit */
	uint64_t pids_max;   /* 0 = no limit */
	uint64_t cpu_quota_us; /* per MSB_NS_CPU_PERIOD_US; 0 = no limit */
	msb_ns_rlimit rlimits[MSB_NS_MAX_RLIMITS];
	size_t n_rlimits;
} msb_ns_config;

/* Fill the defaults (image host, hostname, work dir, sizes, rlimits core=0
 * and nofile=4096). Returns 0 or -ENOMEM. */
int msb_ns__config_init(msb_ns_config *cfg);
void msb_ns__config_clear(msb_ns_config *cfg);
/* Parse the JSON configuration (docs/internals/ns-boundary.md) strictly on
 * top of the defaults: unknown keys, wrong types and bad values are refused.
 * On failure *cfg is cleared. */
int msb_ns__config_from_json(msb_ns_config *cfg, const char *json, size_t len, msb_error **err);
/* Validate a configuration built in C (the JSON path calls it too). */
int msb_ns__config_check(const msb_ns_config *cfg, msb_error **err);
/* Set (or replace) one rlimit. */
int msb_ns__config_set_rlimit(msb_ns_config *cfg, int resource, uint64_t value);
bool msb_ns__config_has_limits(const msb_ns_config *cfg);

/* ---- cgroups ------------------------------------------------------------ */

typedef struct msb_ns_cgroup msb_ns_cgroup;

/* Decide the hierarchy and the directories for sandbox `name` without
 * touching anything. *out is NULL when no cgroup is needed. Fails closed
 * with the reason when the limits cannot be enforced here. */
int msb_ns__cgroup_plan(const msb_ns_config *cfg, const char *name, msb_ns_cgroup **out,
			msb_error **err);
/* The directories the plan will create, one absolute path per line: what the
 * shim records in the state dir before creating them, so a purge after a
 * crash finds them. Caller frees. */
char *msb_ns__cgroup_record(const msb_ns_cgroup *cg);
/* Create the directories and write the limits. */
int msb_ns__cgroup_setup(msb_ns_cgroup *cg, msb_error **err);
/* v2: the directory fd for CLONE_INTO_CGROUP; -1 for v1. */
int msb_ns__cgroup_clone_fd(const msb_ns_cgroup *cg);
/* v1: move `pid` into every directory (v2 needs nothing: CLONE_INTO_CGROUP). */
int msb_ns__cgroup_attach(msb_ns_cgroup *cg, pid_t pid, msb_error **err);
/* v1: each directory's `tasks` file opened for writing (O_CLOEXEC), at most
 * max; *n = 0 for v2 or no cgroup. A process that writes "0" to them moves
 * itself: the kernel checks the opener's credentials, and a thread moving
 * itself skips the global threadgroup lock whose first writer after a quiet
 * spell waits for an RCU grace period (DESIGN §8): the child attaches itself
 * this way, off the parent's path. */
int msb_ns__cgroup_tasks_fds(const msb_ns_cgroup *cg, int *fds, size_t max, size_t *n,
			     msb_error **err);
/* 1 or 2. */
int msb_ns__cgroup_version(const msb_ns_cgroup *cg);
/* The directory of `controller` ("memory", "pids", "cpu"), or the v2
 * directory for any controller; NULL when not managed. */
const char *msb_ns__cgroup_path(const msb_ns_cgroup *cg, const char *controller);
/* Kill whatever is left inside, remove the directories (and the shared
 * `msb` parents when empty). Safe to call on a half set-up plan. */
int msb_ns__cgroup_destroy(msb_ns_cgroup *cg, msb_error **err);
void msb_ns__cgroup_free(msb_ns_cgroup *cg);
/* Remove one recorded cgroup directory (purge after a crash): the path must
 * be a cgroup directory below a `msb` directory of a mounted hierarchy. */
int msb_ns__cgroup_remove_recorded(const char *path, msb_error **err);

/* ---- spawn -------------------------------------------------------------- */

typedef struct msb_ns_spawn_opts {
	unsigned version;
	const char *state_dir;	/* absolute; the root is staged on it inside the child's mount ns */
	const char *name;	/* cgroup leaf name: [A-Za-z0-9._-]{1,64} */
	const char *agent_path; /* executable run as PID 1 (opened before pivot_root) */
	char *const *agent_argv; /* argv of the agent; NULL: {"msb-agent", "--work", work_dir} */
	int listen_fd;		 /* listening AF_UNIX socket; becomes fd 3 of the agent */
	const char *work_path;	 /* absolute host path of the work dir bound at work_dir */
	int work_fd;		 /* a directory fd of it: the child checks it opens the same */
	int stdio_fd;		 /* the agent's stdout and stderr; -1: /dev/null */
	msb_ns_cgroup *cgroup;	 /* set up, or NULL */
} msb_ns_spawn_opts;
#define MSB_NS_SPAWN_OPTS_INIT                                                                     \
	{                                                                                          \
		1, NULL, NULL, NULL, NULL, -1, NULL, -1, -1, NULL                                  \
	}

typedef struct msb_ns_timing {
	int64_t clone_ns;  /* clone3 */
	int64_t map_ns;	   /* uid/gid maps written */
	int64_t cgroup_ns; /* v1: creating the cgroups and writing the limits */
	int64_t attach_ns; /* v1: moving the child in; both overlap the child's rootfs work */
	int64_t wait_ns;   /* waiting for the child's exec after the attach */
	int64_t total_ns;  /* msb_ns__spawn() start to the agent's successful exec */
} msb_ns_timing;

typedef struct msb_ns_sandbox {
	pid_t pid; /* the init's host pid */
	int pidfd; /* O_CLOEXEC pidfd of the init */
	/* The sandbox's writable storage as the child made it (O_CLOEXEC, -1 if
	 * absent): the tmpfs holding the overlay's upper/ (every image), and
	 * /dev/shm. Whoever holds them can read what changed since creation. */
	int layer_fd;
	int shm_fd;
	uint64_t start_time; /* /proc/<pid>/stat field 22 */
	msb_ns_timing timing;
	bool exited; /* msb_ns__wait() reaped it */
	int status;  /* wait status once exited */
} msb_ns_sandbox;

/* true when the current process maps a range of ids (euid 0), false when it
 * makes a one-id mapping of itself. */
bool msb_ns__privileged(void);

/*
 * Create the sandbox: clone3 into new user, mount, pid, net, ipc, uts and
 * cgroup namespaces; map ids; create and join the cgroup; build the rootfs and
 * pivot_root; exec the agent. Returns when the agent has been exec'd (or the
 * reason why not). Refused when the calling process has more than one thread.
 */
int msb_ns__spawn(const msb_ns_config *cfg, const msb_ns_spawn_opts *opts, msb_ns_sandbox **out,
		  msb_error **err);
/* SIGKILL the init (the pid namespace dies with it); no-op once reaped. */
int msb_ns__kill(msb_ns_sandbox *sb);
/* Reap the init (blocking). Returns 0 and fills sb->status. */
int msb_ns__wait(msb_ns_sandbox *sb);
/* Kill and reap if still running, close the pidfd, free. NULL accepted. */
void msb_ns__sandbox_free(msb_ns_sandbox *sb);

/* ---- state directory ------------------------------------------------------ */

/* File names inside the state directory. */
#define MSB_NS_STATE_SOCKET "agent.sock"
#define MSB_NS_STATE_WORK "work"
#define MSB_NS_STATE_SHIM_PID "shim.pid"
#define MSB_NS_STATE_INIT_PID "init.pid"
#define MSB_NS_STATE_CGROUPS "cgroups"
#define MSB_NS_STATE_CONTROL "shim.sock" /* the shim's control socket (fds, reset) */
/* Written by the shim when the init died without being asked to: one line,
 * why. The sandbox is dead and unclean until it is disposed of; its storage
 * base (work/) is kept for the caller. */
#define MSB_NS_STATE_DEAD "dead"
#define MSB_NS_LAYER_UPPER "upper" /* in the writable layer: the overlay's upper dir */

/*
 * The shim's control socket, <state>/shim.sock (0600, in the 0700 state
 * directory): one request line per connection, one answer line.
 *   "fds\n"    "ok\n" carrying (SCM_RIGHTS) the writable layer and /dev/shm
 *              (msb_ns_sandbox.layer_fd, .shm_fd), for the host's fingerprint
 *   "reset\n"  the sandbox is restarted from scratch under the same state dir:
 *              "ok\n" once the new agent runs, else "error: REASON\n" (the
 *              shim then takes the sandbox down)
 *   "egress\n" egress.json is read again and put in force in the running
 *              proxy (a claimed pooled sandbox's allowlist, docs/pool.md):
 *              "ok\n", else "error: REASON\n" and the sandbox is taken down
 */
#define MSB_NS_CONTROL_FDS "fds"
#define MSB_NS_CONTROL_RESET "reset"
#define MSB_NS_CONTROL_EGRESS "egress"
/* In a pooled sandbox's state directory (docs/pool.md): its template, written
 * before its shim starts (which refuses to start without it, `--pool`) and
 * removed once a claim has given the sandbox its identity. */
#define MSB_NS_POOL_FILE "pool.json"
#define MSB_NS_CONTROL_LINE_MAX 512

/* /proc/<pid>/stat field 22 (start time in clock ticks since boot). */
int msb_ns__proc_start_time(pid_t pid, uint64_t *out);
/* The same and field 3 (state: R, S, D, Z, X, ...; a process that has begun
 * to exit reads X); -ESRCH when gone. */
int msb_ns__proc_stat(pid_t pid, char *state, uint64_t *start_time);
/* Write "<pid> <start time>\n" atomically (temporary name, rename). */
int msb_ns__write_pid_file(int dirfd, const char *name, pid_t pid, uint64_t start_time);
/* Read a pid file; -ENOENT when absent, -EINVAL when malformed. */
int msb_ns__read_pid_file(int dirfd, const char *name, pid_t *pid, uint64_t *start_time);
/* A pidfd for `pid` iff it is alive (a zombie is not) and still started at
 * `start_time`; -ESRCH otherwise. */
int msb_ns__pidfd_if_same(pid_t pid, uint64_t start_time);
/* Write `content` to dirfd/name atomically, mode 0644. */

/* Remove dirfd/name and everything below it without following symlinks or
 * crossing mount points. Depth is limited only by memory (one fd open at a
 * time). Missing is not an error. */

/* Remove the shim's files from the state directory: the work tree (unless
 * keep_work), the socket, the cgroup record and the pid files (shim.pid
 * last). keep_work also keeps the death record; without it the record goes
 * too. */
int msb_ns__state_remove_files(int dirfd, bool keep_work);
/* Remove every cgroup listed in the state directory's record. */
int msb_ns__state_remove_cgroups(int dirfd, msb_error **err);

/*
 * Take down whatever a shim left in `state_dir` (the purge path, and the
 * shim's own teardown): a live shim is sent SIGTERM and given `timeout_ms`
 * to finish (then SIGKILL); a live init is killed; the recorded cgroups are
 * removed; the socket, the work tree and the shim's files are deleted. The
 * directory itself is removed only when `remove_dir` (and then only when
 * nothing else is left in it).
 */
int msb_ns__state_purge(const char *state_dir, bool remove_dir, int timeout_ms, msb_error **err);

/* ---- doctor --------------------------------------------------------------- */

typedef struct msb_ns_probe {
	char *name; /* "userns.root", "overlayfs.userns", ... */
	bool ok;
	char *reason; /* one line: what was found, or why it does not work */
} msb_ns_probe;

typedef struct msb_ns_doctor {
	msb_ns_probe *probes;
	size_t n_probes;
	bool ok;      /* the ns backend can create sandboxes here */
	char *reason; /* one line: what it offers here, or the first thing missing */
} msb_ns_doctor;

/* Probe this host for the ns backend. Forks short-lived children for the namespace probes; no
 * mount or namespace outlives the call. */
int msb_ns__doctor(msb_ns_doctor **out, msb_error **err);
void msb_ns__doctor_free(msb_ns_doctor *d);

/* A shim's answer on its control socket: `line` and, with it, at most two
 * descriptors (SCM_RIGHTS). 0 or -errno. (control.c) */
int msb_ns__send_fds(int conn, const char *line, const int *fds, size_t n);

#endif
