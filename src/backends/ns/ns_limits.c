/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Resource limits of an ns sandbox: cgroup memory, pids and CPU, and the size
 * of the writable layer (docs/ns.md "Limits").
 *
 * At acquire: the spec's limits where it sets them, the backend's elsewhere,
 * never above the backend's (MSB_E_VALUE naming the limit); a warm sandbox
 * created with other limits is not handed out for this spec.
 *
 * Around each exec: the sandbox's cgroup counters (in the directories the
 * shim recorded in `<state>/cgroups`) are read before and after, and the
 * writable layer and the storage base are looked at afterwards, so that the
 * result says what the limits did. Everything is read on the host; nothing
 * comes from the guest.
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/statfs.h>

#include "backends/ns/boundary/boundary.h"
#include "ns_int.h"
#include "util/fs.h"

#define N_LIMITS 4

/* Spelled as in the spec's JSON (`resources.<name>`) and the shim's config. */
static const char *const limit_names[N_LIMITS] = {"memory_bytes", "pids_max", "cpu_millis",
						  "writable_bytes"};

static void spec_values(const msb_spec *spec, uint64_t v[N_LIMITS])
{
	v[0] = msb_spec_memory_bytes(spec);
	v[1] = msb_spec_pids_max(spec);
	v[2] = msb_spec_cpu_millis(spec);
	v[3] = msb_spec_writable_bytes(spec);
}

static void backend_values(const ns_backend *b, uint64_t v[N_LIMITS])
{
	v[0] = b->memory_bytes;
	v[1] = b->pids_max;
	v[2] = b->cpu_millis;
	v[3] = b->writable_bytes;
}

/*
 * The limits a sandbox of `spec` gets. The backend's values are its defaults
 * and its ceilings; a backend value of 0 (no cgroup limit: an ordinary user
 * without a delegated cgroup) is no ceiling, and a limit the spec asks for
 * there is enforced by the shim or the acquire fails with its reason.
 */
static int resolve(const ns_backend *b, const msb_spec *spec, uint64_t out[N_LIMITS],
		   msb_error **err)
{
	uint64_t want[N_LIMITS], have[N_LIMITS];
	spec_values(spec, want);
	backend_values(b, have);
	for (size_t i = 0; i < N_LIMITS; i++) {
		if (want[i] && have[i] && want[i] > have[i])
			return msb_error_set(err, MSB_E_VALUE,
					     "resources.%s: the spec asks for %llu but the `%s` "
					     "backend allows at most %llu",
					     limit_names[i], (unsigned long long)want[i], b->name,
					     (unsigned long long)have[i]);
		out[i] = want[i] ? want[i] : have[i];
	}
	return 0;
}

int msb_ns__limits_check(const ns_backend *b, const msb_spec *spec, msb_error **err)
{
	uint64_t v[N_LIMITS];
	return resolve(b, spec, v, err);
}

int msb_ns__config_limits(json_t *cfg, const ns_backend *b, const msb_spec *spec, msb_error **err)
{
	uint64_t v[N_LIMITS];
	int r = resolve(b, spec, v, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < N_LIMITS; i++)
		if (json_object_set_new(cfg, limit_names[i], json_integer((json_int_t)v[i])) < 0)
			return msb__error_nomem(err);
	return 0;
}

int msb_ns__limits_match(int dirfd, const char *name, const ns_backend *b, const msb_spec *spec,
			 msb_error **err)
{
	uint64_t want[N_LIMITS];
	int r = resolve(b, spec, want, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	r = msb__read_file_at(dirfd, "shim.json", 1 << 20, &text, &len);
	json_auto_t *cfg = r < 0 ? NULL : json_loadb(text, len, 0, NULL);
	if (!json_is_object(cfg))
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns sandbox `%s`: cannot tell which limits it runs with "
				     "(shim.json unreadable): dispose it first",
				     name);
	for (size_t i = 0; i < N_LIMITS; i++) {
		json_t *v = json_object_get(cfg, limit_names[i]);
		json_int_t got = json_is_integer(v) ? json_integer_value(v) : 0;
		if (got < 0 || (uint64_t)got != want[i])
			return msb_error_set(
				err, MSB_E_VALUE,
				"resources.%s: the warm sandbox `%s` for this key and "
				"kind runs with %lld, this spec asks for %llu: dispose "
				"it first",
				limit_names[i], name, (long long)got, (unsigned long long)want[i]);
	}
	return 0;
}

/* ---- what the limits did during an exec ------------------------------------- */

/* `key N` in a flat-keyed cgroup file (memory.events, memory.oom_control,
 * pids.events), or the file's only number when key is NULL (memory.failcnt).
 * Re-read from offset 0, which regenerates a cgroup file. */
static int read_counter(int fd, const char *key, uint64_t *out)
{
	char buf[1024];
	ssize_t n;
	do
		n = pread(fd, buf, sizeof(buf) - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	size_t kl = key ? strlen(key) : 0;
	for (char *line = buf; line && *line;) {
		const char *num = NULL;
		if (!key)
			num = line;
		else if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			num = line + kl + 1;
		if (num) {
			char *end;
			errno = 0;
			unsigned long long v = strtoull(num, &end, 10);
			if (errno || end == num || (*end != '\n' && *end != '\0'))
				return -EINVAL;
			*out = v;
			return 0;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -ENOENT;
}

/* Open <dir>/<file> and take its first reading of `key`; -1 if it has none. */
static int open_counter(const char *dir, const char *file, const char *key, uint64_t *first)
{
	char path[PATH_MAX];
	int w = snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (w < 0 || (size_t)w >= sizeof(path))
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	if (read_counter(fd, key, first) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* `<state>/<name>/<file>` from the work path `<state>/<name>/work`. */
static bool state_file(const char *work_path, const char *file, char *out, size_t size)
{
	const char *slash = strrchr(work_path, '/');
	if (!slash || slash == work_path)
		return false;
	int w = snprintf(out, size, "%.*s/%s", (int)(slash - work_path), work_path, file);
	return w > 0 && (size_t)w < size;
}

/* A small file in one read (the state files, procfs): its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	ssize_t n;
	do
		n = read(fd, buf, size - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0 || (size_t)n == size - 1)
		return -1; /* unreadable, or longer than any we write */
	buf[n] = '\0';
	return n;
}

/* One recorded cgroup directory (v1: one per controller; v2: one for all),
 * probed in an order that makes no failed open on v1 and one on v2. */
static void probe_dir(ns_outcome *o, const char *dir)
{
	if (o->oom_fd < 0 &&
	    (o->oom_fd = open_counter(dir, "memory.oom_control", "oom_kill", &o->oom)) >= 0)
		return; /* the v1 memory directory: nothing else is here */
	if (o->pids_fd < 0)
		o->pids_fd = open_counter(dir, "pids.events", "max", &o->pids);
	if (o->oom_fd < 0)
		o->oom_fd = open_counter(dir, "memory.events", "oom_kill", &o->oom);
	/* v1 before 4.13 has no oom_kill count: fall back on the limit's fail
	 * count together with a SIGKILLed command. */
	if (o->oom_fd < 0 && o->failcnt_fd < 0)
		o->failcnt_fd = open_counter(dir, "memory.failcnt", NULL, &o->failcnt);
}

void msb_ns__outcome_begin(ns_outcome *o, const char *work_path)
{
	memset(o, 0, sizeof(*o));
	o->oom_fd = o->failcnt_fd = o->pids_fd = -1;
	char path[PATH_MAX], list[4096];
	if (!state_file(work_path, MSB_NS_STATE_CGROUPS, path, sizeof(path)) ||
	    read_small(path, list, sizeof(list)) < 0)
		return; /* no cgroup: no limit to report on */
	/* One directory per line: the v2 one, or one per v1 hierarchy. */
	for (char *line = list; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (line[0] == '/')
			probe_dir(o, line);
		line = nl ? nl + 1 : NULL;
	}
}

/* Did the counter behind fd grow past `before`? */
static bool grew(int fd, const char *key, uint64_t before)
{
	uint64_t now;
	return fd >= 0 && read_counter(fd, key, &now) == 0 && now > before;
}

/* No free block, or no free inode where the filesystem counts them. */
static bool full(const struct statfs *st)
{
	return st->f_blocks > 0 && (st->f_bavail == 0 || (st->f_files > 0 && st->f_ffree == 0));
}

/* The writable layer is the root of the sandbox's init: look at it through
 * /proc/<init>/root. The init's start time, checked after the look, still
 * being the recorded one proves the pid was the init's all along. */
static bool layer_full(const char *work_path)
{
	char path[PATH_MAX], text[64];
	if (!state_file(work_path, MSB_NS_STATE_INIT_PID, path, sizeof(path)) ||
	    read_small(path, text, sizeof(text)) < 0)
		return false;
	char *end;
	errno = 0;
	long pid = strtol(text, &end, 10);
	if (errno || end == text || *end != ' ' || pid <= 0 || pid > INT32_MAX)
		return false;
	const char *st_text = end + 1;
	unsigned long long start = strtoull(st_text, &end, 10);
	if (end == st_text)
		return false;
	char root[48];
	snprintf(root, sizeof(root), "/proc/%ld/root/", pid);
	struct statfs st;
	uint64_t now;
	if (statfs(root, &st) < 0 || msb_ns__proc_start_time((pid_t)pid, &now) < 0 || now != start)
		return false;
	return full(&st);
}

void msb_ns__outcome_end(ns_outcome *o, const char *work_path, int r, msb_exec_result *out,
			 msb_error **err)
{
	int term_signal = r == 0 ? out->term_signal : 0;
	bool oom =
		grew(o->oom_fd, "oom_kill", o->oom) ||
		(o->oom_fd < 0 && term_signal == SIGKILL && grew(o->failcnt_fd, NULL, o->failcnt));
	bool pids = grew(o->pids_fd, "max", o->pids);
	struct statfs st;
	bool space = layer_full(work_path) || (statfs(work_path, &st) == 0 && full(&st));
	if (o->oom_fd >= 0)
		close(o->oom_fd);
	if (o->failcnt_fd >= 0)
		close(o->failcnt_fd);
	if (o->pids_fd >= 0)
		close(o->pids_fd);
	o->oom_fd = o->failcnt_fd = o->pids_fd = -1;
	if (r == 0) {
		out->oom_killed = oom;
		out->pids_exhausted = pids;
		out->no_space = space;
		return;
	}
	/* No result to carry the flags (a timeout, a cancel, a lost
	 * connection): say it in the error, whose code stays. */
	if (oom || pids || space)
		msb_error_wrap(err, "%s%s%s%s%s",
			       oom ? "the memory limit's OOM killer fired during this exec" : "",
			       oom && (pids || space) ? "; " : "",
			       pids ? "the pids limit refused a fork during this exec" : "",
			       pids && space ? "; " : "",
			       space ? "the writable layer or the storage base is full" : "");
}
