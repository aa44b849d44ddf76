/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-shim: creates one native (`ns`) sandbox, holds it, and takes it down.
 *
 *   msb-shim --state DIR --agent PATH --config FILE [--ready-fd N]
 *            [--name NAME] [--log FILE] [--agent-log FILE] [--remove-state-dir]
 *            [--egress FILE] [--pool] [--daemon] [--cgroup-key DIR]
 *
 * In DIR it creates agent.sock (listening; the agent accepts on it as fd 3),
 * work/ (bind-mounted at the guest's work_dir, owned by the guest's root),
 * shim.pid and init.pid ("PID STARTTIME"), and the cgroups record. It
 * reports "ok\n" or "error: REASON\n" on --ready-fd, detaches (own process group,
 * stdio to /dev/null or --log), and waits on the init's pidfd. On
 * SIGTERM/SIGINT/SIGHUP it kills the sandbox (the pid namespace dies with
 * its init), removes the cgroups, the socket, the work tree and its own
 * files; DIR itself is left to the caller unless --remove-state-dir. When the
 * init exits without being asked, the sandbox is dead: the same teardown, but
 * the work tree stays and DIR/dead says why, until a purge.
 * The shim never touches the exec data path: the host talks to the agent on
 * agent.sock directly. It answers on its control socket, shim.sock: "fds"
 * hands the host the sandbox's writable layer and /dev/shm (the fingerprint
 * reads what changed there), "reset" restarts the sandbox from scratch in
 * the same state directory. docs/internals/ns-boundary.md has the details.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "backends/ns/boundary/boundary.h"
#include "backends/ns/boundary/shim.h"
#include "egress_proxy.h"
#include "util/fault.h"
#include "util/fs.h"
#include "util/sha256.h"

#define CONFIG_MAX (64 * 1024)
#define STALE_TIMEOUT_MS 2000
#define CONTROL_READ_MS 2000

struct shim {
	char *state_dir;
	char *agent;
	char *config_path;
	char *egress_path; /* --egress: the allowlist proxy's configuration */
	char *name;
	const char *log_path;
	const char *agent_log_path;
	bool remove_dir;
	bool pool;   /* --pool: a pooled sandbox (docs/pool.md) */
	bool named;  /* --name given: the name does not follow the directory */
	bool daemon; /* --daemon: fork at once; the first process exits */
	/* --cgroup-key: what the cgroup leaf's digest is taken over instead of
	 * the state directory (a pooled sandbox: <root>/ns/<name>, so that its
	 * cgroup is named as a keyed one of the same state root); dropped once
	 * the directory moved (a claim). */
	char *cgroup_key;
	/* shim.json and egress.json when they lie in the state directory (the
	 * library's case): re-read through dfd, which follows the directory
	 * when a claim renames it. NULL: only their paths are known. */
	const char *config_name;
	const char *egress_name;
	int ready_fd;
	int dfd;
	int listen_fd;
	int work_fd;
	int agent_log_fd;
	int ctl_fd;   /* listening control socket */
	int ctl_conn; /* the control request being served: die() answers it */
	msb_ns_config cfg;
	msb_ns_cgroup *cg;
	msb_ns_sandbox *sb;
	bool wrote_pid;
	bool dead;		  /* the init died without being asked: record it, keep work/ */
	msb_egress_config egress; /* loaded; handed to each proxy_start() */
	int64_t t_main, t_spawn;  /* CLOCK_MONOTONIC: main() began, the spawn began */
	char *egress_json;
	size_t egress_len;
	proxy *proxy;
};

static void refresh_paths(struct shim *s, bool named);

/* The log line for egress_proxy.c too (the shims' shared one). */
void shim_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	msb_ns__shim_vlog(fmt, ap);
	va_end(ap);
}

static void report(struct shim *s, const char *line)
{
	msb_ns__shim_report(&s->ready_fd, line);
}

/* Take down whatever exists so far. Returns 0 when everything went. */
static int teardown(struct shim *s)
{
	int ret = 0;
	/* First: open tunnels are closed and their records written. */
	proxy_stop(s->proxy);
	s->proxy = NULL;
	if (s->sb) {
		msb_ns__kill(s->sb);
		msb_ns__wait(s->sb);
		msb_ns__sandbox_free(s->sb);
		s->sb = NULL;
	}
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		s->listen_fd = -1;
	}
	if (s->ctl_fd >= 0) {
		close(s->ctl_fd);
		s->ctl_fd = -1;
	}
	if (s->work_fd >= 0) {
		close(s->work_fd);
		s->work_fd = -1;
	}
	if (s->cg) {
		msb_error *e = NULL;
		if (msb_ns__cgroup_destroy(s->cg, &e) < 0) {
			shim_log("msb-shim: %s", msb_error_message(e));
			ret = -1;
		}
		msb_error_free(e);
		msb_ns__cgroup_free(s->cg);
		s->cg = NULL;
	}
	if (s->dfd >= 0 && s->wrote_pid) {
		refresh_paths(s, s->named);
		int r = msb_ns__state_remove_files(s->dfd, s->dead);
		if (r < 0) {
			shim_log("msb-shim: remove state files: %s", strerror(-r));
			ret = -1;
		}
		/* guest-names: ok - the state dir is host-private; rmdir never follows.
		 * A dead sandbox's directory holds its record and work/. */
		if (s->remove_dir && !s->dead && ret == 0 && rmdir(s->state_dir) < 0 &&
		    errno != ENOENT) {
			shim_log("msb-shim: remove `%s`: %s", s->state_dir, strerror(errno));
			ret = -1;
		}
	}
	return ret;
}

/* The init died and nobody asked for it (an OOM kill, a kill from outside,
 * a crash): the sandbox is dead, not disposed of. The host must learn it
 * from the state directory - never find an empty sandbox in its place - so
 * the reason is recorded, work/ is kept, and only a disposal clears them
 * (docs/internals/ns-boundary.md, msb-shim step 5). */
static void record_death(struct shim *s)
{
	char line[256];
	int st = s->sb->status;
	if (WIFSIGNALED(st))
		snprintf(line, sizeof(line), "its agent (pid %d) was killed by signal %d (%s)\n",
			 (int)s->sb->pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(line, sizeof(line), "its agent (pid %d) exited with status %d\n",
			 (int)s->sb->pid, WIFEXITED(st) ? WEXITSTATUS(st) : st);
	int r = msb__write_file_atomic_at(s->dfd, MSB_NS_STATE_DEAD, line, strlen(line), 0644);
	if (r < 0)
		shim_log("msb-shim: write %s: %s", MSB_NS_STATE_DEAD, strerror(-r));
	s->dead = true;
}

static _Noreturn void die(struct shim *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static _Noreturn void die(struct shim *s, const char *fmt, ...)
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
	shim_log("msb-shim: %s", msg);
	teardown(s);
	report(s, line);
	if (s->ctl_conn >= 0) {
		ssize_t w = send(s->ctl_conn, line, strlen(line), MSG_NOSIGNAL);
		(void)w;
	}
	_exit(1);
}

static _Noreturn void die_err(struct shim *s, msb_error *e)
{
	die(s, "%s", msb_error_message(e) ? msb_error_message(e) : "unknown error");
}

static void usage(void)
{
	fputs("usage: msb-shim --state DIR --agent PATH --config FILE [--ready-fd N]\n"
	      "                [--name NAME] [--log FILE] [--agent-log FILE] "
	      "[--remove-state-dir]\n"
	      "                [--egress FILE] [--pool] [--daemon] [--cgroup-key DIR]\n",
	      stderr);
}

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
		} else if (strcmp(a, "--egress") == 0) {
			s->egress_path = (char *)v;
		} else if (strcmp(a, "--name") == 0) {
			s->name = (char *)v;
			s->named = true;
		} else if (strcmp(a, "--log") == 0) {
			s->log_path = v;
		} else if (strcmp(a, "--cgroup-key") == 0) {
			s->cgroup_key = (char *)v;
		} else if (strcmp(a, "--agent-log") == 0) {
			s->agent_log_path = v;
		} else if (strcmp(a, "--ready-fd") == 0) {
			if ((s->ready_fd = msb_ns__shim_ready_fd(v)) < 0)
				return -1;
		} else {
			return -1;
		}
	}
	return s->state_dir && s->agent && s->config_path ? 0 : -1;
}

/* `path`'s file name when it lies directly in `dir`, else NULL. */
static const char *name_in_dir(const char *dir, const char *path)
{
	size_t n = strlen(dir);
	if (strncmp(path, dir, n) != 0 || path[n] != '/' || strchr(path + n + 1, '/'))
		return NULL;
	return path + n + 1;
}

/* Absolute, resolved paths; the state directory is created if missing. */
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
	if (s->egress_path) {
		/* guest-names: ok - egress.json in the host-private state dir */
		char *eg = realpath(s->egress_path, NULL);
		if (!eg)
			die(s, "egress `%s`: %s", s->egress_path, strerror(errno));
		s->egress_path = eg;
	}
	/* A pooled sandbox's directory is made by the library, and a drain may
	 * remove it before this shim gets to it: never make it anew. */
	/* guest-names: ok - the state dir: host-private */
	if (!s->pool && mkdir(s->state_dir, 0700) < 0 && errno != EEXIST)
		die(s, "state dir `%s`: %s", s->state_dir, strerror(errno));
	/* guest-names: ok - the state dir: host-private */
	char *dir = realpath(s->state_dir, NULL);
	if (!dir)
		die(s, "state dir `%s`: %s", s->state_dir, strerror(errno));
	s->state_dir = dir;
	const char *base = strrchr(dir, '/');
	s->name = strdup(s->name ? s->name : base && base[1] ? base + 1 : "sandbox");
	if (!s->name)
		die(s, "out of memory");
	s->config_name = name_in_dir(dir, s->config_path);
	s->egress_name = s->egress_path ? name_in_dir(dir, s->egress_path) : NULL;
}

/* The state directory's path now, from its descriptor: a claim renames a
 * pooled sandbox's directory (docs/pool.md), and a reset or a teardown
 * after it works on the new one. The name follows unless --name fixed it. */
static void refresh_paths(struct shim *s, bool named)
{
	char link[64], buf[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", s->dfd);
	/* guest-names: ok - the host's procfs link of our own descriptor */
	ssize_t n = readlink(link, buf, sizeof(buf) - 1);
	if (n <= 0 || buf[0] != '/')
		return;
	buf[n] = '\0';
	if (strcmp(buf, s->state_dir) == 0)
		return;
	char *dir = strdup(buf);
	const char *base = strrchr(buf, '/');
	char *name = named ? NULL : strdup(base && base[1] ? base + 1 : "sandbox");
	if (!dir || (!named && !name)) {
		free(dir);
		free(name);
		return;
	}
	shim_log("msb-shim: `%s` is now `%s`", s->state_dir, dir);
	s->cgroup_key = NULL;
	free(s->state_dir);
	s->state_dir = dir;
	if (name) {
		free(s->name);
		s->name = name;
	}
}

/* A configuration file: `name` in the state directory when known, else
 * `path`. */
static char *read_small(struct shim *s, const char *path, const char *name, size_t *len)
{
	/* guest-names: ok - configuration files the host wrote, in the state dir */
	_cleanup_close_ int fd = name && s->dfd >= 0
					 ? openat(s->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
					 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(s, "config `%s`: %s", path, strerror(errno));
	char *buf = malloc(CONFIG_MAX + 1);
	if (!buf)
		die(s, "out of memory");
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, CONFIG_MAX + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die(s, "config `%s`: %s", path, strerror(errno));
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > CONFIG_MAX)
			die(s, "config `%s`: larger than %d bytes", path, CONFIG_MAX);
	}
	*len = n;
	return buf;
}

/* The egress configuration is parsed once here (so that a bad one fails the
 * start) and again for each proxy_start(), which takes its own copy. */
static void load_egress(struct shim *s, msb_egress_config *out)
{
	msb_error *e = NULL;
	msb_egress__config_init(out);
	if (msb_egress__config_from_json(out, s->egress_json, s->egress_len, true, &e) < 0)
		die(s, "egress: %s", msb_error_message(e));
}

static void start_proxy(struct shim *s)
{
	if (!s->egress_json)
		return;
	msb_egress_config c;
	load_egress(s, &c);
	char why[256];
	if (proxy_start(&s->proxy, &c, s->dfd, true, why, sizeof(why)) < 0)
		die(s, "%s", why);
}

/* The egress configuration again (a claim wrote the one the sandbox is
 * handed, docs/pool.md): checked, kept for resets, and put in force. */
static void reload_egress(struct shim *s)
{
	if (!s->egress_path)
		die(s, "egress: this sandbox has no egress proxy");
	size_t len = 0;
	char *json = read_small(s, s->egress_path, s->egress_name, &len);
	free(s->egress_json);
	s->egress_json = json;
	s->egress_len = len;
	msb_egress_config c;
	load_egress(s, &c);
	if (s->proxy && proxy_reconfigure(s->proxy, &c) < 0)
		die(s, "egress: the new configuration does not fit the running proxy");
	msb_egress__config_clear(&c);
}

/* shim.json: at start, and again at a reset (a claim renamed the sandbox,
 * docs/pool.md). */
static void load_config(struct shim *s)
{
	if (s->egress_path && !s->egress_json) {
		s->egress_json = read_small(s, s->egress_path, s->egress_name, &s->egress_len);
		load_egress(s, &s->egress);
		msb_egress__config_clear(&s->egress);
	}
	size_t len = 0;
	char *buf = read_small(s, s->config_path, s->config_name, &len);
	msb_error *e = NULL;
	msb_ns__config_clear(&s->cfg);
	if (msb_ns__config_init(&s->cfg) < 0) {
		free(buf);
		die(s, "out of memory");
	}
	if (msb_ns__config_from_json(&s->cfg, buf, len, &e) < 0) {
		free(buf);
		die_err(s, e);
	}
	free(buf);
}

/* A process group of its own, stdio away from whoever started us, no cwd pinned. */
static void detach(struct shim *s)
{
	char why[900];
	if (msb_ns__shim_detach(s->log_path, why, sizeof(why)) < 0)
		die(s, "%s", why);
}

static void check_state_dir(struct shim *s)
{
	char why[900];
	if (msb_ns__shim_open_state(s->state_dir, &s->dfd, why, sizeof(why)) < 0)
		die(s, "%s", why);
	if (s->pool && msb_ns__shim_pool_lock(s->dfd, s->state_dir, why, sizeof(why)) < 0)
		die(s, "%s", why);

	pid_t pid;
	int prev = msb_ns__shim_previous(s->dfd, &pid);
	if (prev > 0)
		die(s, "a shim (pid %d) already holds `%s`", (int)pid, s->state_dir);
	if (prev == 0) {
		/* A dead shim's leftovers: take them down first. */
		msb_error *e = NULL;
		if (msb_ns__state_purge(s->state_dir, false, STALE_TIMEOUT_MS, &e) < 0)
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
	if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
		die(s, "work/ must be a directory, not a link or a file");
	if (fd < 0) {
		char buf[128];
		die(s, "open work/: %s", msb__strerror(errno, buf, sizeof(buf)));
	}
	/* Owned by the guest's root: host uid_base in root mode, us otherwise. */
	if (msb_ns__privileged() && fchown(fd, s->cfg.uid_base, s->cfg.gid_base) < 0) {
		close(fd);
		die(s, "chown work/: %s", strerror(errno));
	}
	if (fchmod(fd, 0700) < 0) {
		close(fd);
		die(s, "chmod work/: %s", strerror(errno));
	}
	s->work_fd = fd;
}

/* A listening socket at DIR/name (0700 under umask 077: owner only). */
static int listen_at(struct shim *s, const char *name, int backlog)
{
	/* Through the directory's fd: whatever its path (a long one, or a new
	 * one after a claim renamed it). */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", s->dfd, name);
	if (unlinkat(s->dfd, name, 0) < 0 && errno != ENOENT)
		die(s, "remove a stale %s: %s", name, strerror(errno));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die(s, "socket: %s", strerror(errno));
	/* guest-names: ok - the control sockets live in the host-private state dir */
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

static void make_socket(struct shim *s)
{
	s->listen_fd = listen_at(s, MSB_NS_STATE_SOCKET, 128);
}

static void make_cgroup(struct shim *s)
{
	msb_error *e = NULL;
	/* The leaf carries a digest of the state directory as well as the
	 * sandbox's name: two state roots may hold sandboxes of the same key
	 * (parallel test runs do), and their cgroups must not meet. */
	uint8_t d[32];
	msb_sha256 h;
	const char *key = s->cgroup_key ? s->cgroup_key : s->state_dir;
	msb__sha256_init(&h);
	msb__sha256_update(&h, key, strlen(key));
	msb__sha256_final(&h, d);
	_cleanup_free_ char *leaf =
		msb__asprintf("%s-%02x%02x%02x%02x", s->name, d[0], d[1], d[2], d[3]);
	if (!leaf)
		die(s, "out of memory");
	if (msb_ns__cgroup_plan(&s->cfg, leaf, &s->cg, &e) < 0)
		die_err(s, e);
	if (!s->cg)
		return;
	/* Recorded before creation so that a purge after a crash finds them. */
	_cleanup_free_ char *rec = msb_ns__cgroup_record(s->cg);
	if (!rec)
		die(s, "out of memory");
	int r = msb__write_file_atomic_at(s->dfd, MSB_NS_STATE_CGROUPS, rec, strlen(rec), 0644);
	if (r < 0)
		die(s, "write %s: %s", MSB_NS_STATE_CGROUPS, strerror(-r));
	/* msb_ns__spawn() creates them. */
}

/* Create the work dir, the agent's socket and the cgroups, and spawn the
 * sandbox; on success init.pid names its init. */
static void start_sandbox(struct shim *s)
{
	make_work(s);
	make_socket(s);
	make_cgroup(s);
	if (s->agent_log_path) {
		/* guest-names: ok - the agent's log, a host path (O_NOFOLLOW) */
		s->agent_log_fd =
			open(s->agent_log_path,
			     O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (s->agent_log_fd < 0)
			die(s, "agent log `%s`: %s", s->agent_log_path, strerror(errno));
	}

	msb_ns_spawn_opts o = MSB_NS_SPAWN_OPTS_INIT;
	o.state_dir = s->state_dir;
	o.name = s->name;
	o.agent_path = s->agent;
	o.listen_fd = s->listen_fd;
	_cleanup_free_ char *work_path = msb__asprintf("%s/%s", s->state_dir, MSB_NS_STATE_WORK);
	if (!work_path)
		die(s, "out of memory");
	o.work_path = work_path;
	o.work_fd = s->work_fd;
	o.stdio_fd = s->agent_log_fd;
	o.cgroup = s->cg;
	msb_error *e = NULL;
	s->t_spawn = msb__now_ns();
	if (msb_ns__spawn(&s->cfg, &o, &s->sb, &e) < 0)
		die_err(s, e);
	/* The agent owns the socket now; the shim is not in the data path. */
	close(s->listen_fd);
	s->listen_fd = -1;
	if (s->agent_log_fd >= 0) {
		close(s->agent_log_fd);
		s->agent_log_fd = -1;
	}
	int r = msb_ns__write_pid_file(s->dfd, MSB_NS_STATE_INIT_PID, s->sb->pid,
				       s->sb->start_time);
	if (r < 0)
		die(s, "write %s: %s", MSB_NS_STATE_INIT_PID, strerror(-r));
	const msb_ns_timing *t = &s->sb->timing;
	/* The monotonic times let bench/shim_breakdown.py place the shim's own
	 * start (exec, configuration, state files) around the spawn. */
	shim_log("msb-shim: sandbox `%s` ready, init pid %d, cgroup v%d: %.3f ms (clone %.3f, "
		 "maps %.3f, cgroup setup %.3f, attach %.3f, then waited %.3f); monotonic ns: "
		 "main %lld, spawn %lld, ready %lld",
		 s->name, (int)s->sb->pid, msb_ns__cgroup_version(s->cg), (double)t->total_ns / 1e6,
		 (double)t->clone_ns / 1e6, (double)t->map_ns / 1e6, (double)t->cgroup_ns / 1e6,
		 (double)t->attach_ns / 1e6, (double)t->wait_ns / 1e6, (long long)s->t_main,
		 (long long)s->t_spawn, (long long)msb__now_ns());
}

/*
 * Reset: the pristine state of creation again. The init is killed (its pid
 * namespace, the overlay and its writable tmpfs, /dev/shm go with it), the
 * cgroups and the work dir are removed, and everything is made anew from the
 * same configuration. A failure takes the sandbox down (die).
 */
static void reset_sandbox(struct shim *s)
{
	refresh_paths(s, s->named);
	load_config(s);
	shim_log("msb-shim: reset of `%s`", s->name);
	proxy_stop(s->proxy);
	s->proxy = NULL;
	/* init.pid goes first: a host that finds it naming a dead init while
	 * this shim lives calls the sandbox dead (ns_state.c). */
	unlinkat(s->dfd, MSB_NS_STATE_INIT_PID, 0);
	msb_ns__kill(s->sb);
	msb_ns__wait(s->sb);
	msb_ns__sandbox_free(s->sb);
	s->sb = NULL;
	if (s->cg) {
		msb_error *e = NULL;
		if (msb_ns__cgroup_destroy(s->cg, &e) < 0)
			die(s, "reset: %s", msb_error_message(e));
		msb_ns__cgroup_free(s->cg);
		s->cg = NULL;
	}
	if (s->work_fd >= 0) {
		close(s->work_fd);
		s->work_fd = -1;
	}
	int r = msb__rm_rf_at(s->dfd, MSB_NS_STATE_WORK);
	if (r < 0)
		die(s, "reset: remove work/: %s", strerror(-r));
	start_sandbox(s);
	start_proxy(s);
}

/* One request on the control socket (boundary.h: MSB_NS_CONTROL_*). The
 * socket is the owner's only (0700 in a 0700 directory). */
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
		int fds[2] = {s->sb->layer_fd, s->sb->shm_fd};
		if (fds[0] < 0 || fds[1] < 0)
			msb_ns__send_fds(conn, "error: the writable layer is not held\n", NULL, 0);
		else
			msb_ns__send_fds(conn, "ok\n", fds, 2);
	} else if (strcmp(line, MSB_NS_CONTROL_EGRESS) == 0) {
		s->ctl_conn = conn;
		reload_egress(s);
		s->ctl_conn = -1;
		msb_ns__send_fds(conn, "ok\n", NULL, 0);
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

int main(int argc, char **argv)
{
	struct shim s = {.ready_fd = -1,
			 .dfd = -1,
			 .listen_fd = -1,
			 .work_fd = -1,
			 .agent_log_fd = -1,
			 .ctl_fd = -1,
			 .ctl_conn = -1};
	s.t_main = msb__now_ns();
	if (parse_args(&s, argc, argv) < 0) {
		usage();
		if (s.ready_fd >= 0)
			report(&s, "error: msb-shim: bad arguments\n");
		return 2;
	}
	int dr = s.daemon ? msb_ns__shim_daemon() : 0;
	if (dr < 0)
		die(&s, "fork: %s", strerror(-dr));
	signal(SIGPIPE, SIG_IGN);
	/* Signals are blocked from the start so that a SIGTERM during set-up
	 * still leads to a teardown; the child unblocks them. */
	int sfd = msb_ns__shim_signalfd();
	if (sfd < 0)
		die(&s, "signalfd: %s", strerror(-sfd));
	umask(077);
	resolve_paths(&s);
	load_config(&s);
	detach(&s);
	check_state_dir(&s);
	write_pid(&s);
	s.ctl_fd = listen_at(&s, MSB_NS_STATE_CONTROL, 16);
	start_sandbox(&s);
	start_proxy(&s);
	msb__fault_point("shim.spawned");
	/* Ready: a pooled sandbox may be claimed from now on (before "ok": one
	 * that says it is ready is). */
	if (s.pool)
		flock(s.dfd, LOCK_UN);
	report(&s, "ok\n");

	for (;;) {
		struct pollfd p[4] = {{.fd = s.sb->pidfd, .events = POLLIN},
				      {.fd = sfd, .events = POLLIN},
				      {.fd = s.ctl_fd, .events = POLLIN},
				      {.fd = s.proxy ? proxy_fd(s.proxy) : -1, .events = POLLIN}};
		int timeout = s.proxy ? proxy_timeout_ms(s.proxy) : -1;
		int pr = poll(p, 4, timeout);
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			shim_log("msb-shim: poll: %s", strerror(errno));
			break;
		}
		if (p[0].revents) {
			msb_ns__wait(s.sb);
			shim_log("msb-shim: init exited (status 0x%x)", (unsigned)s.sb->status);
			record_death(&s);
			break;
		}
		if (p[1].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				shim_log("msb-shim: signal %u: taking the sandbox down",
					 (unsigned)si.ssi_signo);
				break;
			}
		}
		if (p[2].revents)
			serve_control(&s);
		if (s.proxy && proxy_run(s.proxy) < 0) {
			proxy_stop(s.proxy);
			s.proxy = NULL;
		}
	}
	close(sfd);
	int r = teardown(&s);
	msb_ns__config_clear(&s.cfg);
	close(s.dfd);
	free(s.state_dir);
	free(s.agent);
	free(s.config_path);
	free(s.egress_json);
	free(s.name);
	return r == 0 ? 0 : 1;
}
