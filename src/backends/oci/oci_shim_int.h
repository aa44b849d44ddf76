/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-oci-shim's own state and the steps its files share: oci_shim_main.c
 * (arguments, state directory, serving, teardown) and oci_shim_runtime.c
 * (the cgroup, the bundle, the runtime's process). Internal to the shim.
 */
#ifndef MSB_OCI_SHIM_INT_H
#define MSB_OCI_SHIM_INT_H

#include <stdbool.h>
#include <sys/types.h>

#include "backends/ns/boundary/shim.h"
#include "backends/oci/oci_relay.h"
#include "backends/oci/oci_rootfs.h"
#include "backends/oci/oci_shim.h"
#include "backends/oci/oci_stamps.h"
#include "../../../shim/vm_egress.h"

#define CONFIG_MAX (64 * 1024)
#define STALE_TIMEOUT_MS 2000
#define CONTROL_READ_MS 2000
#define START_TIMEOUT_MS 60000
#define RUNTIME_EXIT_MS 3000
#define TAIL_MAX 600
/* runsc: the host's cgroup limits for guest limits of N processes and M bytes:
 * gVisor's own threads (about 80 at rest, about 10 per guest process) and
 * memory (its sentry, gofer and runsc run: about 50 MiB) come on top. */
#define RUNSC_PIDS_BASE 256u
#define RUNSC_PIDS_PER_TASK 16u
#define RUNSC_MEMORY_OVERHEAD (128ull << 20)

struct shim {
	char *state_dir;
	char *agent;
	char *config_path;
	char *name;
	const char *log_path;
	const char *agent_log_path;
	bool remove_dir;
	bool pool;   /* --pool: a pooled sandbox (docs/pool.md) */
	bool daemon; /* --daemon: fork at once; the first process exits */
	/* --cgroup-key: what the cgroup leaf's digest is taken over instead of
	 * the state directory (a pooled sandbox: <root>/oci/<name>, named as a
	 * keyed one would be); dropped once a claim moved the directory. */
	char *cgroup_key;
	int ready_fd;
	int dfd;
	int pfd;	   /* the private tmpfs, <state>/run, while the sandbox is up */
	char *private_dir; /* its path */
	int work_fd;
	int agent_log_fd;
	int ctl_fd;
	int ctl_conn;
	oci_shim_config cfg;
	msb_ns_cgroup *cg;
	oci_rootfs rf;
	char **host_binds;
	pid_t rt_pid; /* the runtime's `run` */
	int rt_pidfd;
	int rt_go;	     /* its release (fork_runtime) */
	int out_fd;	     /* the runtime's (and the init's) stdout and stderr */
	char tail[TAIL_MAX]; /* their last bytes, for an error message */
	size_t tail_len;
	oci_relay *relay;
	bool wrote_pid;
	oci_stamps up, down;
	/* egress allowlist: egress.json, and msb-vm-shim's proxy process
	 * (shim/vm_egress.c) on a host connection to this shim's relay */
	char *egress_json;
	size_t egress_len;
	vm_egress egress;
	int sig_fd; /* the signalfd serve() watches */
};

/* Take the sandbox down, report "error: ..." and exit 1. */
_Noreturn void die(struct shim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void die_err(struct shim *s, msb_error *e);
/* Did pidfd's process end within timeout_ms? */
bool wait_pidfd(int pidfd, int timeout_ms);

/* oci_shim_runtime.c, in the order start_sandbox calls them: the cgroup
 * (made, limits written), the runtime's process forked (it joins the cgroup
 * and waits), the bundle written, the process released to exec the runtime,
 * and the container's pid recorded as init.pid. Each dies on failure. */
void make_cgroup(struct shim *s);
void fork_runtime(struct shim *s, int sock);
void write_bundle(struct shim *s);
void release_runtime(struct shim *s);
void record_init(struct shim *s);

#endif
