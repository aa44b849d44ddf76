/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A backend double for the over-exec transport tests: an msb_sandbox whose
 * "guest" is this host. exec runs /bin/sh in `base` (its own process group,
 * killed on timeout); the file plane resolves relative paths against `base`
 * and takes absolute ones as they are. It counts every operation so a test
 * can assert what the transport did (no list_dir, 14.2).
 */
#include "local_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msb/backend.h>

struct local {
	char base[512];
	struct local_counts *counts;
};

static char *resolve(struct local *l, const char *path)
{
	char *out = NULL;
	if (path[0] == '/')
		return strdup(path);
	if (asprintf(&out, "%s/%s", l->base, path) < 0)
		return NULL;
	return out;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int run(struct local *l, const msb_exec_request *req, msb_exec_result *out, uint64_t budget,
	       msb_error **err)
{
	int po[2], pe[2];
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
		return msb_error_set(err, MSB_E_OS, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		int nul = open("/dev/null", O_RDONLY);
		dup2(nul, 0);
		if (chdir(l->base) < 0)
			_exit(126);
		if (req->argv)
			execvp(req->argv[0], (char *const *)req->argv);
		else
			execl("/bin/sh", "sh", "-c", req->shell, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	close(po[1]);
	close(pe[1]);
	char *buf[2] = {NULL, NULL};
	size_t len[2] = {0, 0};
	bool open_[2] = {true, true};
	int fds[2] = {po[0], pe[0]};
	bool truncated = false, timed_out = false;
	int64_t deadline = now_ns() + (int64_t)(req->timeout * 1e9);
	while (open_[0] || open_[1]) {
		struct pollfd p[2] = {{open_[0] ? fds[0] : -1, POLLIN, 0},
				      {open_[1] ? fds[1] : -1, POLLIN, 0}};
		int64_t left = (deadline - now_ns()) / 1000000;
		if (left <= 0) {
			timed_out = true;
			break;
		}
		if (poll(p, 2, (int)left) < 0 && errno != EINTR)
			break;
		for (int s = 0; s < 2; s++) {
			if (!open_[s] || !(p[s].revents & (POLLIN | POLLHUP)))
				continue;
			char tmp[4096];
			ssize_t n = read(fds[s], tmp, sizeof(tmp));
			if (n <= 0) {
				open_[s] = false;
				continue;
			}
			if (budget && len[0] + len[1] + (size_t)n > budget) {
				n = (ssize_t)(budget - len[0] - len[1]);
				truncated = true;
			}
			buf[s] = realloc(buf[s], len[s] + (size_t)n + 1);
			memcpy(buf[s] + len[s], tmp, (size_t)n);
			len[s] += (size_t)n;
			buf[s][len[s]] = 0;
		}
	}
	if (timed_out)
		kill(-pid, SIGKILL);
	int st = 0;
	waitpid(pid, &st, 0);
	close(fds[0]);
	close(fds[1]);
	if (timed_out) {
		free(buf[0]);
		free(buf[1]);
		return msb_error_set(err, MSB_E_TIMEOUT, "command timed out after %g s",
				     req->timeout);
	}
	for (int s = 0; s < 2; s++)
		if (!buf[s])
			buf[s] = calloc(1, 1);
	out->stdout_bytes = (uint8_t *)buf[0];
	out->stdout_len = len[0];
	out->stderr_bytes = (uint8_t *)buf[1];
	out->stderr_len = len[1];
	out->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	out->term_signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	out->truncated = truncated;
	return 0;
}

static int l_exec(void *impl, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	struct local *l = impl;
	l->counts->execs++;
	if (l->counts->launcher_stdout && req->shell && strstr(req->shell, "run_program.sh") &&
	    strncmp(req->shell, "sh ", 3) == 0) {
		out->stdout_bytes = (uint8_t *)strdup(l->counts->launcher_stdout);
		out->stdout_len = strlen(l->counts->launcher_stdout);
		out->stderr_bytes = (uint8_t *)strdup("");
		out->exit_code = 0;
		return 0;
	}
	return run(l, req, out, 0, err);
}

static int l_exec_bounded(void *impl, const msb_exec_request *req, msb_exec_result *out,
			  msb_error **err)
{
	struct local *l = impl;
	l->counts->bounded++;
	if (l->counts->no_bounded)
		return msb_error_set(err, MSB_E_NOT_IMPLEMENTED, "local: no exec_bounded");
	if (l->counts->snapshot_stdout && req->shell &&
	    strncmp(req->shell, "echo \"self $$\"", 14) == 0) {
		out->stdout_bytes = (uint8_t *)strdup(l->counts->snapshot_stdout);
		out->stdout_len = strlen(l->counts->snapshot_stdout);
		out->stderr_bytes = (uint8_t *)strdup("");
		out->exit_code = 0;
		return 0;
	}
	return run(l, req, out, req->max_output_bytes, err);
}

static int l_run_code(void *impl, const char *code, double timeout, msb_cancel *cancel,
		      msb_exec_result *out, msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED, "local: no run_code");
}

static int mkparents(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int r = mkdir(path, 0755);
		*p = '/';
		if (r < 0 && errno != EEXIST)
			return -1;
	}
	return 0;
}

static int l_write(void *impl, const char *path, const uint8_t *data, size_t len, const char *wd,
		   msb_error **err)
{
	struct local *l = impl;
	l->counts->writes++;
	char *p = resolve(l, path);
	char *tmp = NULL;
	if (!p || mkparents(p) < 0 || asprintf(&tmp, "%s.msb-tmp", p) < 0) {
		free(p);
		return msb_error_set(err, MSB_E_OS, "local write `%s`", path);
	}
	FILE *f = fopen(tmp, "wb");
	bool ok = f && fwrite(data, 1, len, f) == len;
	if (f)
		ok = fclose(f) == 0 && ok;
	ok = ok && rename(tmp, p) == 0;
	free(tmp);
	free(p);
	return ok ? 0 : msb_error_set(err, MSB_E_OS, "local write `%s`", path);
}

static int l_stat(void *impl, const char *path, const char *wd, bool *present, msb_entry *out,
		  msb_error **err)
{
	struct local *l = impl;
	l->counts->stats++;
	if (l->counts->stat_timeout_from > 0 && l->counts->stats >= l->counts->stat_timeout_from)
		return msb_error_set(err, MSB_E_TIMEOUT, "local: stat timed out");
	char *p = resolve(l, path);
	struct stat st;
	*present = p && lstat(p, &st) == 0;
	if (*present) {
		out->path = strdup(path);
		out->kind = S_ISDIR(st.st_mode) ? MSB_ENTRY_DIRECTORY : MSB_ENTRY_FILE;
		out->size_known = true;
		out->size_bytes = (uint64_t)st.st_size;
	}
	free(p);
	return 0;
}

static int l_read(void *impl, const char *path, const char *wd, uint64_t max, uint8_t **data,
		  size_t *len, msb_error **err)
{
	struct local *l = impl;
	l->counts->reads++;
	char *p = resolve(l, path);
	FILE *f = p ? fopen(p, "rb") : NULL;
	free(p);
	if (!f)
		return msb_error_set(err, MSB_E_NOT_FOUND, "local read `%s`", path);
	uint8_t *buf = NULL;
	size_t n = 0;
	char tmp[4096];
	size_t r;
	while ((r = fread(tmp, 1, sizeof(tmp), f)) > 0) {
		if (n + r > max) {
			fclose(f);
			free(buf);
			return msb_error_set(err, MSB_E_TRANSFER_CAP_EXCEEDED, "local: too big");
		}
		buf = realloc(buf, n + r + 1);
		memcpy(buf + n, tmp, r);
		n += r;
	}
	fclose(f);
	if (!buf)
		buf = calloc(1, 1);
	buf[n] = 0;
	*data = buf;
	*len = n;
	return 0;
}

static int l_list(void *impl, const char *path, const char *wd, msb_entry **e, size_t *n,
		  msb_error **err)
{
	struct local *l = impl;
	l->counts->lists++;
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED, "local: the transport must not list");
}

static int l_remove(void *impl, const char *path, const char *wd, bool rec, msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED, "local: no remove");
}

static int l_reclaim(void *impl, const char *d, const char *wd, double t, msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED, "local: no reclaim");
}

static int l_reset(void *impl, double t, msb_error **err)
{
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED, "local: no reset");
}

static int l_fp(void *impl, bool *supported, msb_fingerprint *out, msb_error **err)
{
	*supported = false;
	return 0;
}

static const char *l_id(void *impl)
{
	return "local-1";
}

static void l_release(void *impl)
{
	free(impl);
}

static const msb_sandbox_ops local_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = l_exec,
	.exec_bounded = l_exec_bounded,
	.run_code = l_run_code,
	.write_file = l_write,
	.stat_file = l_stat,
	.read_file = l_read,
	.list_dir = l_list,
	.remove = l_remove,
	.reclaim = l_reclaim,
	.reset = l_reset,
	.fingerprint = l_fp,
	.instance_id = l_id,
	.release = l_release,
};

msb_sandbox *local_sandbox_new(const char *base, struct local_counts *counts)
{
	struct local *l = calloc(1, sizeof(*l));
	snprintf(l->base, sizeof(l->base), "%s", base);
	l->counts = counts;
	msb_sandbox *sb = NULL;
	if (msb_sandbox_new(&local_ops, l, "local", &sb, NULL) < 0)
		return NULL;
	return sb;
}
