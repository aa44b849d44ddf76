/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` backend: get-or-create under flock on the key-derived state
 * directory, a per-sandbox msb-shim started detached, disposal selected from
 * labels on disk.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <jansson.h>

#include <msb/spec.h>

#include "backends/ns/boundary/boundary.h"
#include "egress/egress.h"
#include "ns_int.h"
#include "ns_sweep.h"
#include "util/fault.h"
#include "backends/types.h"
#include "util/fs.h"
#include "util/json.h"

/* How long an acquire waits for a live shim to record how its agent died. */
#define NS_SETTLE_NS (1000LL * 1000 * 1000)

#ifndef MSB_LIBEXECDIR
#define MSB_LIBEXECDIR "/usr/local/libexec/msb"
#endif

static const msb_declarations ns_declarations = {
	.version = MSB_DECLARATIONS_VERSION,
	.capabilities = MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_FILES_LIST |
			MSB_CAP_FILES_DELETE | MSB_CAP_RECLAIM | MSB_CAP_SNAPSHOT |
			MSB_CAP_EGRESS_METHODS,
	/* Ceilings the host-side file plane was measured to serve (docs/ns.md);
	 * the per-file one is MSB_NS_MAX_FILE_BYTES (ns_files.h). */
	.limits = {{256u << 20, 1u << 30, 4096}, {256u << 20, 1u << 30, 4096}},
	/* allowlist: the shim's proxy (docs/egress.md); method tokens are the
	 * verbs it enforces on plain HTTP (src/egress/policy.c). */
	.egress_modes = MSB_EGRESS_CLOSED | MSB_EGRESS_ALLOWLIST,
	.os_families = MSB_OS_POSIX,
	.isolation_scopes = MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL,
	.egress_method_tokens = msb_egress__method_tokens,
	.n_egress_method_tokens = MSB_EGRESS_N_METHOD_TOKENS,
	.observes_egress = true,
};

static char *pick_path(const char *given, const char *env, const char *installed)
{
	if (given && *given)
		return strdup(given);
	const char *e = getenv(env);
	if (e && *e)
		return strdup(e);
	return msb__asprintf("%s/%s", MSB_LIBEXECDIR, installed);
}

int msb_ns__backend_init(ns_backend *b, const msb_ns_options *opts, msb_error **err)
{
	msb_ns_options defaults = MSB_NS_OPTIONS_INIT;
	if (!opts)
		opts = &defaults;
	/* Version 1 is the struct without the progress fields, version 2 without
	 * pool_size. */
	if (opts->version < 1 || opts->version > MSB_NS_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "ns options: unsupported version %u",
				     opts->version);
	unsigned pool_size = opts->version >= 3 ? opts->pool_size : 0;
	if (pool_size > MSB_NS_POOL_MAX)
		return msb_error_set(err, MSB_E_VALUE,
				     "ns options: pool_size %u is over the most, %u", pool_size,
				     MSB_NS_POOL_MAX);
	memset(b, 0, sizeof(*b));
	b->pool_size = pool_size;
	b->pool_ops = &msb_ns__pool_ns_ops;
	pthread_mutex_init(&b->refill_lock, NULL);
	pthread_cond_init(&b->refill_done, NULL);
	if (opts->version >= 2) {
		b->progress = opts->progress;
		b->progress_userdata = opts->progress_userdata;
	}
	b->name = strdup(opts->name ? opts->name : "ns");
	b->shim_path = pick_path(opts->shim_path, "MSB_SHIM", "msb-shim");
	b->agent_path = pick_path(opts->agent_path, "MSB_AGENT", "msb-agent");
	b->image = strdup(opts->image ? opts->image : "host");
	if (!b->name || !b->shim_path || !b->agent_path || !b->image) {
		msb_ns__backend_clear(b);
		return msb__error_nomem(err);
	}
	int r = msb_ns__image_check(b->image, err);
	if (r < 0) {
		msb_ns__backend_clear(b);
		return r;
	}
	r = msb_ns__state_dir(opts->state_root, &b->state_dir, err);
	if (r < 0) {
		msb_ns__backend_clear(b);
		return r;
	}
	/* state_dir is "<root>/ns". */
	if (!(b->state_root = strndup(b->state_dir, strlen(b->state_dir) - 3))) {
		msb_ns__backend_clear(b);
		return msb__error_nomem(err);
	}
	/* Default cgroup limits as root. An ordinary user has no cgroup to put a
	 * sandbox in unless one was delegated, so the defaults do not apply there;
	 * limits asked for explicitly are enforced or the acquire is refused
	 * (fail closed, never silently weaker). */
	bool root = geteuid() == 0;
	b->memory_bytes = opts->memory_bytes ? opts->memory_bytes : root ? 512ull << 20 : 0;
	b->pids_max = opts->pids_max ? opts->pids_max : root ? 512 : 0;
	b->cpu_millis = opts->cpu_millis ? opts->cpu_millis : root ? 1000 : 0;
	b->writable_bytes = opts->writable_bytes ? opts->writable_bytes : 256ull << 20;
	b->start_timeout = opts->start_timeout > 0 ? opts->start_timeout : 30.0;
	if (opts->egress_config) {
		r = msb_ns__egress_check_config(opts->egress_config, err);
		if (r == 0 && !(b->egress_config = strdup(opts->egress_config)))
			r = msb__error_nomem(err);
		if (r < 0) {
			msb_ns__backend_clear(b);
			return r;
		}
	}
	return 0;
}

void msb_ns__backend_clear(ns_backend *b)
{
	pthread_mutex_destroy(&b->refill_lock);
	pthread_cond_destroy(&b->refill_done);
	free(b->name);
	free(b->state_root);
	free(b->state_dir);
	free(b->shim_path);
	free(b->agent_path);
	free(b->image);
	free(b->egress_config);
	memset(b, 0, sizeof(*b));
}

int msb_ns__key_labels(msb_ns_labels *l, char instance[33], const msb_key *key, const char *kind,
		       const char *work_dir, const char *image, const char *what, msb_error **err)
{
	if (msb_ns__random_hex(instance, 16) < 0)
		return msb__error_errno(err, errno, "%s: no randomness for an instance id", what);
	*l = (msb_ns_labels){
		.scope = (char *)key->scope,
		.thread_id = (char *)key->thread_id,
		.agent_dir = (char *)key->agent_dir,
		.kind = (char *)kind,
		.call_id = (char *)key->call_id,
		.instance_id = instance,
		.work_dir = (char *)work_dir,
		.image = (char *)image,
		.created_ns = msb__realtime_ns(),
	};
	return 0;
}

int msb_ns__random_hex(char *out, size_t nbytes)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t buf[32];
	if (nbytes > sizeof(buf))
		return -EINVAL;
	size_t got = 0;
	while (got < nbytes) {
		ssize_t n = getrandom(buf + got, nbytes - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	for (size_t i = 0; i < nbytes; i++) {
		out[2 * i] = hex[buf[i] >> 4];
		out[2 * i + 1] = hex[buf[i] & 15];
	}
	out[2 * nbytes] = '\0';
	return 0;
}

/*
 * Start msb-shim detached. posix_spawn (no copy of this process's memory,
 * safe on any thread) runs it with `--daemon`: it forks once at once and
 * its first process exits, which is reaped here, so the shim is nobody's
 * child in this process (it outlives it and is never its zombie). With
 * `ready`, *ready is the read end of the pipe on which the shim reports
 * "ok\n" once the sandbox exists, or "error: REASON\n" (msb_ns__shim_await);
 * without, nobody waits (a refill of the pool: the shim holds the
 * directory's lock itself until it is ready, `--pool`).
 */
static int spawn_detached(const char *path, char *const argv[], int *ready, msb_error **err);

int msb_ns__shim_spawn(const ns_backend *b, const char *dir, bool egress, bool pool, int *ready,
		       msb_error **err)
{
	_cleanup_free_ char *cfg = msb__asprintf("%s/shim.json", dir);
	_cleanup_free_ char *ecfg = msb__asprintf("%s/%s", dir, MSB_NS_EGRESS_CONFIG);
	if (!cfg || !ecfg)
		return msb__error_nomem(err);
	/* A pooled sandbox's cgroup is named as a keyed one of this state root
	 * would be (<root>/ns/<name>, <root>/oci/<name>): what leak checks look
	 * for. msb-oci-shim takes the same arguments (but --egress: it finds
	 * egress.json in its directory). */
	_cleanup_free_ char *cgkey = NULL;
	if (pool) {
		const char *base = strrchr(dir, '/');
		if (!(cgkey = msb__asprintf("%s/%s", b->state_dir, base ? base + 1 : dir)))
			return msb__error_nomem(err);
	}
	char *argv[16];
	size_t k = 0;
	argv[k++] = b->shim_path;
	argv[k++] = (char *)"--daemon";
	argv[k++] = (char *)"--state";
	argv[k++] = (char *)dir;
	argv[k++] = (char *)"--agent";
	argv[k++] = b->agent_path;
	argv[k++] = (char *)"--config";
	argv[k++] = cfg;
	if (ready) {
		argv[k++] = (char *)"--ready-fd";
		argv[k++] = (char *)"3";
	}
	if (pool) {
		argv[k++] = (char *)"--pool";
		argv[k++] = (char *)"--cgroup-key";
		argv[k++] = cgkey;
	}
	if (egress) {
		argv[k++] = (char *)"--egress";
		argv[k++] = ecfg;
	}
	argv[k] = NULL;
	return spawn_detached(b->shim_path, argv, ready, err);
}

/*
 * Start the shim `path` with argv (which has `--daemon`: it forks at once and
 * its first process exits, reaped here, so the shim is nobody's child in this
 * process). posix_spawn: no copy of this process's memory, safe on any
 * thread, and the child holds a copy of this process's descriptors only
 * until its exec - a fork that lingered would keep a file another thread
 * just wrote open for writing (a guest's exec of it: ETXTBSY). With `ready`,
 * *ready is the read end of the pipe the shim reports on (fd 3 in it).
 */
static int spawn_detached(const char *path, char *const argv[], int *ready, msb_error **err)
{
	int pipefd[2] = {-1, -1};
	if (ready && pipe2(pipefd, O_CLOEXEC) < 0)
		return msb__error_errno(err, errno, "cannot start the shim");
	if (pipefd[1] >= 0 && pipefd[1] <= 3) {
		/* dup2 onto itself would keep close-on-exec; keep 0-3 free. */
		int moved = fcntl(pipefd[1], F_DUPFD_CLOEXEC, 4);
		close(pipefd[1]);
		pipefd[1] = moved;
		if (moved < 0) {
			int e = errno;
			close(pipefd[0]);
			return msb__error_errno(err, e, "cannot start the shim");
		}
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	int r = posix_spawn_file_actions_init(&fa);
	if (r == 0) {
		/* guest-names: ok - /dev/null */
		r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDWR, 0);
		if (r == 0)
			r = posix_spawn_file_actions_adddup2(&fa, 0, 1);
		if (r == 0)
			r = posix_spawn_file_actions_adddup2(&fa, 0, 2);
		if (r == 0 && pipefd[1] >= 0)
			r = posix_spawn_file_actions_adddup2(&fa, pipefd[1], 3);
		/* Nothing else of the caller's: an inherited descriptor (a pipe a
		 * caller leaked) would stay open in a shim that outlives it, and
		 * whoever reads that pipe would wait for the sandbox's end. */
		if (r == 0)
			r = posix_spawn_file_actions_addclosefrom_np(&fa, 4);
		if (r == 0 && (r = posix_spawnattr_init(&at)) == 0) {
			posix_spawnattr_setsigmask(&at, &none);
			posix_spawnattr_setsigdefault(&at, &all);
			posix_spawnattr_setflags(&at,
						 POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
			pid_t pid;
			extern char **environ;
			r = posix_spawn(&pid, path, &fa, &at, argv, environ);
			if (r == 0)
				while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
					;
			posix_spawnattr_destroy(&at);
		}
		posix_spawn_file_actions_destroy(&fa);
	}
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (r != 0) {
		if (pipefd[0] >= 0)
			close(pipefd[0]);
		return msb__error_errno(err, r, "cannot start the shim `%s`", path);
	}
	if (ready) {
		*ready = pipefd[0];
		msb__fault_point("acquire.shim_started");
	}
	return 0;
}

/* The shim's report on fd (closed here): msb-shim's and msb-oci-shim's alike. */
int msb_ns__shim_await(const ns_backend *b, int fd, double timeout, msb_error **err)
{
	const char *what = b->pool_ops->what;
	char buf[1024]; /* a shim's "error: ..." line is at most 1024 bytes */
	size_t got = 0;
	int64_t deadline = msb__now_ns() + (int64_t)(timeout * 1e9);
	while (got < sizeof(buf) - 1) {
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		if (left <= 0)
			break;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (memchr(buf, '\n', got))
			break;
	}
	close(fd);
	buf[got] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	if (strcmp(buf, "ok") == 0)
		return 0;
	if (strncmp(buf, "error: ", 7) == 0)
		return msb_error_set(err, MSB_E_RUNTIME, "%s sandbox not created: %s", what,
				     buf + 7);
	if (got == 0 && msb__now_ns() >= deadline)
		return msb_error_set(err, MSB_E_TIMEOUT,
				     "%s sandbox not created: the shim did not report within %g s",
				     what, timeout);
	return msb_error_set(err, MSB_E_RUNTIME,
			     "%s sandbox not created: the shim `%s` exited without reporting", what,
			     b->shim_path);
}

static int start_shim(const ns_backend *b, const char *dir, bool egress, double timeout,
		      msb_error **err)
{
	int fd = -1;
	int r = msb_ns__shim_spawn(b, dir, egress, false, &fd, err);
	return r < 0 ? r : msb_ns__shim_await(b, fd, timeout, err);
}

/* Take down whatever runs for sandbox `name` and remove what its shim left
 * (processes, cgroups, socket, work tree); the labels stay. */
static int purge_sandbox(const ns_backend *b, const char *name, msb_error **err)
{
	_cleanup_free_ char *dir = msb__asprintf("%s/%s", b->state_dir, name);
	if (!dir)
		return msb__error_nomem(err);
	return msb_ns__state_purge(dir, false, 5000, err);
}

/* Remove everything inside dfd (a stale sandbox's leftovers). */
static int clear_dir(int dfd)
{
	int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
	if (dup < 0)
		return -errno;
	DIR *d = fdopendir(dup);
	if (!d) {
		close(dup);
		return -errno;
	}
	/* The dup shares dfd's offset, which an earlier clear left at the end. */
	rewinddir(d);
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			int q = msb__rm_rf_at(dfd, de->d_name);
			if (q < 0 && r == 0)
				r = q;
		}
	closedir(d);
	return r;
}

/* Nothing in dfd: a directory this acquire (or one that died before writing
 * anything) just made. */
static bool dir_empty(int dfd)
{
	int dup = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dup < 0)
		return false;
	DIR *d = fdopendir(dup);
	if (!d) {
		close(dup);
		return false;
	}
	bool empty = true;
	struct dirent *de;
	while (empty && (de = readdir(d)))
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	closedir(d);
	return empty;
}

/* The shim reported the sandbox ready; before a handle goes out it must
 * still run. An agent or a shim that died since (or an agent that died
 * before the shim reported) fails the creation, which then leaves nothing:
 * never a handle to a dead sandbox (issue 15; the fault suite's
 * acquire.ready, acquire.shim_started and shim.spawned cases). */
static int check_started(int dfd, msb_error **err)
{
	_cleanup_free_ char *why = NULL;
	msb_ns_liveness live = msb_ns__liveness_settled(dfd, NULL, &why, NS_SETTLE_NS, NULL);
	if (live == MSB_NS_RUNNING)
		return 0;
	return msb_error_set(err, MSB_E_RUNTIME,
			     "ns sandbox not created: it died while starting: %s",
			     why ? why : "its shim took it down");
}

/* Create sandbox `name` in its empty, locked directory dfd. */
static int create_sandbox(ns_backend *b, const msb_key *key, const char *kind, const char *work_dir,
			  const char *egress, const char *cfg, const char *name, int statefd,
			  int dfd, msb_sandbox **out, msb_error **err)
{
	char instance[33];
	msb_ns_labels nl;
	int r = msb_ns__key_labels(&nl, instance, key, kind, work_dir, b->image, "ns", err);
	if (r < 0)
		return r;
	/* Labels first, so a purge finds the sandbox even if setup fails (4.20). */
	r = msb_ns__labels_write(dfd, &nl, err);
	if (r < 0)
		return r;
	r = msb__write_file_atomic_at(dfd, "shim.json", cfg, strlen(cfg), 0600);
	if (r < 0)
		return msb__error_errno(err, r, "ns: cannot write the shim configuration");
	if (egress) {
		r = msb__write_file_atomic_at(dfd, MSB_NS_EGRESS_CONFIG, egress, strlen(egress),
					      0600);
		if (r < 0)
			return msb__error_errno(err, r,
						"ns: cannot write the egress configuration");
	}
	_cleanup_free_ char *dir = msb__asprintf("%s/%s", b->state_dir, name);
	if (!dir)
		return msb__error_nomem(err);
	msb__fault_point("acquire.labels_written");
	r = start_shim(b, dir, egress != NULL, b->start_timeout, err);
	if (r == 0) {
		msb__fault_point("acquire.ready");
		r = check_started(dfd, err);
	}
	if (r < 0) {
		/* Fail closed and leave nothing: stop whatever started. */
		purge_sandbox(b, name, NULL);
		clear_dir(dfd);
		unlinkat(statefd, name, AT_REMOVEDIR);
		return r;
	}
	return msb_ns__sandbox_new(b, name, dfd, &nl, -1, out, err);
}

/* new_sandbox: a pooled sandbox took the key's name and then failed. */
#define NS_START_OVER 1

/* A sandbox for the key in its empty, locked directory dfd: from the pool
 * when it has one of this template ready, else made here. */
static int new_sandbox(ns_backend *b, const msb_key *key, const msb_spec *spec, const char *kind,
		       const char *work_dir, const char *egress, const char *name, int statefd,
		       int dfd, msb_sandbox **out, msb_error **err)
{
	ns_template t;
	int r = msb_ns__template_init(b, spec, work_dir, &t, err);
	if (r < 0)
		return r;
	bool pooled = b->pool_size > 0 || msb_ns__pool_exists(b, statefd);
	if (pooled && (r = msb_ns__template_digest(b, &t, err)) == 0) {
		r = msb_ns__pool_claim(b, &t, key, kind, work_dir, egress, name, statefd, out, err);
		if (r > 0) {
			msb_ns__pool_refill(b, &t);
			msb_ns__template_clear(&t);
			return r == 1 ? 0 : NS_START_OVER;
		}
	}
	_cleanup_free_ char *cfg = NULL;
	if (r == 0)
		r = msb_ns__shim_config_text(t.cfg, name, &cfg, err);
	if (r == 0)
		r = create_sandbox(b, key, kind, work_dir, egress, cfg, name, statefd, dfd, out,
				   err);
	if (r == 0 && pooled)
		msb_ns__pool_refill(b, &t);
	msb_ns__template_clear(&t);
	return r;
}

static int ns_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		      msb_error **err)
{
	ns_backend *b = impl;
	const char *kind = msb_spec_kind(spec);
	const char *work_dir = msb_spec_work_dir(spec);
	if (!work_dir)
		work_dir = MSB_DEFAULT_WORK_DIR;
	if (work_dir[0] != '/')
		return msb_error_set(err, MSB_E_VALUE,
				     "ns: work_dir `%s` must be an absolute guest path", work_dir);
	int r = msb_ns__limits_check(b, spec, err);
	if (r < 0)
		return r;
	/* Out of descriptors is said as such, before it can surface as
	 * something else (a stale sandbox, a work/ that is not a directory). */
	r = msb__fds_headroom(MSB_NS_ACQUIRE_FDS, "ns: cannot acquire", err);
	if (r < 0)
		return r;
	_cleanup_free_ char *egress = NULL;
	r = msb_ns__egress_config(b, spec, &egress, err);
	if (r < 0)
		return r;
	char name[37];
	msb_ns__name(key, kind, name);

	/* guest-names: ok - the state root is the host's (its owner picks it) */
	r = msb__mkdir_p(b->state_dir, 0700);
	if (r < 0)
		return msb__error_errno(err, r, "ns: cannot create the state directory `%s`",
					b->state_dir);
	/* guest-names: ok - the state root is the host's */
	/* guest-names: ok - the state root is the host's */
	_cleanup_close_ int statefd = open(b->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (statefd < 0)
		return msb__error_errno(err, errno, "ns: cannot open `%s`", b->state_dir);

	for (int attempt = 0; attempt < 8; attempt++) {
		bool created = mkdirat(statefd, name, 0700) == 0;
		if (!created && errno != EEXIST)
			return msb__error_errno(err, errno, "ns: cannot create `%s`", name);
		_cleanup_close_ int dfd =
			openat(statefd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0) {
			if (errno == ENOENT)
				continue; /* disposed between mkdir and open */
			return msb__error_errno(err, errno, "ns: cannot open `%s`", name);
		}
		while (flock(dfd, LOCK_EX) < 0)
			if (errno != EINTR)
				return msb__error_errno(err, errno, "ns: cannot lock `%s`", name);
		struct stat st;
		if (fstat(dfd, &st) < 0)
			return msb__error_errno(err, errno, "ns: cannot stat `%s`", name);
		if (st.st_nlink == 0)
			continue; /* a disposal removed it while we waited: start over */
		msb__fault_point("acquire.locked");

		_cleanup_free_ char *why = NULL;
		/* The shim's pidfd from this look goes to the handle (issue 17). */
		_cleanup_close_ int shim_fd = -1;
		msb_ns_liveness live =
			msb_ns__liveness_settled(dfd, NULL, &why, NS_SETTLE_NS, &shim_fd);
		msb_ns_labels labels = {0};
		bool labelled = msb_ns__labels_read(dfd, &labels, NULL) == 0;
		/* A claim from the pool that died before the sandbox had its
		 * identity (ns_pool.c): never handed out, replaced below. */
		bool half_claimed =
			faccessat(dfd, MSB_NS_POOL_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
		if (live == MSB_NS_RUNNING && labelled && !half_claimed &&
		    msb__streq_null(labels.kind, kind)) {
			/* Warm: reuse, if it runs with this spec's limits. */
			r = msb_ns__limits_match(dfd, name, b, spec, err);
			if (r == 0)
				r = msb_ns__egress_match(dfd, name, egress, err);
			if (r == 0)
				r = msb_ns__sandbox_new(b, name, dfd, &labels, TAKE_FD(shim_fd),
							out, err);
			msb_ns__labels_clear(&labels);
			return r;
		}
		if (live == MSB_NS_DEAD && labelled) {
			/* Its agent or its shim died: never hand out an empty sandbox
			 * in its place (issue 15 findings 2, 5). The key stays refused
			 * until a disposal, which also removes the storage base kept
			 * for the caller (checklist 7.10). */
			r = msb_error_set(err, MSB_E_UNCLEAN,
					  "ns sandbox `%s` (instance %s) is dead: %s; its storage "
					  "base is kept in `%s/%s/%s` until the key is disposed of",
					  name, labels.instance_id, why ? why : "it stopped",
					  b->state_dir, name, MSB_NS_STATE_WORK);
			msb_ns__labels_clear(&labels);
			return r;
		}
		msb_ns__labels_clear(&labels);
		if (!labelled && live == MSB_NS_STALE && dir_empty(dfd)) {
			r = new_sandbox(b, key, spec, kind, work_dir, egress, name, statefd, dfd,
					out, err);
			if (r == NS_START_OVER)
				continue;
			return r;
		}
		/* Stale (never started, or taken down on purpose), or with
		 * unreadable labels (ours by name): replace it - in a new directory,
		 * so that a handle to the old instance, which holds the old one,
		 * can never reach the new (issue 15 finding 3). */
		r = purge_sandbox(b, name, err);
		if (r < 0)
			return msb_error_wrap(err,
					      created ? "ns: cannot prepare the new sandbox `%s`"
						      : "ns: cannot clear the stale sandbox `%s`",
					      name);
		r = clear_dir(dfd);
		if (r == 0)
			r = unlinkat(statefd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
		if (r < 0)
			return msb__error_errno(err, r, "ns: cannot clear stale state in `%s`",
						name);
		continue;
	}
	return msb_error_set(err, MSB_E_RUNTIME, "ns: `%s` kept disappearing during acquire", name);
}

/* The sweep's teardown of one sandbox (ns_sweep.c). */
static int sweep_purge(void *ctx, const char *name, int dfd, const msb_ns_labels *l,
		       msb_error **err)
{
	ns_backend *b = ctx;
	msb_key lkey = {l->scope, l->thread_id, l->agent_dir, l->call_id};
	msb__fault_point("dispose.locked");
	int r = purge_sandbox(b, name, err);
	/* The shim is down: the records of the tunnels it closed are in; report
	 * them before the directory goes. */
	msb_ns__egress_drain(dfd, &lkey, &b->reporter);
	if (r == 0)
		msb__fault_point("dispose.shim_stopped");
	return r;
}

static int ns_dispose(void *impl, const msb_key *key, const char *kind, const char *instance_id,
		      msb_disposal_failure **failure, msb_error **err)
{
	ns_backend *b = impl;
	return msb_ns__dispose(b->state_dir, sweep_purge, b, key, kind, instance_id, failure, err);
}

static int ns_dispose_scope(void *impl, const char *scope, const char *thread_id,
			    msb_scope_purge *out, msb_error **err)
{
	ns_backend *b = impl;
	return msb_ns__dispose_scope(b->state_dir, "ns", sweep_purge, b, scope, thread_id, out,
				     err);
}

static void ns_set_egress_reporter(void *impl, const msb_egress_reporter *reporter)
{
	ns_backend *b = impl;
	if (reporter)
		b->reporter = *reporter;
	else
		memset(&b->reporter, 0, sizeof(b->reporter));
}

static void ns_free(void *impl)
{
	ns_backend *b = impl;
	if (!b)
		return;
	msb_ns__pool_wait(b);
	msb_ns__backend_clear(b);
	free(b);
}

static const msb_backend_ops ns_ops = {
	.version = MSB_BACKEND_OPS_VERSION,
	.acquire = ns_acquire,
	.dispose = ns_dispose,
	.dispose_scope = ns_dispose_scope,
	.set_egress_reporter = ns_set_egress_reporter,
	.free = ns_free,
};

int msb_ns_backend_new(const msb_ns_options *opts, msb_backend **out, msb_error **err)
{
	ns_backend *b = calloc(1, sizeof(*b));
	if (!b)
		return msb__error_nomem(err);
	int r = msb_ns__backend_init(b, opts, err);
	if (r < 0) {
		free(b);
		return r;
	}
	msb_backend_info info = {
		.version = MSB_BACKEND_INFO_VERSION,
		.name = b->name,
		.isolation = "container",
		.declarations = &ns_declarations,
	};
	return msb_backend_new(&ns_ops, &info, b, out, err);
}

ns_backend *msb_ns__backend_of(const msb_backend *b)
{
	return b ? msb_backend_impl(b, &ns_ops) : NULL;
}

const char *msb_ns_backend_state_root(const msb_backend *b)
{
	const ns_backend *nb = msb_backend_impl(b, &ns_ops);
	return nb ? nb->state_root : NULL;
}

int msb_ns_backend_set_progress(msb_backend *b, msb_ns_progress_fn fn, void *userdata,
				msb_error **err)
{
	ns_backend *nb = msb_backend_impl(b, &ns_ops);
	if (!nb)
		return msb_error_set(err, MSB_E_VALUE, "backend `%s` is not an ns backend",
				     b ? msb_backend_name(b) : "(null)");
	nb->progress = fn;
	nb->progress_userdata = userdata;
	return 0;
}

/* Every sandbox in state_dir (<root>/ns or <root>/oci), from its labels. */
static int list_state_dir(const char *state_dir, const char *what, msb_ns_entry **entries,
			  size_t *n, msb_error **err)
{
	*entries = NULL;
	*n = 0;
	/* guest-names: ok - the state root is the host's */
	int statefd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (statefd < 0)
		return errno == ENOENT ? 0 : msb__error_errno(err, errno, "%s: cannot list", what);
	DIR *d = fdopendir(statefd);
	if (!d) {
		close(statefd);
		return msb__error_errno(err, errno, "%s: cannot list", what);
	}
	msb_ns_entry *v = NULL;
	size_t count = 0;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "msb-", 4) != 0)
			continue;
		_cleanup_close_ int dfd = openat(dirfd(d), de->d_name,
						 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		msb_ns_labels l = {0};
		if (msb_ns__labels_read(dfd, &l, NULL) < 0)
			continue;
		msb_ns_entry *nv = msb__reallocarray(v, count + 1, sizeof(*v));
		if (!nv) {
			msb_ns__labels_clear(&l);
			r = msb__error_nomem(err);
			break;
		}
		v = nv;
		msb_ns_entry *e = &v[count++];
		memset(e, 0, sizeof(*e));
		e->name = strdup(de->d_name);
		e->scope = TAKE_PTR(l.scope);
		e->thread_id = TAKE_PTR(l.thread_id);
		e->agent_dir = TAKE_PTR(l.agent_dir);
		e->kind = TAKE_PTR(l.kind);
		e->call_id = TAKE_PTR(l.call_id);
		e->instance_id = TAKE_PTR(l.instance_id);
		e->image = TAKE_PTR(l.image);
		e->created_ns = l.created_ns;
		msb_ns__labels_clear(&l);
		msb_ns_liveness live = msb_ns__liveness(dfd, &e->shim_pid, &e->reason);
		e->alive = live == MSB_NS_RUNNING;
		e->dead = live == MSB_NS_DEAD;
	}
	closedir(d);
	if (r < 0) {
		msb_ns_entries_free(v, count);
		return r;
	}
	*entries = v;
	*n = count;
	return 0;
}

int msb_ns_list(const msb_ns_options *opts, msb_ns_entry **entries, size_t *n, msb_error **err)
{
	ns_backend b;
	int r = msb_ns__backend_init(&b, opts, err);
	if (r < 0)
		return r;
	r = list_state_dir(b.state_dir, "ns", entries, n, err);
	msb_ns__backend_clear(&b);
	return r;
}

int msb_ns_backend_list(const msb_backend *backend, msb_ns_entry **entries, size_t *n,
			msb_error **err)
{
	const ns_backend *b = msb_ns__pool_backend_of(backend);
	if (!b)
		return msb_error_set(
			err, MSB_E_VALUE,
			"msb_ns_backend_list lists an `ns` or `oci` backend's sandboxes; "
			"backend `%s` is neither",
			msb_backend_name(backend));
	return list_state_dir(b->state_dir, b->pool_ops->what, entries, n, err);
}

void msb_ns_entries_free(msb_ns_entry *entries, size_t n)
{
	for (size_t i = 0; entries && i < n; i++) {
		free(entries[i].name);
		free(entries[i].scope);
		free(entries[i].thread_id);
		free(entries[i].agent_dir);
		free(entries[i].kind);
		free(entries[i].call_id);
		free(entries[i].instance_id);
		free(entries[i].reason);
		free(entries[i].image);
	}
	free(entries);
}
