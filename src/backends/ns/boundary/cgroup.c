/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup limits for a sandbox: memory, pids and cpu.
 *
 * v2 when the unified hierarchy offers every controller the limits need
 * (the child is then cloned straight into its cgroup with
 * CLONE_INTO_CGROUP); otherwise v1, one directory per controller hierarchy,
 * and the child is attached after the clone (DESIGN §8: the first v1 attach
 * after ~100 ms of quiet costs an RCU grace period; the spawn overlaps it
 * with the child's rootfs work). Hierarchies, mount roots and our own
 * cgroup are read from /proc/self/mountinfo and /proc/self/cgroup, never
 * assumed. A sandbox lives in `<parent>/msb/<name>`, where <parent> is the
 * caller's own cgroup (or config.cgroup_parent): a sandbox never escapes
 * the limits of whoever started it.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "backends/ns/boundary/boundary_int.h"
#include "util/fs.h"
#include "util/syscalls.h"

#define MAX_DIRS 3
#define DESTROY_TIMEOUT_MS 5000

struct cg_dir {
	char *controller; /* v1 controller, or NULL for v2 */
	char *base;	  /* the parent cgroup's directory */
	char *path;	  /* <base>/msb/<name> */
	bool created;
};

struct msb_ns_cgroup {
	int version;
	char *name;
	uint64_t memory_max, pids_max, cpu_quota_us;
	struct cg_dir dirs[MAX_DIRS];
	size_t n;
	int v2_fd;
	char v2_enable[64]; /* "memory pids cpu" subset, space-separated */
};

/* ---- discovery ------------------------------------------------------------- */

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r;) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

static bool list_has(const char *list, const char *word, char sep)
{
	size_t n = strlen(word);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, sep);
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && strncmp(p, word, n) == 0)
			return true;
		p = e ? e + 1 : NULL;
	}
	return false;
}

/* /proc/self/mountinfo and /proc/self/cgroup, read once per plan: the
 * kernel formats every mount of the namespace for each read of mountinfo
 * (the overlays' long options among them), which a plan needs once, not
 * once per controller. */
struct proc_texts {
	char *mountinfo;
	char *cgroup;
};

static void proc_texts_clear(struct proc_texts *pt)
{
	free(pt->mountinfo);
	free(pt->cgroup);
}

static int proc_texts_read(struct proc_texts *pt)
{
	int r = msb__read_file_at(AT_FDCWD, "/proc/self/mountinfo", 4 << 20, &pt->mountinfo, NULL);
	if (r == 0)
		r = msb__read_file_at(AT_FDCWD, "/proc/self/cgroup", 64 << 10, &pt->cgroup, NULL);
	return r;
}

/* The mount of a cgroup hierarchy: v2 (controller NULL) or the v1 hierarchy
 * carrying `controller`. Returns the mount point and the mount's root
 * inside the hierarchy. */
static int find_hierarchy(const struct proc_texts *pt, const char *controller, char **mnt_out,
			  char **root_out)
{
	_cleanup_free_ char *info = strdup(pt->mountinfo);
	if (!info)
		return -ENOMEM;
	for (char *line = info; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *f[6] = {0};
		char *p = line;
		for (int i = 0; i < 6 && p; i++) {
			f[i] = p;
			p = strchr(p, ' ');
			if (p)
				*p++ = '\0';
		}
		char *sep = p ? strstr(p, " - ") : NULL;
		if (p && strncmp(p, "- ", 2) == 0)
			sep = p - 1;
		if (sep && f[4]) {
			char *fstype = sep + 3;
			char *src = strchr(fstype, ' ');
			char *opts = NULL;
			if (src) {
				*src++ = '\0';
				opts = strchr(src, ' ');
				if (opts)
					*opts++ = '\0';
			}
			bool match = controller ? (strcmp(fstype, "cgroup") == 0 && opts &&
						   list_has(opts, controller, ','))
						: strcmp(fstype, "cgroup2") == 0;
			if (match) {
				unescape(f[3]);
				unescape(f[4]);
				*mnt_out = strdup(f[4]);
				*root_out = strdup(f[3]);
				if (!*mnt_out || !*root_out) {
					free(*mnt_out);
					free(*root_out);
					return -ENOMEM;
				}
				return 0;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

/* Our own cgroup path in the v1 hierarchy of `controller`, or in v2. */
static int own_cgroup(const struct proc_texts *pt, const char *controller, char **out)
{
	_cleanup_free_ char *s = strdup(pt->cgroup);
	if (!s)
		return -ENOMEM;
	for (char *line = s; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2) {
			*c2 = '\0';
			const char *ctrls = c1 + 1;
			bool v2_line = c1 - line == 1 && line[0] == '0' && !*ctrls;
			bool match = controller ? list_has(ctrls, controller, ',') : v2_line;
			if (match) {
				*out = strdup(c2 + 1);
				return *out ? 0 : -ENOMEM;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

/* The directory of the parent cgroup (own, or cfg->cgroup_parent) in the
 * hierarchy of `controller` (NULL: v2). */
static int parent_dir(const struct proc_texts *pt, const char *controller, const char *parent,
		      char **out, msb_error **err)
{
	_cleanup_free_ char *mnt = NULL, *root = NULL, *own = NULL;
	const char *label = controller ? controller : "v2";
	int r = find_hierarchy(pt, controller, &mnt, &root);
	if (r == -ENOENT)
		return msb_error_set(err, MSB_E_RUNTIME, "no cgroup %s%s hierarchy is mounted",
				     controller ? "v1 " : "", label);
	if (r < 0)
		return msb__error_errno(err, r, "read /proc/self/mountinfo");
	if (!parent) {
		r = own_cgroup(pt, controller, &own);
		if (r < 0)
			return msb__error_errno(err, r, "find our own %s cgroup", label);
		parent = own;
	}
	size_t rl = strlen(root);
	const char *rel;
	if (strcmp(root, "/") == 0)
		rel = parent;
	else if (strncmp(parent, root, rl) == 0 && (parent[rl] == '\0' || parent[rl] == '/'))
		rel = parent + rl;
	else
		return msb_error_set(err, MSB_E_RUNTIME,
				     "cgroup `%s` is outside the %s hierarchy mounted at `%s`",
				     parent, label, mnt);
	while (*rel == '/')
		rel++;
	*out = *rel ? msb__asprintf("%s/%s", mnt, rel) : strdup(mnt);
	return *out ? 0 : msb__error_nomem(err);
}

static bool valid_name(const char *n)
{
	size_t len = strlen(n);
	if (len == 0 || len > 64 || strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = n[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* Are all of `needed` (space-separated) in <dir>/cgroup.controllers? */
static bool v2_offers(const char *dir, const char *needed, char **have_out)
{
	_cleanup_free_ char *path = msb__asprintf("%s/cgroup.controllers", dir);
	char *have = NULL;
	if (!path || msb__read_file_at(AT_FDCWD, path, 4096, &have, NULL) < 0)
		return false;
	char *nl = strchr(have, '\n');
	if (nl)
		*nl = '\0';
	bool ok = true;
	char buf[64];
	snprintf(buf, sizeof(buf), "%s", needed);
	for (char *tok = buf; *tok;) {
		char *sp = strchr(tok, ' ');
		if (sp)
			*sp = '\0';
		if (*tok && !list_has(have, tok, ' '))
			ok = false;
		if (!sp)
			break;
		tok = sp + 1;
	}
	if (have_out)
		*have_out = have;
	else
		free(have);
	return ok;
}

static int add_dir(msb_ns_cgroup *cg, const char *controller, char *base, msb_error **err)
{
	struct cg_dir *d = &cg->dirs[cg->n];
	d->base = base;
	d->path = msb__asprintf("%s/msb/%s", base, cg->name);
	d->controller = controller ? strdup(controller) : NULL;
	cg->n++;
	if (!d->path || (controller && !d->controller))
		return msb__error_nomem(err);
	return 0;
}

static int plan(const msb_ns_config *cfg, const char *name, const struct proc_texts *pt,
		const char **needed, size_t n_needed, const char *want, msb_ns_cgroup **out,
		msb_error **err);

int msb_ns__cgroup_plan(const msb_ns_config *cfg, const char *name, msb_ns_cgroup **out,
			msb_error **err)
{
	*out = NULL;
	const char *needed[MAX_DIRS];
	size_t n_needed = 0;
	if (cfg->memory_max)
		needed[n_needed++] = "memory";
	if (cfg->pids_max)
		needed[n_needed++] = "pids";
	if (cfg->cpu_quota_us)
		needed[n_needed++] = "cpu";
	if (cfg->cgroup == MSB_NS_CGROUP_NONE ||
	    (cfg->cgroup == MSB_NS_CGROUP_AUTO && n_needed == 0))
		return 0;
	if (!name || !valid_name(name))
		return msb_error_set(err, MSB_E_VALUE,
				     "cgroup: sandbox name `%s` is not [A-Za-z0-9._-]{1,64}",
				     name ? name : "");

	char want[64] = "";
	for (size_t i = 0; i < n_needed; i++) {
		size_t l = strlen(want);
		snprintf(want + l, sizeof(want) - l, "%s%s", l ? " " : "", needed[i]);
	}

	struct proc_texts pt = {NULL, NULL};
	int rt = proc_texts_read(&pt);
	if (rt < 0) {
		proc_texts_clear(&pt);
		return msb__error_errno(err, rt, "cgroup: read /proc/self/mountinfo and cgroup");
	}
	int r = plan(cfg, name, &pt, needed, n_needed, want, out, err);
	proc_texts_clear(&pt);
	return r;
}

static int plan(const msb_ns_config *cfg, const char *name, const struct proc_texts *pt,
		const char **needed, size_t n_needed, const char *want, msb_ns_cgroup **out,
		msb_error **err)
{
	msb_ns_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return msb__error_nomem(err);
	cg->v2_fd = -1;
	cg->memory_max = cfg->memory_max;
	cg->pids_max = cfg->pids_max;
	cg->cpu_quota_us = cfg->cpu_quota_us;
	cg->name = strdup(name);
	if (!cg->name) {
		msb_ns__cgroup_free(cg);
		return msb__error_nomem(err);
	}

	/* v2 first. */
	_cleanup_error_ msb_error *v2err = NULL;
	char *v2base = NULL;
	_cleanup_free_ char *v2have = NULL;
	bool v2_ok = false;
	if (cfg->cgroup != MSB_NS_CGROUP_V1 &&
	    parent_dir(pt, NULL, cfg->cgroup_parent, &v2base, &v2err) == 0) {
		v2_ok = v2_offers(v2base, want, &v2have);
		if (!v2_ok)
			msb_error_set(&v2err, MSB_E_RUNTIME,
				      "cgroup v2 at `%s` offers `%s`, not `%s`", v2base,
				      v2have ? v2have : "", want);
	}
	if (v2_ok) {
		cg->version = 2;
		snprintf(cg->v2_enable, sizeof(cg->v2_enable), "%s", want);
		int r = add_dir(cg, NULL, v2base, err);
		if (r < 0) {
			msb_ns__cgroup_free(cg);
			return r;
		}
		*out = cg;
		return 0;
	}
	free(v2base);
	if (cfg->cgroup == MSB_NS_CGROUP_V2) {
		msb_ns__cgroup_free(cg);
		return msb_error_set(err, MSB_E_RUNTIME, "cgroup v2 cannot enforce the limits: %s",
				     msb_error_message(v2err));
	}

	/* v1: one hierarchy per controller (the pids one when no limit is set
	 * but v1 was asked for explicitly). */
	if (n_needed == 0)
		needed[n_needed++] = "pids";
	cg->version = 1;
	for (size_t i = 0; i < n_needed; i++) {
		char *base = NULL;
		_cleanup_error_ msb_error *e = NULL;
		int r = parent_dir(pt, needed[i], cfg->cgroup_parent, &base, &e);
		if (r < 0) {
			msb_ns__cgroup_free(cg);
			return msb_error_set(err, MSB_E_RUNTIME,
					     "cgroup limits (%s) cannot be enforced here: %s; %s",
					     want,
					     v2err ? msb_error_message(v2err) : "v1 asked for",
					     msb_error_message(e));
		}
		if ((r = add_dir(cg, needed[i], base, err)) < 0) {
			msb_ns__cgroup_free(cg);
			return r;
		}
	}
	*out = cg;
	return 0;
}

char *msb_ns__cgroup_record(const msb_ns_cgroup *cg)
{
	msb_buf b = MSB_BUF_INIT;
	for (size_t i = 0; cg && i < cg->n; i++)
		msb__buf_printf(&b, "%s\n", cg->dirs[i].path);
	return msb__buf_steal_str(&b);
}

int msb_ns__cgroup_version(const msb_ns_cgroup *cg)
{
	return cg ? cg->version : 0;
}

int msb_ns__cgroup_clone_fd(const msb_ns_cgroup *cg)
{
	return cg && cg->version == 2 ? cg->v2_fd : -1;
}

const char *msb_ns__cgroup_path(const msb_ns_cgroup *cg, const char *controller)
{
	for (size_t i = 0; cg && i < cg->n; i++)
		if (!cg->dirs[i].controller || strcmp(cg->dirs[i].controller, controller) == 0)
			return cg->dirs[i].path;
	return NULL;
}

/* ---- setup ------------------------------------------------------------------ */

static int write_in_dir(const char *dir, const char *file, const char *value)
{
	_cleanup_free_ char *p = msb__asprintf("%s/%s", dir, file);
	if (!p)
		return -ENOMEM;
	return msb_ns__write_string(AT_FDCWD, p, value);
}

static bool file_exists(const char *dir, const char *file)
{
	_cleanup_free_ char *p = msb__asprintf("%s/%s", dir, file);
	return p && access(p, F_OK) == 0;
}

/* Enable `ctrls` (space-separated) in <dir>/cgroup.subtree_control. */
static int v2_enable(const char *dir, const char *ctrls, msb_error **err)
{
	_cleanup_free_ char *cur = NULL, *path = msb__asprintf("%s/cgroup.subtree_control", dir);
	if (!path)
		return msb__error_nomem(err);
	int r = msb__read_file_at(AT_FDCWD, path, 4096, &cur, NULL);
	if (r < 0)
		return msb__error_errno(err, r, "cgroup: read `%s`", path);
	char buf[64];
	snprintf(buf, sizeof(buf), "%s", ctrls);
	for (char *tok = buf; *tok;) {
		char *sp = strchr(tok, ' ');
		if (sp)
			*sp = '\0';
		char *nl = strchr(cur, '\n');
		if (nl)
			*nl = '\0';
		if (*tok && !list_has(cur, tok, ' ')) {
			char plus[80];
			snprintf(plus, sizeof(plus), "+%s", tok);
			r = msb_ns__write_string(AT_FDCWD, path, plus);
			if (r == -EBUSY)
				return msb_error_set(err, MSB_E_RUNTIME,
						     "cgroup v2: cannot enable `%s` below `%s`: it "
						     "holds processes (no internal processes); set "
						     "cgroup_parent to a delegated cgroup",
						     tok, dir);
			if (r < 0)
				return msb__error_errno(err, r, "cgroup v2: enable `%s` below `%s`",
							tok, dir);
		}
		if (!sp)
			break;
		tok = sp + 1;
	}
	return 0;
}

/* mkdir <base>/msb and <base>/msb/<name>. An existing leaf without
 * processes is a leftover and is replaced; one in use is refused. */
static int make_dirs(msb_ns_cgroup *cg, struct cg_dir *d, msb_error **err)
{
	_cleanup_free_ char *msb = msb__asprintf("%s/msb", d->base);
	if (!msb)
		return msb__error_nomem(err);
	for (int attempt = 0; attempt < 5; attempt++) {
		if (mkdir(msb, 0755) < 0 && errno != EEXIST)
			return msb__error_errno(err, -errno, "cgroup: create `%s`", msb);
		if (cg->version == 2 && cg->v2_enable[0]) {
			int r = v2_enable(msb, cg->v2_enable, err);
			if (r < 0)
				return r;
		}
		if (mkdir(d->path, 0755) == 0) {
			d->created = true;
			return 0;
		}
		if (errno == ENOENT)
			continue; /* a sibling's teardown removed `msb` under us */
		if (errno != EEXIST)
			return msb__error_errno(err, -errno, "cgroup: create `%s`", d->path);
		if (rmdir(d->path) < 0 && errno != ENOENT)
			return msb_error_set(err, MSB_E_RUNTIME,
					     "cgroup `%s` already exists and is in use", d->path);
	}
	return msb_error_set(err, MSB_E_RUNTIME, "cgroup: `%s` keeps disappearing", msb);
}

static int set_limits(msb_ns_cgroup *cg, struct cg_dir *d, msb_error **err)
{
	char v[64];
	int r = 0;
	const char *file = NULL;
	if (cg->version == 2) {
		if (cg->memory_max) {
			snprintf(v, sizeof(v), "%llu", (unsigned long long)cg->memory_max);
			if ((r = write_in_dir(d->path, file = "memory.max", v)) < 0)
				goto fail;
			if (file_exists(d->path, "memory.swap.max") &&
			    (r = write_in_dir(d->path, file = "memory.swap.max", "0")) < 0)
				goto fail;
		}
		if (cg->pids_max) {
			snprintf(v, sizeof(v), "%llu", (unsigned long long)cg->pids_max);
			if ((r = write_in_dir(d->path, file = "pids.max", v)) < 0)
				goto fail;
		}
		if (cg->cpu_quota_us) {
			snprintf(v, sizeof(v), "%llu %llu", (unsigned long long)cg->cpu_quota_us,
				 (unsigned long long)MSB_NS_CPU_PERIOD_US);
			if ((r = write_in_dir(d->path, file = "cpu.max", v)) < 0)
				goto fail;
		}
		return 0;
	}
	if (strcmp(d->controller, "memory") == 0 && cg->memory_max) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)cg->memory_max);
		if ((r = write_in_dir(d->path, file = "memory.limit_in_bytes", v)) < 0)
			goto fail;
		/* Memory plus swap at the same bound: no swapping past the limit. */
		if (file_exists(d->path, "memory.memsw.limit_in_bytes") &&
		    (r = write_in_dir(d->path, file = "memory.memsw.limit_in_bytes", v)) < 0)
			goto fail;
	} else if (strcmp(d->controller, "pids") == 0 && cg->pids_max) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)cg->pids_max);
		if ((r = write_in_dir(d->path, file = "pids.max", v)) < 0)
			goto fail;
	} else if (strcmp(d->controller, "cpu") == 0 && cg->cpu_quota_us) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)MSB_NS_CPU_PERIOD_US);
		if ((r = write_in_dir(d->path, file = "cpu.cfs_period_us", v)) < 0)
			goto fail;
		snprintf(v, sizeof(v), "%llu", (unsigned long long)cg->cpu_quota_us);
		if ((r = write_in_dir(d->path, file = "cpu.cfs_quota_us", v)) < 0)
			goto fail;
	}
	return 0;
fail:
	return msb__error_errno(err, r, "cgroup: set `%s/%s`", d->path, file);
}

int msb_ns__cgroup_setup(msb_ns_cgroup *cg, msb_error **err)
{
	if (!cg)
		return 0;
	for (size_t i = 0; i < cg->n; i++) {
		struct cg_dir *d = &cg->dirs[i];
		int r;
		if (cg->version == 2 && cg->v2_enable[0] &&
		    (r = v2_enable(d->base, cg->v2_enable, err)) < 0)
			return r;
		if ((r = make_dirs(cg, d, err)) < 0 || (r = set_limits(cg, d, err)) < 0)
			return r;
	}
	if (cg->version == 2) {
		cg->v2_fd = open(cg->dirs[0].path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cg->v2_fd < 0)
			return msb__error_errno(err, -errno, "cgroup: open `%s`", cg->dirs[0].path);
	}
	return 0;
}

int msb_ns__cgroup_tasks_fds(const msb_ns_cgroup *cg, int *fds, size_t max, size_t *n,
			     msb_error **err)
{
	*n = 0;
	if (!cg || cg->version != 1)
		return 0;
	for (size_t i = 0; i < cg->n && i < max; i++) {
		_cleanup_free_ char *path = msb__asprintf("%s/tasks", cg->dirs[i].path);
		int fd = path ? open(path, O_WRONLY | O_CLOEXEC) : -1;
		if (fd < 0) {
			int e = path ? -errno : -ENOMEM;
			for (size_t k = 0; k < *n; k++)
				close(fds[k]);
			*n = 0;
			return msb__error_errno(err, e, "cgroup: open `%s/tasks`",
						cg->dirs[i].path);
		}
		fds[(*n)++] = fd;
	}
	return 0;
}

int msb_ns__cgroup_attach(msb_ns_cgroup *cg, pid_t pid, msb_error **err)
{
	if (!cg || cg->version == 2)
		return 0;
	char v[24];
	snprintf(v, sizeof(v), "%d", (int)pid);
	for (size_t i = 0; i < cg->n; i++) {
		int r = write_in_dir(cg->dirs[i].path, "cgroup.procs", v);
		if (r < 0)
			return msb__error_errno(err, r, "cgroup: attach to `%s`", cg->dirs[i].path);
	}
	return 0;
}

/* ---- teardown --------------------------------------------------------------- */

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Does /proc/<pid>/cgroup place the process in a cgroup ending in `suffix`? */
static bool pid_in(pid_t pid, const char *suffix)
{
	char path[48];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	_cleanup_free_ char *s = NULL;
	if (msb__read_file_at(AT_FDCWD, path, 64 << 10, &s, NULL) < 0)
		return false;
	size_t sl = strlen(suffix);
	for (char *line = s; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		size_t ll = strlen(line);
		if (ll >= sl && strcmp(line + ll - sl, suffix) == 0)
			return true;
		line = nl ? nl + 1 : NULL;
	}
	return false;
}

/* SIGKILL what cgroup.procs lists; returns how many were listed. A pid is
 * pinned with a pidfd and checked to still be in the cgroup before the
 * signal, so a recycled pid is never hit. The pidfds of the first `max`
 * signalled go to fds (*nfds), for the caller to wait on. */
static int kill_listed(const char *dir, const char *suffix, int *fds, size_t max, size_t *nfds)
{
	*nfds = 0;
	_cleanup_free_ char *procs = NULL, *path = msb__asprintf("%s/cgroup.procs", dir);
	if (!path)
		return -ENOMEM;
	int r = msb__read_file_at(AT_FDCWD, path, 4 << 20, &procs, NULL);
	if (r < 0)
		return r;
	int n = 0;
	for (char *p = procs; *p;) {
		char *end;
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		p = *end ? end + 1 : end;
		n++;
		int fd = msb__sys_pidfd_open((pid_t)pid, 0);
		if (fd < 0)
			continue;
		if (pid_in((pid_t)pid, suffix) && msb__sys_pidfd_send_signal(fd, SIGKILL, 0) == 0 &&
		    *nfds < max) {
			fds[(*nfds)++] = fd;
			continue;
		}
		close(fd);
	}
	return n;
}

/* Until every pidfd is readable (its process gone) or `ms` passed; closes
 * them. */
static void wait_gone(int *fds, size_t n, long ms)
{
	int64_t deadline = msb__now_ns() + (int64_t)ms * 1000000;
	for (size_t i = 0; i < n; i++) {
		int r;
		do {
			int64_t left = (deadline - msb__now_ns()) / 1000000;
			struct pollfd p = {.fd = fds[i], .events = POLLIN};
			r = poll(&p, 1, left > 0 ? (int)left : 0);
		} while (r < 0 && errno == EINTR);
		close(fds[i]);
	}
}

/* Empty and remove one cgroup directory. What it lists is killed and
 * waited for through pidfds (their exit is what the rmdir waits for); a
 * short sleep only when nothing could be pinned. */
static int remove_dir(const char *path, int version, msb_error **err)
{
	const char *leaf = strrchr(path, '/');
	_cleanup_free_ char *suffix = msb__asprintf("/msb%s", leaf ? leaf : "");
	if (!suffix)
		return msb__error_nomem(err);
	if (version == 2 && file_exists(path, "cgroup.kill"))
		write_in_dir(path, "cgroup.kill", "1");
	int64_t deadline = msb__now_ns() + (int64_t)DESTROY_TIMEOUT_MS * 1000000;
	long pause = 1;
	for (;;) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY && errno != ENOTEMPTY)
			return msb__error_errno(err, -errno, "cgroup: remove `%s`", path);
		if (msb__now_ns() > deadline)
			return msb_error_set(err, MSB_E_RUNTIME,
					     "cgroup: `%s` still has processes after %d ms", path,
					     DESTROY_TIMEOUT_MS);
		int fds[64];
		size_t nfds;
		kill_listed(path, suffix, fds, 64, &nfds);
		if (nfds > 0) {
			wait_gone(fds, nfds, 100);
			continue;
		}
		sleep_ms(pause);
		if (pause < 50)
			pause *= 2;
	}
}

/* The shared `msb` parent goes when its last sandbox does. */
static void remove_parent(const char *path)
{
	_cleanup_free_ char *parent = strdup(path);
	char *slash = parent ? strrchr(parent, '/') : NULL;
	if (!slash)
		return;
	*slash = '\0';
	rmdir(parent); /* ENOTEMPTY/EBUSY: other sandboxes still use it */
}

int msb_ns__cgroup_destroy(msb_ns_cgroup *cg, msb_error **err)
{
	if (!cg)
		return 0;
	int ret = 0;
	if (cg->v2_fd >= 0) {
		close(cg->v2_fd);
		cg->v2_fd = -1;
	}
	for (size_t i = 0; i < cg->n; i++) {
		struct cg_dir *d = &cg->dirs[i];
		if (!d->created)
			continue;
		msb_error *e = NULL;
		int r = remove_dir(d->path, cg->version, &e);
		if (r < 0) {
			if (ret == 0)
				ret = msb__error_propagate(err, e);
			else
				msb_error_free(e);
			continue;
		}
		d->created = false;
		remove_parent(d->path);
	}
	return ret;
}

void msb_ns__cgroup_free(msb_ns_cgroup *cg)
{
	if (!cg)
		return;
	if (cg->v2_fd >= 0)
		close(cg->v2_fd);
	for (size_t i = 0; i < cg->n; i++) {
		free(cg->dirs[i].controller);
		free(cg->dirs[i].base);
		free(cg->dirs[i].path);
	}
	free(cg->name);
	free(cg);
}

/* Is `path` inside a mounted cgroup hierarchy? Returns its version. */
static int hierarchy_of(const char *path)
{
	_cleanup_free_ char *info = NULL;
	if (msb__read_file_at(AT_FDCWD, "/proc/self/mountinfo", 4 << 20, &info, NULL) < 0)
		return 0;
	int version = 0;
	size_t best = 0;
	for (char *line = info; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *sep = strstr(line, " - ");
		char *f = line;
		for (int i = 0; i < 4 && f; i++) {
			f = strchr(f, ' ');
			if (f)
				f++;
		}
		if (sep && f) {
			char *end = strchr(f, ' ');
			if (end) {
				*end = '\0';
				unescape(f);
				size_t ml = strlen(f);
				const char *fs = sep + 3;
				int v = strncmp(fs, "cgroup2 ", 8) == 0	 ? 2
					: strncmp(fs, "cgroup ", 7) == 0 ? 1
									 : 0;
				if (strncmp(path, f, ml) == 0 && path[ml] == '/' && ml >= best) {
					best = ml;
					version = v;
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return version;
}

int msb_ns__cgroup_remove_recorded(const char *path, msb_error **err)
{
	size_t len = strlen(path);
	const char *leaf = strrchr(path, '/');
	if (path[0] != '/' || len > 4000 || strstr(path, "/../") || strstr(path, "/./") || !leaf ||
	    !valid_name(leaf + 1) || leaf - path < 4 || strncmp(leaf - 4, "/msb", 4) != 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "cgroup record: `%s` is not a sandbox cgroup", path);
	int version = hierarchy_of(path);
	if (version == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "cgroup record: `%s` is not in a cgroup hierarchy", path);
	struct stat st;
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		return msb__error_errno(err, -errno, "cgroup: stat `%s`", path);
	}
	if (!S_ISDIR(st.st_mode))
		return msb_error_set(err, MSB_E_VALUE, "cgroup record: `%s` is not a directory",
				     path);
	int r = remove_dir(path, version, err);
	if (r == 0)
		remove_parent(path);
	return r;
}
