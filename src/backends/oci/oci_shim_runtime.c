/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-oci-shim: the sandbox's cgroup, the bundle and the runtime's process
 * (oci_shim_int.h says the order). docs/internals/oci-backend.md, "Start".
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/oci/oci_shim_int.h"
#include "backends/oci/oci_spec.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/syscalls.h"

void make_cgroup(struct shim *s)
{
	msb_error *e = NULL;
	uint8_t d[32];
	msb_sha256 h;
	msb__sha256_init(&h);
	const char *key = s->cgroup_key ? s->cgroup_key : s->state_dir;
	msb__sha256_update(&h, key, strlen(key));
	msb__sha256_final(&h, d);
	_cleanup_free_ char *leaf =
		msb__asprintf("%s-%02x%02x%02x%02x", s->name, d[0], d[1], d[2], d[3]);
	if (!leaf)
		die(s, "out of memory");
	/* runsc: the host's limits hold gVisor as well as the guest (load_config). */
	msb_ns_config host = s->cfg.ns;
	if (s->cfg.runtime == OCI_RUNSC) {
		if (host.memory_max)
			host.memory_max += RUNSC_MEMORY_OVERHEAD;
		if (host.pids_max)
			host.pids_max =
				host.pids_max > (4194304 - RUNSC_PIDS_BASE) / RUNSC_PIDS_PER_TASK
					? 4194304
					: RUNSC_PIDS_BASE + RUNSC_PIDS_PER_TASK * host.pids_max;
	}
	if (msb_ns__cgroup_plan(&host, leaf, &s->cg, &e) < 0)
		die_err(s, e);
	if (!s->cg)
		return;
	_cleanup_free_ char *rec = msb_ns__cgroup_record(s->cg);
	if (!rec)
		die(s, "out of memory");
	int r = msb__write_file_atomic_at(s->dfd, MSB_NS_STATE_CGROUPS, rec, strlen(rec), 0644);
	if (r < 0)
		die(s, "write %s: %s", MSB_NS_STATE_CGROUPS, strerror(-r));
	if (msb_ns__cgroup_setup(s->cg, &e) < 0)
		die_err(s, e);
}

/* The files a process writes "0" to to move itself into the sandbox's
 * cgroup: each v1 hierarchy's `tasks`, or the v2 `cgroup.procs`. */
static size_t cgroup_self_fds(struct shim *s, int *fds, size_t max)
{
	if (!s->cg)
		return 0;
	msb_error *e = NULL;
	size_t n = 0;
	if (msb_ns__cgroup_version(s->cg) == 1) {
		if (msb_ns__cgroup_tasks_fds(s->cg, fds, max, &n, &e) < 0)
			die_err(s, e);
		return n;
	}
	const char *dir = msb_ns__cgroup_path(s->cg, "memory");
	if (!dir)
		dir = msb_ns__cgroup_path(s->cg, "pids");
	if (!dir)
		return 0;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	/* guest-names: ok - cgroupfs, the sandbox's own directory */
	fds[0] = open(path, O_WRONLY | O_CLOEXEC);
	if (fds[0] < 0)
		die(s, "cgroup: open `%s`: %s", path, strerror(errno));
	return 1;
}

void write_bundle(struct shim *s)
{
	if (s->cfg.ns.image == MSB_NS_IMAGE_HOST && !s->host_binds &&
	    oci_rootfs_host_binds(!s->rf.copy_etc, &s->host_binds) < 0)
		die(s, "list the host's directories: %s", strerror(errno));
	oci_spec_input in = {
		.cfg = &s->cfg,
		.state_dir = s->state_dir,
		.private_dir = s->private_dir,
		.agent_path = s->agent,
		.host_binds = s->host_binds,
	};
	_cleanup_free_ char *text = NULL;
	if (oci_spec_write(&in, &text) < 0)
		die(s, "out of memory");
	if (mkdirat(s->pfd, OCI_STATE_BUNDLE, 0700) < 0 && errno != EEXIST)
		die(s, "create bundle/: %s", strerror(errno));
	_cleanup_close_ int bfd =
		openat(s->pfd, OCI_STATE_BUNDLE, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (bfd < 0)
		die(s, "open bundle/: %s", strerror(errno));
	int r = msb__write_file_atomic_at(bfd, "config.json", text, strlen(text), 0600);
	if (r < 0)
		die(s, "write bundle/config.json: %s", strerror(-r));
	if (mkdirat(s->pfd, OCI_STATE_RUNTIME, 0700) < 0 && errno != EEXIST)
		die(s, "create runtime/: %s", strerror(errno));
}

/* argv of the runtime's `run`, NULL-terminated, in `v` (at most 32). */
static void runtime_argv(struct shim *s, const char **v, char *root, char *bundle, char *pidfile)
{
	size_t n = 0;
	v[n++] = s->cfg.runtime_path;
	v[n++] = "--root";
	v[n++] = root;
	switch (s->cfg.runtime) {
	case OCI_RUNSC:
		/* No network device but lo; no cgroups of its own (the shim's hold
		 * it); no overlay of its own (the root's writes reach the shim's,
		 * whose upper directory the host reads); logs to its stderr. */
		v[n++] = "--network";
		v[n++] = "none";
		v[n++] = "--ignore-cgroups";
		v[n++] = "--overlay2";
		v[n++] = "none";
		v[n++] = "--platform";
		v[n++] = s->cfg.platform;
		v[n++] = "--log-fd";
		v[n++] = "2";
		/* MSB_OCI_RUNSC_DEBUG=DIR/: gVisor's own debug logs (and strace) there. */
		if (getenv("MSB_OCI_RUNSC_DEBUG") && getenv("MSB_OCI_RUNSC_DEBUG")[0] == '/') {
			v[n++] = "--debug";
			v[n++] = "--strace";
			v[n++] = "--debug-log";
			v[n++] = getenv("MSB_OCI_RUNSC_DEBUG");
		}
		break;
	case OCI_CRUN:
		v[n++] = "--cgroup-manager=disabled";
		break;
	case OCI_RUNC:
		break;
	}
	v[n++] = "run";
	v[n++] = "--bundle";
	v[n++] = bundle;
	v[n++] = "--pid-file";
	v[n++] = pidfile;
	v[n++] = s->name;
	v[n] = NULL;
}

/*
 * Fork the runtime's process, early: stdin is `sock` (the agent's
 * connection), stdout and stderr a pipe the shim drains. It moves itself
 * into the sandbox's cgroup at once - a v1 move may wait for an RCU grace
 * period (DESIGN §8), which so runs while the shim builds the root and the
 * bundle - then waits for release_runtime before it execs the runtime: the
 * runtime and all it starts are in the cgroup. It dies with the shim.
 */
void fork_runtime(struct shim *s, int sock)
{
	_cleanup_free_ char *root = msb__asprintf("%s/%s", s->private_dir, OCI_STATE_RUNTIME);
	_cleanup_free_ char *bundle = msb__asprintf("%s/%s", s->private_dir, OCI_STATE_BUNDLE);
	_cleanup_free_ char *pidfile =
		msb__asprintf("%s/%s", s->private_dir, OCI_STATE_CONTAINER_PID);
	if (!root || !bundle || !pidfile)
		die(s, "out of memory");
	const char *argv[32];
	runtime_argv(s, argv, root, bundle, pidfile);
	int cgfds[8];
	size_t ncg = cgroup_self_fds(s, cgfds, 8);
	int go[2], out[2];
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		die(s, "pipe: %s", strerror(errno));
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		die(s, "fork: %s", strerror(errno));
	if (pid == 0) {
		/* Only async-signal-safe calls from here to execve. */
		close(go[1]);
		close(out[0]);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(127);
		for (size_t i = 0; i < ncg; i++)
			if (write(cgfds[i], "0", 1) != 1) {
				static const char msg[] = "msb-oci-shim: the runtime's process "
							  "cannot join the sandbox's cgroup\n";
				ssize_t w = write(out[1], msg, sizeof(msg) - 1);
				(void)w;
				_exit(127);
			}
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		if (dup2(sock, STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0 ||
		    dup2(out[1], STDERR_FILENO) < 0)
			_exit(127);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		extern char **environ;
		execve(argv[0], (char *const *)argv, environ);
		_exit(127);
	}
	for (size_t i = 0; i < ncg; i++)
		close(cgfds[i]);
	close(go[0]);
	close(out[1]);
	s->rt_pid = pid;
	s->rt_go = go[1];
	s->rt_pidfd = msb__sys_pidfd_open(pid, 0);
	if (s->rt_pidfd < 0)
		die(s, "pidfd of the runtime: %s", strerror(-s->rt_pidfd));
	s->out_fd = out[0];
	int fl = fcntl(s->out_fd, F_GETFL);
	fcntl(s->out_fd, F_SETFL, fl | O_NONBLOCK);
}

/* The bundle is ready: the runtime's process may exec it. */
void release_runtime(struct shim *s)
{
	ssize_t w = write(s->rt_go, "g", 1);
	close(s->rt_go);
	s->rt_go = -1;
	if (w != 1)
		die(s, "release the runtime: %s", w < 0 ? strerror(errno) : "short write");
}

/* The runtime's --pid-file names the container's process (crun: its init;
 * runsc: the sandbox's sentry); init.pid records it with its start time. */
void record_init(struct shim *s)
{
	_cleanup_free_ char *text = NULL;
	/* crun writes it once the container runs, which may be after the
	 * agent's HELLO: wait for it a little. */
	int r;
	long pid = 0;
	int64_t deadline = msb__now_ns() + 5000000000LL;
	for (;;) {
		free(text);
		text = NULL;
		r = msb__read_file_at(s->pfd, OCI_STATE_CONTAINER_PID, 64, &text, NULL);
		char *end = NULL;
		errno = 0;
		pid = r == 0 ? strtol(text, &end, 10) : 0;
		if (r == 0 && !errno && end != text && pid > 0 && pid <= INT32_MAX)
			break;
		/* Absent, or not whole yet (it is not written atomically). */
		if ((r < 0 && r != -ENOENT) || msb__now_ns() >= deadline ||
		    wait_pidfd(s->rt_pidfd, 1))
			die(s, "the runtime wrote no pid to %s: %s", OCI_STATE_CONTAINER_PID,
			    r < 0 ? strerror(-r) : "not a pid");
	}
	uint64_t start;
	r = msb_ns__proc_start_time((pid_t)pid, &start);
	if (r == 0)
		r = msb_ns__write_pid_file(s->dfd, MSB_NS_STATE_INIT_PID, (pid_t)pid, start);
	if (r < 0)
		die(s, "write %s: %s", MSB_NS_STATE_INIT_PID, strerror(-r));
}
