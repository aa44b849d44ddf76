/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-oci-shim: creates one `oci` sandbox, holds it, and takes it down.
 *
 *   msb-oci-shim --state DIR --agent PATH --config FILE [--ready-fd N]
 *                [--name NAME] [--log FILE] [--agent-log FILE] [--remove-state-dir]
 *                [--pool --cgroup-key KEY] [--daemon]
 *
 * In its own mount namespace it builds the root (oci_rootfs.h), writes the
 * bundle (oci_spec.h), and runs the OCI runtime's `run` with msb-agent
 * --stdio as the container's init: the runtime's stdin is one end of a
 * socket pair whose other end the shim keeps. Hosts connect to agent.sock;
 * the relay (oci_relay.h) carries their channels onto that one connection.
 * The runtime, and with it every process it starts (gVisor's sentry and
 * gofer, crun's container), runs in the sandbox's cgroup, so the limits hold
 * them all and a teardown finds them all. Control socket (shim.sock) and
 * state files as msb-shim's; docs/internals/oci-backend.md has the details.
 * --pool: a pooled sandbox (docs/pool.md), its directory locked until it is
 * ready; a claim renames the directory and says `identity` on the control
 * socket before it gives the agent the key's host name.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "backends/oci/oci_shim_int.h"
#include "util/fs.h"
#include "util/syscalls.h"

static void report(struct shim *s, const char *line)
{
	msb_ns__shim_report(&s->ready_fd, line);
}

/* ---- the runtime's output ------------------------------------------------------- */

/* Read what is there (nonblocking): keep the tail for messages, copy to the
 * agent log when there is one. Bounded per call. */
static void drain_output(struct shim *s)
{
	char buf[4096];
	for (int i = 0; s->out_fd >= 0 && i < 16; i++) {
		ssize_t n = read(s->out_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno != EAGAIN)) {
			close(s->out_fd);
			s->out_fd = -1;
			return;
		}
		if (n < 0)
			return;
		if (s->agent_log_fd >= 0) {
			ssize_t w = write(s->agent_log_fd, buf, (size_t)n);
			(void)w;
		}
		size_t k = (size_t)n;
		if (k >= TAIL_MAX) {
			memcpy(s->tail, buf + k - TAIL_MAX, TAIL_MAX);
			s->tail_len = TAIL_MAX;
		} else {
			size_t keep = s->tail_len + k > TAIL_MAX ? TAIL_MAX - k : s->tail_len;
			memmove(s->tail, s->tail + s->tail_len - keep, keep);
			memcpy(s->tail + keep, buf, k);
			s->tail_len = keep + k;
		}
	}
}

/* The runtime's last words on one line, printable. */
static const char *last_words(struct shim *s, char *out, size_t size)
{
	drain_output(s);
	size_t n = s->tail_len < size - 1 ? s->tail_len : size - 1;
	memcpy(out, s->tail + s->tail_len - n, n);
	out[n] = '\0';
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = '\0';
	char *start = out;
	char *nl = strrchr(out, '\n');
	if (nl)
		start = nl + 1;
	for (char *p = start; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = ' ';
	return start;
}

/* ---- teardown -------------------------------------------------------------------- */

bool wait_pidfd(int pidfd, int timeout_ms)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	int r;
	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	return r > 0;
}

static void reap_runtime(struct shim *s)
{
	if (s->rt_pid > 0) {
		int status;
		while (waitpid(s->rt_pid, &status, 0) < 0 && errno == EINTR)
			;
		s->rt_pid = 0;
	}
	drain_output(s);
	if (s->out_fd >= 0) {
		close(s->out_fd);
		s->out_fd = -1;
	}
}

/* Stop the sandbox: nothing in it is worth a graceful end, so the agent's
 * connection goes, the runtime is killed, and the cgroup kills everything
 * else it started (a sentry, a gofer, the container's processes); then the
 * mounts go. Without a cgroup the agent's own exit on the connection's end
 * takes the container down, and the runtime gets the time to see it. Files
 * stay. */
static int stop_sandbox(struct shim *s)
{
	int ret = 0;
	oci_relay_free(s->relay);
	s->relay = NULL;
	if (s->rt_go >= 0) { /* never released: it exits on the pipe's end */
		close(s->rt_go);
		s->rt_go = -1;
	}
	oci_stamp(&s->down, "relay");
	if (s->rt_pidfd >= 0) {
		if (s->cg)
			msb__sys_pidfd_send_signal(s->rt_pidfd, SIGKILL, 0);
		else if (!wait_pidfd(s->rt_pidfd, RUNTIME_EXIT_MS)) {
			msb_ns__shim_log("msb-oci-shim: the runtime did not exit: killing it");
			msb__sys_pidfd_send_signal(s->rt_pidfd, SIGKILL, 0);
		}
		close(s->rt_pidfd);
		s->rt_pidfd = -1;
	}
	/* With a cgroup the runtime is reaped after it: its exit and the
	 * container's overlap, and the cgroup's removal waits for them all. */
	if (!s->cg)
		reap_runtime(s);
	oci_stamp(&s->down, "kill");
	if (s->cg) {
		/* Kills what the runtime left (a sentry, a gofer, a container
		 * whose runtime was killed), then removes the directories. */
		msb_error *e = NULL;
		if (msb_ns__cgroup_destroy(s->cg, &e) < 0) {
			msb_ns__shim_log("msb-oci-shim: %s", msb_error_message(e));
			ret = -1;
		}
		msb_error_free(e);
		msb_ns__cgroup_free(s->cg);
		s->cg = NULL;
	}
	reap_runtime(s);
	oci_stamp(&s->down, "cgroup");
	/* The root's mounts are below the private tmpfs: its lazy unmount takes
	 * them all at once (each unmount call costs the kernel an RCU grace
	 * period). Without it, one by one. */
	oci_rootfs_teardown(&s->rf, s->pfd < 0);
	if (s->pfd >= 0) {
		close(s->pfd);
		s->pfd = -1;
		oci_rootfs_private_release(s->dfd, OCI_STATE_PRIVATE);
	}
	oci_stamp(&s->down, "mounts");
	if (s->work_fd >= 0) {
		close(s->work_fd);
		s->work_fd = -1;
	}
	return ret;
}

static int teardown(struct shim *s)
{
	/* The proxy first: it closes its tunnels and writes their records. */
	vm_egress_stop(&s->egress);
	int ret = stop_sandbox(s);
	if (s->ctl_fd >= 0) {
		close(s->ctl_fd);
		s->ctl_fd = -1;
	}
	if (s->dfd >= 0 && s->wrote_pid) {
		int r = msb_oci__state_remove_files(s->dfd);
		if (r < 0) {
			msb_ns__shim_log("msb-oci-shim: remove the oci files: %s", strerror(-r));
			ret = -1;
		}
		r = msb_ns__state_remove_files(s->dfd, false);
		if (r < 0) {
			msb_ns__shim_log("msb-oci-shim: remove state files: %s", strerror(-r));
			ret = -1;
		}
		/* guest-names: ok - the state dir is host-private; rmdir never follows */
		if (s->remove_dir && ret == 0 && rmdir(s->state_dir) < 0 && errno != ENOENT) {
			msb_ns__shim_log("msb-oci-shim: remove `%s`: %s", s->state_dir,
					 strerror(errno));
			ret = -1;
		}
	}
	return ret;
}

_Noreturn void die(struct shim *s, const char *fmt, ...)
{
	char msg[900], line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	snprintf(line, sizeof(line), "error: %s\n", msg);
	msb_ns__shim_log("msb-oci-shim: %s", msg);
	teardown(s);
	report(s, line);
	if (s->ctl_conn >= 0) {
		ssize_t w = send(s->ctl_conn, line, strlen(line), MSG_NOSIGNAL);
		(void)w;
	}
	_exit(1);
}

_Noreturn void die_err(struct shim *s, msb_error *e)
{
	die(s, "%s", msb_error_message(e) ? msb_error_message(e) : "unknown error");
}

/* ---- set-up ---------------------------------------------------------------------- */

static int parse_args(struct shim *s, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--remove-state-dir") == 0) {
			s->remove_dir = true;
			continue;
		}
		if (strcmp(a, "--pool") == 0) {
			s->pool = true;
			continue;
		}
		if (strcmp(a, "--daemon") == 0) {
			s->daemon = true;
			continue;
		}
		if (!v)
			return -1;
		i++;
		if (strcmp(a, "--state") == 0) {
			s->state_dir = (char *)v;
		} else if (strcmp(a, "--agent") == 0) {
			s->agent = (char *)v;
		} else if (strcmp(a, "--config") == 0) {
			s->config_path = (char *)v;
		} else if (strcmp(a, "--name") == 0) {
			s->name = (char *)v;
		} else if (strcmp(a, "--log") == 0) {
			s->log_path = v;
		} else if (strcmp(a, "--agent-log") == 0) {
			s->agent_log_path = v;
		} else if (strcmp(a, "--cgroup-key") == 0) {
			s->cgroup_key = (char *)v;
		} else if (strcmp(a, "--ready-fd") == 0) {
			if ((s->ready_fd = msb_ns__shim_ready_fd(v)) < 0)
				return -1;
		} else {
			return -1;
		}
	}
	return s->state_dir && s->agent && s->config_path ? 0 : -1;
}

static void resolve_paths(struct shim *s)
{
	/* guest-names: ok - the agent binary: the host's */
	char *agent = realpath(s->agent, NULL);
	if (!agent)
		die(s, "agent `%s`: %s", s->agent, strerror(errno));
	s->agent = agent;
	/* guest-names: ok - shim.json in the host-private state dir */
	char *cfg = realpath(s->config_path, NULL);
	if (!cfg)
		die(s, "config `%s`: %s", s->config_path, strerror(errno));
	s->config_path = cfg;
	/* A pooled sandbox's directory is made by the library, and a drain may
	 * remove it before this shim gets to it: never make it anew. */
	/* guest-names: ok - the state dir: host-private */
	if (!s->pool && mkdir(s->state_dir, 0711) < 0 && errno != EEXIST)
		die(s, "state dir `%s`: %s", s->state_dir, strerror(errno));
	/* guest-names: ok - the state dir: host-private */
	char *dir = realpath(s->state_dir, NULL);
	if (!dir)
		die(s, "state dir `%s`: %s", s->state_dir, strerror(errno));
	s->state_dir = dir;
	if (!(s->private_dir = msb__asprintf("%s/%s", dir, OCI_STATE_PRIVATE)))
		die(s, "out of memory");
	const char *base = strrchr(dir, '/');
	s->name = strdup(s->name ? s->name : base && base[1] ? base + 1 : "sandbox");
	if (!s->name)
		die(s, "out of memory");
}

/* shim.json: at start, and again when a claim renamed the directory (its
 * copy there names the key's host name; the path given is stale). */
static void load_config(struct shim *s)
{
	/* guest-names: ok - shim.json, in the host-private state dir */
	_cleanup_close_ int fd =
		s->dfd >= 0 ? openat(s->dfd, "shim.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
			    : open(s->config_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(s, "config `%s`: %s", s->config_path, strerror(errno));
	_cleanup_free_ char *buf = malloc(CONFIG_MAX + 1);
	if (!buf)
		die(s, "out of memory");
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, CONFIG_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die(s, "config `%s`: %s", s->config_path, strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > CONFIG_MAX)
			die(s, "config `%s`: larger than %d bytes", s->config_path, CONFIG_MAX);
	}
	msb_error *e = NULL;
	msb_oci__shim_config_clear(&s->cfg);
	if (msb_oci__shim_config_parse(&s->cfg, buf, len, &e) < 0)
		die_err(s, e);
	/*
	 * Under gVisor the guest's processes are no host processes: the host's
	 * cgroup holds gVisor's own sentry, gofer and ptrace stubs, and the
	 * kernel's OOM killer (or a thread the sentry cannot make) takes the
	 * whole sandbox. So gVisor bounds each guest process itself, with the
	 * limits it enforces - RLIMIT_AS (one process maps at most the memory
	 * limit) and RLIMIT_NPROC (the pids limit counts guest processes) - and
	 * the cgroup (make_cgroup) leaves room for gVisor above them.
	 */
	if (s->cfg.runtime == OCI_RUNSC &&
	    ((s->cfg.ns.memory_max &&
	      msb_ns__config_set_rlimit(&s->cfg.ns, RLIMIT_AS, s->cfg.ns.memory_max) < 0) ||
	     (s->cfg.ns.pids_max &&
	      msb_ns__config_set_rlimit(&s->cfg.ns, RLIMIT_NPROC, s->cfg.ns.pids_max) < 0)))
		die(s, "out of memory");
}

static void detach(struct shim *s)
{
	char why[900];
	if (msb_ns__shim_detach(s->log_path, why, sizeof(why)) < 0)
		die(s, "%s", why);
}

/*
 * The runtime reaches the bundle's root and bind sources as the sandbox's
 * mapped root (a user namespace), which is nobody to the host: the state
 * directory and every directory above it must let others traverse.
 */
static void check_traversable(struct shim *s)
{
	_cleanup_free_ char *path = strdup(s->state_dir);
	if (!path)
		die(s, "out of memory");
	for (;;) {
		struct stat st;
		/* guest-names: ok - the state dir and its ancestors: the host's */
		if (stat(path, &st) < 0)
			die(s, "`%s`: %s", path, strerror(errno));
		if (!(st.st_mode & S_IXOTH))
			die(s,
			    "`%s` must be traversable by others (o+x): the runtime reaches the "
			    "sandbox's root as its mapped root, uid %u",
			    path, (unsigned)s->cfg.ns.uid_base);
		char *slash = strrchr(path, '/');
		if (!slash || slash == path)
			break;
		*slash = '\0';
	}
}

static void check_state_dir(struct shim *s)
{
	char why[900];
	if (msb_ns__shim_open_state(s->state_dir, &s->dfd, why, sizeof(why)) < 0)
		die(s, "%s", why);
	if (s->pool && msb_ns__shim_pool_lock(s->dfd, s->state_dir, why, sizeof(why)) < 0)
		die(s, "%s", why);
	if (fchmod(s->dfd, 0711) < 0)
		die(s, "state dir `%s`: %s", s->state_dir, strerror(errno));
	check_traversable(s);
	pid_t pid;
	int prev = msb_ns__shim_previous(s->dfd, &pid);
	if (prev > 0)
		die(s, "a shim (pid %d) already holds `%s`", (int)pid, s->state_dir);
	if (prev == 0) {
		msb_error *e = NULL;
		if (msb_oci__state_purge(s->state_dir, false, STALE_TIMEOUT_MS, &e) < 0)
			die(s, "clean up after a dead shim: %s", msb_error_message(e));
	}
}

static void write_pid(struct shim *s)
{
	int r = msb_ns__shim_write_pid(s->dfd);
	if (r < 0)
		die(s, "write %s: %s", MSB_NS_STATE_SHIM_PID, strerror(-r));
	s->wrote_pid = true;
}

static void make_work(struct shim *s)
{
	if (mkdirat(s->dfd, MSB_NS_STATE_WORK, 0700) < 0 && errno != EEXIST)
		die(s, "create work/: %s", strerror(errno));
	int fd = openat(s->dfd, MSB_NS_STATE_WORK, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		die(s, "work/ must be a directory: %s", strerror(errno));
	if (fchown(fd, s->cfg.ns.uid_base, s->cfg.ns.gid_base) < 0 || fchmod(fd, 0700) < 0) {
		close(fd);
		die(s, "own work/: %s", strerror(errno));
	}
	s->work_fd = fd;
}

static int listen_at(struct shim *s, const char *name, int backlog)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", s->state_dir, name);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", s->dfd, name);
	if (unlinkat(s->dfd, name, 0) < 0 && errno != ENOENT)
		die(s, "remove a stale %s: %s", name, strerror(errno));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die(s, "socket: %s", strerror(errno));
	/* guest-names: ok - the sockets live in the host-private state dir */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		die(s, "bind %s: %s", name, strerror(errno));
	}
	if (listen(fd, backlog) < 0) {
		close(fd);
		die(s, "listen: %s", strerror(errno));
	}
	return fd;
}

static void start_sandbox(struct shim *s)
{
	int64_t t0 = msb__now_ns();
	make_cgroup(s);
	oci_stamp(&s->up, "cgroup");
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		die(s, "socketpair: %s", strerror(errno));
	fork_runtime(s, sv[1]);
	close(sv[1]);
	oci_stamp(&s->up, "fork");
	make_work(s);
	oci_stamp(&s->up, "work");
	char why_[300];
	if (oci_rootfs_private_tmpfs(s->dfd, OCI_STATE_PRIVATE, &s->pfd, why_, sizeof(why_)) < 0)
		die(s, "%s", why_);
	oci_stamp(&s->up, "tmpfs");
	s->rf = (oci_rootfs)OCI_ROOTFS_INIT(&s->cfg.ns, s->pfd);
	s->rf.copy_etc = s->cfg.runtime == OCI_RUNSC;
	if (oci_rootfs_build(&s->rf) < 0)
		die(s, "root filesystem: %s", s->rf.err);
	oci_stamp(&s->up, "rootfs");
	write_bundle(s);
	oci_stamp(&s->up, "bundle");
	int64_t t1 = msb__now_ns();
	release_runtime(s);
	oci_stamp(&s->up, "release");
	if (oci_relay_new(sv[0], &s->relay) < 0)
		die(s, "out of memory");
	char why[300];
	if (oci_relay_handshake(s->relay, START_TIMEOUT_MS, why, sizeof(why)) < 0) {
		char words[TAIL_MAX + 1];
		wait_pidfd(s->rt_pidfd, 500);
		die(s, "%s did not start the sandbox: %s (%s)",
		    msb_oci__runtime_name(s->cfg.runtime), why,
		    last_words(s, words, sizeof(words)));
	}
	int64_t t2 = msb__now_ns();
	oci_stamp(&s->up, "hello");
	record_init(s);
	oci_stamp(&s->up, "init_pid");
	oci_relay_listen(s->relay, listen_at(s, MSB_NS_STATE_SOCKET, 128));
	oci_stamp(&s->up, "listen");
	msb_ns__shim_log(
		"msb-oci-shim: sandbox `%s` ready under %s: %.3f ms (root and bundle %.3f, "
		"runtime to the agent's HELLO %.3f)",
		s->name, msb_oci__runtime_name(s->cfg.runtime), (double)(t2 - t0) / 1e6,
		(double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6);
}

/* ---- the egress allowlist proxy (shim/vm_egress.c) ------------------------------- */

static void serve(struct shim *s, bool starting);

/* egress.json beside shim.json (a spec with egress `allowlist`). */
static void load_egress(struct shim *s)
{
	char why[600];
	if (vm_egress_load(s->state_dir, &s->egress_json, &s->egress_len, why, sizeof(why)) < 0)
		die(s, "%s", why);
}

/* With an allowlist: start the proxy - msb-shim's, in a process of its own,
 * a host of this shim's relay - and serve until it reports that the agent
 * listens, so that no exec starts before the proxy variables are right. A
 * failure takes the sandbox down. */
static void start_proxy(struct shim *s)
{
	if (!s->egress_json)
		return;
	char why[600];
	if (vm_egress_start(&s->egress, s->dfd, s->egress_json, s->egress_len, why, sizeof(why)) <
	    0)
		die(s, "%s", why);
	serve(s, true);
	if (s->egress.report >= 0)
		die(s, "egress: the sandbox or the shim stopped before the proxy was ready");
	oci_stamp(&s->up, "egress");
}

/* Reset: the pristine state of creation, from the same configuration. */
static void reset_sandbox(struct shim *s)
{
	msb_ns__shim_log("msb-oci-shim: reset of `%s`", s->name);
	s->up.n = s->down.n = 0;
	oci_stamp(&s->down, "reset");
	vm_egress_stop(&s->egress);
	if (stop_sandbox(s) < 0)
		die(s, "reset: the old sandbox did not go");
	unlinkat(s->dfd, MSB_NS_STATE_INIT_PID, 0);
	/* The private tmpfs went with the old sandbox; work/ goes here. */
	int r = msb__rm_rf_at(s->dfd, MSB_NS_STATE_WORK);
	if (r < 0)
		die(s, "reset: remove the old files: %s", strerror(-r));
	oci_stamp(&s->down, "files");
	oci_stamps_write(msb_oci__runtime_name(s->cfg.runtime), "reset-stop", &s->down);
	s->down.n = 0;
	oci_stamp(&s->up, "reset");
	start_sandbox(s);
	start_proxy(s);
	oci_stamps_write(msb_oci__runtime_name(s->cfg.runtime), "reset-start", &s->up);
	s->up.n = 0;
}

/*
 * A claim renamed this pooled sandbox's directory onto a key's and wrote
 * its shim.json (docs/pool.md): take the new paths and configuration (a
 * reset makes the sandbox again from them) and the key's host name into
 * the root's /etc. The agent sets the host name itself (IDENTITY).
 */
static void claimed(struct shim *s, char *reply, size_t size)
{
	char link[64], buf[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", s->dfd);
	/* guest-names: ok - the host's procfs link of our own descriptor */
	ssize_t n = readlink(link, buf, sizeof(buf) - 1);
	if (n <= 0 || buf[0] != '/') {
		snprintf(reply, size, "error: where is the state directory now: %s\n",
			 n < 0 ? strerror(errno) : "no path");
		return;
	}
	buf[n] = '\0';
	char *dir = strdup(buf);
	char *priv = msb__asprintf("%s/%s", buf, OCI_STATE_PRIVATE);
	if (!dir || !priv) {
		free(dir);
		free(priv);
		snprintf(reply, size, "error: out of memory\n");
		return;
	}
	msb_ns__shim_log("msb-oci-shim: `%s` is now `%s`", s->state_dir, dir);
	free(s->state_dir);
	s->state_dir = dir;
	free(s->private_dir);
	s->private_dir = priv;
	s->cgroup_key = NULL;
	load_config(s);
	if (oci_rootfs_rename_host(&s->rf, s->cfg.ns.hostname) < 0) {
		snprintf(reply, size, "error: %s\n", s->rf.err);
		return;
	}
	snprintf(reply, size, "ok\n");
}

static void serve_control(struct shim *s)
{
	int conn = accept4(s->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
	if (conn < 0)
		return;
	char line[MSB_NS_CONTROL_LINE_MAX];
	size_t len = 0;
	int64_t deadline = msb__now_ns() + (int64_t)CONTROL_READ_MS * 1000000;
	while (len < sizeof(line) - 1 && !memchr(line, '\n', len)) {
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		struct pollfd p = {.fd = conn, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t n = read(conn, line + len, sizeof(line) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	line[len] = '\0';
	char *nl = strchr(line, '\n');
	if (!nl) {
		close(conn);
		return;
	}
	*nl = '\0';
	if (strcmp(line, MSB_NS_CONTROL_FDS) == 0) {
		int fds[2] = {s->rf.layer_fd, s->rf.shm_fd};
		if (fds[0] < 0 || fds[1] < 0)
			msb_ns__send_fds(conn, "error: the writable layer is not held\n", NULL, 0);
		else
			msb_ns__send_fds(conn, "ok\n", fds, 2);
	} else if (strcmp(line, OCI_CONTROL_IDENTITY) == 0) {
		char reply[600];
		claimed(s, reply, sizeof(reply));
		msb_ns__send_fds(conn, reply, NULL, 0);
	} else if (strcmp(line, MSB_NS_CONTROL_RESET) == 0) {
		s->ctl_conn = conn;
		reset_sandbox(s);
		s->ctl_conn = -1;
		msb_ns__send_fds(conn, "ok\n", NULL, 0);
	} else {
		msb_ns__send_fds(conn, "error: unknown request\n", NULL, 0);
	}
	close(conn);
}

/* Serve until the sandbox ends, a signal comes, or the agent's connection
 * goes. `starting`: while the egress proxy starts (start_proxy), return
 * once it reported (no control requests meanwhile); a signal or the
 * sandbox's end then is a failed start. */
static void serve(struct shim *s, bool starting)
{
	int sfd = s->sig_fd;
	size_t cap = 5 + 2 + OCI_RELAY_MAX_PEERS;
	struct pollfd *p = calloc(cap, sizeof(*p));
	if (!p)
		die(s, "out of memory");
	for (;;) {
		p[0] = (struct pollfd){.fd = s->rt_pidfd, .events = POLLIN};
		p[1] = (struct pollfd){.fd = sfd, .events = POLLIN};
		p[2] = (struct pollfd){.fd = starting ? -1 : s->ctl_fd, .events = POLLIN};
		p[3] = (struct pollfd){.fd = s->out_fd, .events = POLLIN};
		/* The proxy: its start report, then its exit. */
		p[4] = (struct pollfd){.fd = s->egress.report >= 0 ? s->egress.report
								   : s->egress.pidfd,
				       .events = POLLIN};
		size_t n = 5 + oci_relay_fill(s->relay, p + 5, cap - 5);
		int pr = poll(p, n, oci_relay_timeout_ms(s->relay));
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			msb_ns__shim_log("msb-oci-shim: poll: %s", strerror(errno));
			break;
		}
		if (p[3].revents)
			drain_output(s);
		if (p[0].revents && starting) {
			free(p);
			return; /* start_proxy dies, with the runtime's words */
		}
		if (p[4].revents) {
			char why[600];
			if (s->egress.report >= 0) {
				if (vm_egress_report(&s->egress, why, sizeof(why)) < 0)
					die(s, "%s", why);
				if (starting) {
					free(p);
					return;
				}
			} else {
				/* Its connection to the relay ended: egress is closed
				 * (the agent's tunnels are refused) until a reset. */
				msb_ns__shim_log("msb-oci-shim: the egress proxy exited");
				vm_egress_stop(&s->egress);
			}
		}
		if (p[0].revents) {
			oci_stamp(&s->down, "runtime_exit");
			char words[TAIL_MAX + 1];
			msb_ns__shim_log(
				"msb-oci-shim: the runtime exited: the sandbox is gone (%s)",
				last_words(s, words, sizeof(words)));
			break;
		}
		if (p[1].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (starting)
					die(s, "signal %u during start", (unsigned)si.ssi_signo);
				oci_stamp(&s->down, "signal");
				msb_ns__shim_log("msb-oci-shim: signal %u: taking the sandbox down",
						 (unsigned)si.ssi_signo);
				break;
			}
		}
		char why[300];
		if (oci_relay_run(s->relay, p + 5, n - 5, why, sizeof(why)) < 0) {
			oci_stamp(&s->down, "relay_end");
			msb_ns__shim_log("msb-oci-shim: %s: taking the sandbox down", why);
			break;
		}
		/* Last: a reset replaces the relay. */
		if (!starting && p[2].revents)
			serve_control(s);
	}
	free(p);
}

int main(int argc, char **argv)
{
	struct shim s = {.ready_fd = -1,
			 .dfd = -1,
			 .pfd = -1,
			 .work_fd = -1,
			 .agent_log_fd = -1,
			 .ctl_fd = -1,
			 .ctl_conn = -1,
			 .rt_pidfd = -1,
			 .rt_go = -1,
			 .out_fd = -1,
			 .egress = VM_EGRESS_INIT,
			 .sig_fd = -1};
	s.rf = (oci_rootfs)OCI_ROOTFS_INIT(NULL, -1);
	if (parse_args(&s, argc, argv) < 0) {
		fputs("usage: msb-oci-shim --state DIR --agent PATH --config FILE [--ready-fd N]\n"
		      "                    [--name NAME] [--log FILE] [--agent-log FILE] "
		      "[--remove-state-dir]\n"
		      "                    [--pool --cgroup-key KEY] [--daemon]\n",
		      stderr);
		if (s.ready_fd >= 0)
			report(&s, "error: msb-oci-shim: bad arguments\n");
		return 2;
	}
	oci_stamp(&s.up, "main");
	int dr = s.daemon ? msb_ns__shim_daemon() : 0;
	if (dr < 0)
		die(&s, "fork: %s", strerror(-dr));
	signal(SIGPIPE, SIG_IGN);
	int sfd = s.sig_fd = msb_ns__shim_signalfd();
	if (sfd < 0)
		die(&s, "signalfd: %s", strerror(-sfd));
	umask(077);
	resolve_paths(&s);
	load_config(&s);
	load_egress(&s);
	oci_stamp(&s.up, "config");
	detach(&s);
	oci_stamp(&s.up, "detach");
	/* First: every fd below is opened in the namespace the mounts go to. */
	char why[300];
	if (oci_rootfs_private(why, sizeof(why)) < 0)
		die(&s, "%s", why);
	if (s.cfg.runtime == OCI_CRUN)
		oci_rootfs_hide_hybrid_cgroup2();
	oci_stamp(&s.up, "mountns");
	check_state_dir(&s);
	write_pid(&s);
	oci_stamp(&s.up, "state");
	if (s.agent_log_path) {
		/* guest-names: ok - the agent's log, a host path (O_NOFOLLOW) */
		s.agent_log_fd = open(s.agent_log_path,
				      O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (s.agent_log_fd < 0)
			die(&s, "agent log `%s`: %s", s.agent_log_path, strerror(errno));
	}
	s.ctl_fd = listen_at(&s, MSB_NS_STATE_CONTROL, 16);
	start_sandbox(&s);
	start_proxy(&s);
	/* Ready: a pooled sandbox may be claimed from now on (before "ok": one
	 * that says it is ready is). */
	if (s.pool)
		flock(s.dfd, LOCK_UN);
	report(&s, "ok\n");
	oci_stamp(&s.up, "report");
	oci_stamps_write(msb_oci__runtime_name(s.cfg.runtime), "start", &s.up);
	serve(&s, false);
	close(sfd);
	int r = teardown(&s);
	oci_stamp(&s.down, "files");
	oci_stamps_write(msb_oci__runtime_name(s.cfg.runtime), "stop", &s.down);
	msb_oci__shim_config_clear(&s.cfg);
	msb_strv_free(s.host_binds);
	close(s.dfd);
	free(s.state_dir);
	free(s.private_dir);
	free(s.agent);
	free(s.config_path);
	free(s.egress_json);
	free(s.name);
	return r == 0 ? 0 : 1;
}
