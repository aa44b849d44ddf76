/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the three per-sandbox shims (msb-shim, msb-vm-shim, msb-oci-shim)
 * share: the log line, the one report on --ready-fd, detaching from whoever
 * started them, the state directory's checks, the pid file and the signals
 * they stop on. A failure is returned, never acted on: each shim dies its
 * own way (it takes down what it built and reports).
 */
#ifndef MSB_BACKENDS_NS_BOUNDARY_SHIM_H
#define MSB_BACKENDS_NS_BOUNDARY_SHIM_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

/* One line to stderr (the shim's log file), in one write; at most 1 KiB. */
void msb_ns__shim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void msb_ns__shim_vlog(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Write `line` to *ready_fd when it is open, then close it and set it to -1:
 * the starter hears once. */
void msb_ns__shim_report(int *ready_fd, const char *line);

/* --ready-fd's value: an open descriptor above 2 (made close-on-exec), or -1
 * when the value is not one. */
int msb_ns__shim_ready_fd(const char *value);

/* --daemon: fork at once; the first process exits (whoever started it
 * reaps it at once) and the shim goes on in the child, re-parented, that
 * nobody waits for. 0 in the child, or -errno (no fork). */
int msb_ns__shim_daemon(void);

/* A process group of its own (not a session: see shim.c), cwd "/", stdin
 * from /dev/null, stdout and stderr to log_path (appended, created 0600,
 * never through a link) or /dev/null. 0, or -1 with what failed in why. */
int msb_ns__shim_detach(const char *log_path, char *why, size_t size);

/* Open state_dir (a directory, not a link) into *dfd and check that it is
 * ours and not group/other writable. 0, or -1 with why (*dfd may be open). */
int msb_ns__shim_open_state(const char *state_dir, int *dfd, char *why, size_t size);

/* A pooled sandbox's shim (--pool, docs/pool.md): lock its directory dfd
 * until the sandbox is ready (a claim passes over a pooled sandbox it cannot
 * lock, a drain waits for it), and refuse to start there when a drain came
 * first (the directory or its pool.json is gone). 0, or -1 with why. */
int msb_ns__shim_pool_lock(int dfd, const char *state_dir, char *why, size_t size);

/* The shim recorded in dfd/shim.pid: 1 when it still runs (*pid), 0 when it
 * is gone (its leftovers are to be purged), -1 when there is no record. */
int msb_ns__shim_previous(int dfd, pid_t *pid);

/* Record this process (pid and start time) in dfd/shim.pid. 0 or -errno. */
int msb_ns__shim_write_pid(int dfd);

/* Block SIGTERM, SIGINT, SIGHUP and SIGQUIT and return a signalfd for them
 * (nonblocking, close-on-exec), or -errno. */
int msb_ns__shim_signalfd(void);

#endif
