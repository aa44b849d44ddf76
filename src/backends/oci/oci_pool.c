/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `oci` backend's side of the warm pool (docs/pool.md): the pool itself
 * is ns_pool.c's - templates, pooled directories under <state>/oci/pool/,
 * claims by rename, refills, fill/list/drain - and reaches the oci backend
 * through these: the runtime's keys in a template, msb-oci-shim started
 * with --pool, the oci purge, and a claimed sandbox's handle and identity.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include <jansson.h>

#include "backends/oci/oci_int.h"
#include "util/syscalls.h"

/* The runtime's keys: a template of another runtime is another template. */
static int config_extra(const ns_backend *nb, json_t *cfg, msb_error **err)
{
	const oci_backend *b = (const oci_backend *)nb;
	if (json_object_set_new(cfg, "runtime", json_string(msb_oci__runtime_name(b->runtime))) <
		    0 ||
	    json_object_set_new(cfg, "runtime_path", json_string(b->runtime_path)) < 0 ||
	    (b->platform && json_object_set_new(cfg, "platform", json_string(b->platform)) < 0))
		return msb__error_nomem(err);
	return 0;
}

static const char *runtime_binary(const ns_backend *nb)
{
	return ((const oci_backend *)nb)->runtime_path;
}

/*
 * Start msb-oci-shim on `dir`, detached (forked twice: nobody's child here,
 * never our zombie). With `ready`, *ready gets the pipe the shim reports on:
 * "ok\n" once the agent answered, or "error: REASON\n" (msb_ns__shim_await);
 * without, nobody waits (a refill: with `pool` the shim holds the directory's
 * lock until it is ready). A pooled sandbox's cgroup is named as a keyed one
 * of this state root would be (<root>/oci/<name>): what leak checks look for.
 */
int msb_oci__shim_spawn(const ns_backend *b, const char *dir, bool egress, bool pool, int *ready,
			msb_error **err)
{
	(void)egress; /* closed only: no proxy */
	_cleanup_free_ char *cfg = msb__asprintf("%s/shim.json", dir);
	const char *base = strrchr(dir, '/');
	_cleanup_free_ char *cgkey =
		pool ? msb__asprintf("%s/%s", b->state_dir, base ? base + 1 : dir) : NULL;
	if (!cfg || (pool && !cgkey))
		return msb__error_nomem(err);
	const char *argv[16];
	size_t k = 0;
	argv[k++] = b->shim_path;
	argv[k++] = "--state";
	argv[k++] = dir;
	argv[k++] = "--agent";
	argv[k++] = b->agent_path;
	argv[k++] = "--config";
	argv[k++] = cfg;
	if (ready) {
		argv[k++] = "--ready-fd";
		argv[k++] = "3";
	}
	if (pool) {
		argv[k++] = "--pool";
		argv[k++] = "--cgroup-key";
		argv[k++] = cgkey;
	}
	argv[k] = NULL;
	int pipefd[2] = {-1, -1};
	if (ready && pipe2(pipefd, O_CLOEXEC) < 0)
		return msb__error_errno(err, errno, "cannot start the oci shim");
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t child = fork();
	if (child == 0) {
		/* Only async-signal-safe calls from here to execve. */
		if (fork() != 0)
			_exit(0);
		if (pipefd[1] == 3) {
			int fl = fcntl(3, F_GETFD);
			fcntl(3, F_SETFD, fl & ~FD_CLOEXEC);
		} else if (pipefd[1] >= 0 && dup2(pipefd[1], 3) < 0) {
			_exit(127);
		}
		/* guest-names: ok - /dev/null */
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		/* Nothing else of the caller's outlives it in the shim. */
		msb__sys_close_range(pipefd[1] >= 0 ? 4 : 3, ~0U, 0);
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		for (int s = 1; s < 65; s++)
			sigaction(s, &dfl, NULL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		extern char **environ;
		execve(b->shim_path, (char *const *)argv, environ);
		_exit(127);
	}
	int fork_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (child < 0) {
		if (pipefd[0] >= 0)
			close(pipefd[0]);
		return msb__error_errno(err, fork_errno, "cannot start the oci shim");
	}
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	if (ready)
		*ready = pipefd[0];
	return 0;
}

static int purge(const char *dir, int timeout_ms, msb_error **err)
{
	return msb_oci__state_purge(dir, false, timeout_ms, err);
}

static int claimed(ns_backend *nb, const char *name, int sfd, const msb_ns_labels *labels,
		   int shim_pidfd, const char *hostname, bool egress, double timeout,
		   msb_sandbox **out, msb_error **err)
{
	(void)sfd;
	(void)egress;
	if (shim_pidfd >= 0)
		close(shim_pidfd);
	msb_sandbox *sb = NULL;
	int r = msb_oci__sandbox_new((const oci_backend *)nb, name, labels, &sb, err);
	if (r == 0 && (r = msb_oci__sandbox_identity(sb, hostname, timeout, err)) < 0) {
		msb_sandbox_free(sb);
		sb = NULL;
	}
	*out = sb;
	return r;
}

const ns_pool_ops msb_oci__pool_ops = {
	.what = "oci",
	.dir_mode = 0711,
	.config_extra = config_extra,
	.extra_binary = runtime_binary,
	.spawn = msb_oci__shim_spawn,
	.await = msb_ns__shim_await,
	.purge = purge,
	.claimed = claimed,
};
