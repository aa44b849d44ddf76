/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /proc: the kill hunt of an exec and the process snapshot (PS_REQUEST).
 *
 * The hunt: a process belongs to an exec when it descends from the agent
 * (the agent is PID 1 or a child subreaper, so orphans of workloads come to
 * it) and somewhere on its parent chain below the agent there is the exec's
 * leader, or a process whose session or group is one the hunt already
 * marked (the leader's, and those of every member found so far). The second
 * rule catches orphans that were reparented to the agent and lost their
 * ancestry. Zombies are dead; anything else that matches gets SIGKILL.
 * The workloads' reaper (pidns.c) is never one of an exec's processes.
 *
 * Everything is read through the procfs of the agent's own pid namespace
 * (a->proc_fd), never the /proc path: that shows the workloads' namespace,
 * in which the agent does not exist.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

static ssize_t read_file(int proc_fd, const char *path, char *buf, size_t cap)
{
	int fd = openat(proc_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	return (ssize_t)n;
}

static bool parse_u64(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	if (*s < '0' || *s > '9')
		return false;
	while (*s >= '0' && *s <= '9') {
		uint64_t d = (uint64_t)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
		s++;
	}
	*p = s;
	*out = v;
	return true;
}

/* Signed decimal (ppid, tty and friends may be 0 or negative). */
static bool parse_i64(const char **p, int64_t *out)
{
	bool neg = **p == '-';
	if (neg)
		(*p)++;
	uint64_t v;
	if (!parse_u64(p, &v) || v > INT64_MAX)
		return false;
	*out = neg ? -(int64_t)v : (int64_t)v;
	return true;
}

int procs_read_stat(const struct agent *a, pid_t pid, struct pstat *out)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "%d/stat", (int)pid);
	ssize_t n = read_file(a->proc_fd, path, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -ENOENT;
	buf[n] = 0;
	char *lp = strchr(buf, '(');
	char *rp = strrchr(buf, ')');
	if (!lp || !rp || rp < lp || rp[1] != ' ')
		return -EINVAL;
	size_t clen = (size_t)(rp - lp - 1);
	if (clen > MSB_PROTO_MAX_COMM)
		clen = MSB_PROTO_MAX_COMM;
	memcpy(out->comm, lp + 1, clen);
	out->comm[clen] = 0;
	out->comm_len = strnlen(out->comm, clen); /* comm never holds NUL */
	out->pid = pid;

	const char *p = rp + 2;
	out->state = *p;
	if (!out->state || p[1] != ' ')
		return -EINVAL;
	p += 2;
	/* fields 4.. (ppid pgrp session ...), starttime is field 22 */
	int64_t v[19];
	for (int i = 0; i < 19; i++) {
		if (!parse_i64(&p, &v[i]))
			return -EINVAL;
		if (*p == ' ')
			p++;
		else if (i < 18)
			return -EINVAL;
	}
	out->ppid = (pid_t)v[0];
	out->pgrp = (pid_t)v[1];
	out->sid = (pid_t)v[2];
	out->start_ticks = v[18] < 0 ? 0 : (uint64_t)v[18];
	return 0;
}

/* A fresh listing of the agent's procfs (the caller closedir()s it). */
static DIR *open_proc(const struct agent *a)
{
	int fd = openat(a->proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	DIR *d = fdopendir(fd);
	if (!d)
		close(fd);
	return d;
}

/* Numeric entries of /proc into a growable array. */
static int list_procs(const struct agent *a, struct pstat **out, size_t *nout)
{
	DIR *d = open_proc(a);
	if (!d)
		return -errno;
	struct pstat *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *s = de->d_name;
		uint64_t pid;
		if (!parse_u64(&s, &pid) || *s || pid == 0 || pid > INT32_MAX)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 256;
			struct pstat *nv = realloc(v, ncap * sizeof(*nv));
			if (!nv) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
			cap = ncap;
		}
		if (procs_read_stat(a, (pid_t)pid, &v[n]) == 0)
			n++;
	}
	closedir(d);
	*out = v;
	*nout = n;
	return 0;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = ((const struct pstat *)a)->pid, y = ((const struct pstat *)b)->pid;
	return (x > y) - (x < y);
}

static const struct pstat *find(const struct pstat *v, size_t n, pid_t pid)
{
	struct pstat key = {.pid = pid};
	return bsearch(&key, v, n, sizeof(*v), cmp_pid);
}

static bool marked(const struct exec_ch *e, pid_t id)
{
	if (id == e->pid)
		return true;
	for (unsigned i = 0; i < e->nkill_ids; i++)
		if (e->kill_ids[i] == id)
			return true;
	return false;
}

static void mark(struct exec_ch *e, pid_t id, pid_t agent_pgrp, pid_t agent_sid)
{
	if (id <= 1 || id == agent_pgrp || id == agent_sid || marked(e, id))
		return;
	if (e->nkill_ids < AGENT_KILL_IDS)
		e->kill_ids[e->nkill_ids++] = id;
}

/* Does p belong to the exec? Walk its chain up to the agent. */
static bool belongs(const struct agent *a, const struct exec_ch *e, const struct pstat *v, size_t n,
		    const struct pstat *p)
{
	bool hit = false;
	for (size_t depth = 0; p && depth < n; depth++) {
		if (p->pid == a->self)
			return hit;
		if (p->pid == e->pid || marked(e, p->pgrp) || marked(e, p->sid))
			hit = true;
		if (p->ppid == a->self)
			return hit;
		p = find(v, n, p->ppid);
	}
	return false; /* not below the agent: never ours */
}

int procs_hunt(struct agent *a, struct exec_ch *e)
{
	struct pstat *v = NULL;
	size_t n = 0;
	int rc = list_procs(a, &v, &n);
	if (rc < 0)
		return rc;
	qsort(v, n, sizeof(*v), cmp_pid);
	pid_t agent_pgrp = getpgrp(), agent_sid = getsid(0);
	int live = 0;
	/* two passes: marks found in the first reach orphans in the second */
	for (int pass = 0; pass < 2; pass++) {
		live = 0;
		for (size_t i = 0; i < n; i++) {
			const struct pstat *p = &v[i];
			if (p->pid == a->self || p->pid == a->reaper || !belongs(a, e, v, n, p))
				continue;
			mark(e, p->pgrp, agent_pgrp, agent_sid);
			mark(e, p->sid, agent_pgrp, agent_sid);
			if (p->state == 'Z' || p->state == 'X')
				continue;
			kill(p->pid, SIGKILL);
			live++;
		}
	}
	free(v);
	return live;
}

/* Below the agent at all? (PID 1: everything is.) */
static bool descends(const struct agent *a, const struct pstat *v, size_t n, const struct pstat *p)
{
	for (size_t depth = 0; p && depth < n; depth++) {
		if (p->ppid == a->self)
			return true;
		p = find(v, n, p->ppid);
	}
	return false;
}

int procs_kill_descendants(struct agent *a)
{
	struct pstat *v = NULL;
	size_t n = 0;
	int rc = list_procs(a, &v, &n);
	if (rc < 0)
		return rc;
	qsort(v, n, sizeof(*v), cmp_pid);
	int live = 0;
	for (size_t i = 0; i < n; i++) {
		const struct pstat *p = &v[i];
		if (p->pid == a->self || p->state == 'Z' || p->state == 'X' ||
		    !descends(a, v, n, p))
			continue;
		kill(p->pid, SIGKILL);
		live++;
	}
	free(v);
	return live;
}

/* ---- snapshot ------------------------------------------------------------ */

static uint32_t read_uid(const struct agent *a, pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "%d/status", (int)pid);
	ssize_t n = read_file(a->proc_fd, path, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		const char *u = strstr(buf, "\nUid:");
		if (u) {
			u += 5;
			while (*u == '\t' || *u == ' ')
				u++;
			uint64_t uid;
			if (parse_u64(&u, &uid) && uid <= UINT32_MAX)
				return (uint32_t)uid;
		}
	}
	struct stat st;
	snprintf(path, sizeof(path), "%d", (int)pid);
	return fstatat(a->proc_fd, path, &st, 0) == 0 ? (uint32_t)st.st_uid : UINT32_MAX;
}

static void flush_frame(struct conn *c, msb_proto_ps_writer *w, bool more)
{
	int len = msb_proto_ps_writer_finish(w, more);
	conn_queue(c, w->out, len);
}

void procs_snapshot(const struct agent *a, struct conn *c, uint32_t id,
		    const msb_proto_ps_request *q)
{
	size_t cap = MSB_PROTO_HEADER_SIZE + c->peer_max_payload;
	uint8_t *frame = malloc(cap);
	char *argv = malloc(MSB_PROTO_MAX_PS_ARGV + 1);
	DIR *d = open_proc(a);
	if (!frame || !argv || !d) {
		uint8_t buf[MSB_PROTO_HEADER_SIZE + 4 + MSB_PROTO_MAX_ERROR_MSG];
		conn_queue(c, buf,
			   msb_proto_enc_error(buf, sizeof(buf), id, MSB_PROTO_ERR_INTERNAL,
					       "cannot read the process table"));
		goto out;
	}
	/* one entry must fit in one frame of the peer's size */
	size_t max_argv = q->max_argv;
	size_t fit = c->peer_max_payload - 4 - MSB_PROTO_PS_ENTRY_FIXED - MSB_PROTO_MAX_COMM;
	if (max_argv > fit)
		max_argv = fit;

	msb_proto_ps_writer w;
	msb_proto_ps_writer_init(&w, frame, cap, id);
	uint32_t count = 0;
	struct dirent *de;
	while (count < q->max_entries && (de = readdir(d))) {
		const char *s = de->d_name;
		uint64_t pid;
		if (!parse_u64(&s, &pid) || *s || pid == 0 || pid > INT32_MAX)
			continue;
		struct pstat ps;
		if ((pid_t)pid == a->reaper || procs_read_stat(a, (pid_t)pid, &ps) < 0)
			continue;
		char path[64];
		snprintf(path, sizeof(path), "%d/cmdline", (int)pid);
		ssize_t an = read_file(a->proc_fd, path, argv, max_argv + 1);
		uint8_t flags = 0;
		if (an < 0)
			an = 0;
		if ((size_t)an > max_argv) {
			an = (ssize_t)max_argv;
			flags |= MSB_PROTO_PS_ARGV_TRUNCATED;
		} else if (an > 0 && argv[an - 1] == 0) {
			an--; /* the terminator of the last argument */
		}
		msb_proto_ps_entry ent = {
			.pid = (uint32_t)ps.pid,
			.ppid = ps.ppid < 0 ? 0 : (uint32_t)ps.ppid,
			.pgid = ps.pgrp < 0 ? 0 : (uint32_t)ps.pgrp,
			.sid = ps.sid < 0 ? 0 : (uint32_t)ps.sid,
			.uid = read_uid(a, ps.pid),
			.start_ticks = ps.start_ticks,
			.state = (uint8_t)(ps.state > 0x20 && ps.state < 0x7f ? ps.state : '?'),
			.flags = flags,
			.comm = {(const uint8_t *)ps.comm, (uint32_t)ps.comm_len},
			.argv = {(const uint8_t *)argv, (uint32_t)an},
		};
		int rc = msb_proto_ps_writer_add(&w, &ent);
		if (rc == MSB_PROTO_E_SPACE) {
			flush_frame(c, &w, true);
			rc = msb_proto_ps_writer_add(&w, &ent);
		}
		if (rc == 0)
			count++;
	}
	flush_frame(c, &w, false);
out:
	if (d)
		closedir(d);
	free(argv);
	free(frame);
}
