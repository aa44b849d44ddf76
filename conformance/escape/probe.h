/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-escape-probe's parts (escape-probe.c: the table and main; one file
 * per group of probes, as docs/security.md lists them).
 */
#ifndef MSB_ESCAPE_PROBE_H
#define MSB_ESCAPE_PROBE_H

#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef AF_PACKET
#define AF_PACKET 17
#endif

struct ctx {
	const char *canary;    /* a host file the guest must not read */
	const char *canary_w;  /* a host path the guest must not create */
	const char *neighbour; /* another sandbox's file, by its host path */
	const char *shim_sock; /* this sandbox's shim socket, by its host path */
	const char *abstract;  /* a host abstract unix socket name */
	int tcp_port;	       /* a host TCP listener on 127.0.0.1 */
	int host_pid;	       /* a host process to signal */
	uint64_t memory;       /* the sandbox's limits, for the fill probes */
	uint64_t pids;
	uint64_t writable;
	const char *swap_base;	 /* the storage base, as the guest sees it */
	const char *swap_target; /* a host file, by its host path, for the links */
	const char *swap_dir;	 /* a host directory, by its host path */
	double swap_seconds;	 /* how long the link-swap probe runs */
	const char *bomb;	 /* where to plant the listing bomb (in the storage base) */
	const char *init;	 /* a word of the sandbox's own PID 1's command line */
};

struct res {
	const char *outcome;
	char detail[512];
};

typedef void (*probe_fn)(const struct ctx *c, struct res *r);

struct probe {
	const char *name;
	const char *why;
	probe_fn run;
};

/* ---- probe_util.c ------------------------------------------------------------- */

/* Set this process's OOM score adjustment ("1000": offer it first; "0": the
 * reporter, which every workload may lower itself to). Best effort. */
void oom_adj(const char *value);
/* oom_adj("1000"): a filler's, in the child that fills. */
void oom_first(void);
void set(struct res *r, const char *outcome, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The errno's name ("EPERM"), else strerror(). */
const char *errname(int e);
/* A system call that must fail: rc < 0 is blocked, anything else escaped. */
void must_fail(struct res *r, long rc, const char *what);
/* Read up to 64 bytes of a file: blocked when it cannot be opened. */
void must_not_read(struct res *r, const char *path);

/* ---- the probes ------------------------------------------------------------- */

/* probe_files.c: host files, other sandboxes, /proc and /sys */
void p_canary(const struct ctx *c, struct res *r);
void p_canary_write(const struct ctx *c, struct res *r);
void p_neighbour(const struct ctx *c, struct res *r);
void p_proc_root(const struct ctx *c, struct res *r);
void p_host_home(const struct ctx *c, struct res *r);
void p_shadow(const struct ctx *c, struct res *r);
void p_handle(const struct ctx *c, struct res *r);
void p_chroot(const struct ctx *c, struct res *r);
void p_exe_write(const struct ctx *c, struct res *r);
void p_fds(const struct ctx *c, struct res *r);
void p_pid1(const struct ctx *c, struct res *r);
void p_host_pids(const struct ctx *c, struct res *r);
void p_kallsyms(const struct ctx *c, struct res *r);
void p_add_key(const struct ctx *c, struct res *r);
void p_keyctl(const struct ctx *c, struct res *r);
void p_proc_keys(const struct ctx *c, struct res *r);
void p_sysrq(const struct ctx *c, struct res *r);
void p_core_pattern(const struct ctx *c, struct res *r);
void p_kcore(const struct ctx *c, struct res *r);
void p_sys_write(const struct ctx *c, struct res *r);
void p_cgroup_write(const struct ctx *c, struct res *r);
void p_dmesg(const struct ctx *c, struct res *r);
void p_uid_map(const struct ctx *c, struct res *r);

/* probe_kernel.c: mounting and namespaces, ptrace and process_vm on PID 1, kernel facilities */
void p_mount_tmpfs(const struct ctx *c, struct res *r);
void p_remount(const struct ctx *c, struct res *r);
void p_umount_mask(const struct ctx *c, struct res *r);
void p_unshare_user(const struct ctx *c, struct res *r);
void p_clone_newuser(const struct ctx *c, struct res *r);
void p_setns(const struct ctx *c, struct res *r);
void p_pivot_root(const struct ctx *c, struct res *r);
void p_ptrace(const struct ctx *c, struct res *r);
void p_process_vm(const struct ctx *c, struct res *r);
void p_proc_mem(const struct ctx *c, struct res *r);
void p_kill_pid1(const struct ctx *c, struct res *r);
void p_init_module(const struct ctx *c, struct res *r);
void p_finit_module(const struct ctx *c, struct res *r);
void p_kexec(const struct ctx *c, struct res *r);
void p_bpf(const struct ctx *c, struct res *r);
void p_perf(const struct ctx *c, struct res *r);
void p_userfaultfd(const struct ctx *c, struct res *r);
void p_io_uring(const struct ctx *c, struct res *r);
void p_reboot(const struct ctx *c, struct res *r);
void p_swapon(const struct ctx *c, struct res *r);
void p_iopl(const struct ctx *c, struct res *r);

/* probe_sockets.c: sockets: raw, packet, outbound, loopback, abstract, the shim, the proxy */
void p_raw(const struct ctx *c, struct res *r);
void p_packet(const struct ctx *c, struct res *r);
void p_outbound(const struct ctx *c, struct res *r);
void p_host_tcp(const struct ctx *c, struct res *r);
void p_metadata(const struct ctx *c, struct res *r);
void p_abstract(const struct ctx *c, struct res *r);
void p_shim_sock(const struct ctx *c, struct res *r);
void p_proxy(const struct ctx *c, struct res *r);

/* probe_limits.c: signals outside, rlimits, resource limits */
void p_signal_host(const struct ctx *c, struct res *r);
void p_pidfd(const struct ctx *c, struct res *r);
void p_rlimit_nofile(const struct ctx *c, struct res *r);
void p_rlimit_nproc(const struct ctx *c, struct res *r);
void p_rlimit_core(const struct ctx *c, struct res *r);
void p_memory(const struct ctx *c, struct res *r);
void p_pids(const struct ctx *c, struct res *r);
void p_disk(const struct ctx *c, struct res *r);
void p_shm(const struct ctx *c, struct res *r);

/* probe_privileges.c: devices, privileges, time and hostname */
void p_mknod(const struct ctx *c, struct res *r);
void p_dev_nodes(const struct ctx *c, struct res *r);
void p_caps(const struct ctx *c, struct res *r);
void p_nnp(const struct ctx *c, struct res *r);
void p_setuid_bin(const struct ctx *c, struct res *r);
void p_seccomp(const struct ctx *c, struct res *r);
void p_settimeofday(const struct ctx *c, struct res *r);
void p_clock_settime(const struct ctx *c, struct res *r);
void p_adjtimex(const struct ctx *c, struct res *r);
void p_sethostname(const struct ctx *c, struct res *r);
void p_setdomainname(const struct ctx *c, struct res *r);
/* A field of /proc/self/status ("CapEff", "Seccomp"); false when absent. */
bool status_field(const char *key, char *out, size_t size);

/* probe_agent.c: PID 1 out of a workload's reach (issue 15) */
void p_pid1_oom_score(const struct ctx *c, struct res *r);
void p_pid1_environ(const struct ctx *c, struct res *r);
void p_pid1_maps(const struct ctx *c, struct res *r);
void p_signal_pid1(const struct ctx *c, struct res *r);

/* probe_hostops.c: the host's operations on guest names (issue 15) */
void p_listing_bomb(const struct ctx *c, struct res *r);
void p_link_swap(const struct ctx *c, struct res *r);

#endif
