/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What an exec asks for besides its command (include/msb/sandbox.h): the
 * environment's bounds and reserved names, the terminal-size holder
 * (msb_tty), and the request's normal form - version 1 requests read as
 * version 2, and the streaming members a backend does not serve refused
 * before it sees them (msb__exec_prepare, used by sandbox.c).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stddef.h>

#include <msb/backend.h>
#include <msb/sandbox.h>

#include "core/policy/exec_opts.h"
#include "platform/platform.h"
#include "util/util.h"

/* ---- the environment -------------------------------------------------------- */

/* Set by the sandbox for its egress proxy (agent/egress.c, docs/egress.md). */
static const char *const proxy_names[] = {
	"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", NULL,
};

static bool name_is(const char *kv, size_t n, const char *name)
{
	return strlen(name) == n && memcmp(kv, name, n) == 0;
}

/*
 * PYTHONPATH as the host-tool launcher reads an inherited one (14.32): it
 * keeps an entry only when absolute and canonical, so one it would drop is
 * refused here rather than dropped later without a word. An empty entry is
 * refused too: Python reads it as the working directory.
 */
static int check_pythonpath(const char *v, msb_error **err)
{
	if (!*v)
		return 0;
	size_t i = 0;
	for (const char *p = v;; i++) {
		const char *end = strchr(p, ':');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *why = NULL;
		if (n == 0)
			why = "is empty (Python reads it as the working directory)";
		else if (p[0] != '/')
			why = "is not absolute";
		for (size_t k = 0; !why && k < n; k++) {
			if (p[k] != '/')
				continue;
			size_t rest = n - k - 1;
			const char *q = p + k + 1;
			if ((rest >= 1 && q[0] == '/') || (rest == 1 && q[0] == '.') ||
			    (rest >= 2 && q[0] == '.' && q[1] == '/') ||
			    (rest == 2 && q[0] == '.' && q[1] == '.') ||
			    (rest >= 3 && q[0] == '.' && q[1] == '.' && q[2] == '/'))
				why = "is not canonical (`//`, `/./` or `/../`, or ends in `/.` or "
				      "`/..`)";
		}
		if (why)
			return msb_error_set(err, MSB_E_VALUE,
					     "env: PYTHONPATH entry %zu `%.*s` %s; the host-tool "
					     "launcher keeps only absolute, canonical entries "
					     "(docs/hosttools.md)",
					     i + 1, (int)(n > 200 ? 200 : n), p, why);
		if (!end)
			return 0;
		p = end + 1;
	}
}

int msb_exec_env_check(const char *const *env, msb_error **err)
{
	size_t total = 0;
	for (size_t i = 0; env && env[i]; i++) {
		const char *kv = env[i];
		if (i >= MSB_EXEC_ENV_MAX)
			return msb_error_set(err, MSB_E_VALUE, "env: more than %u entries",
					     MSB_EXEC_ENV_MAX);
		size_t len = strlen(kv);
		total += len;
		if (total > MSB_EXEC_ENV_MAX_BYTES)
			return msb_error_set(err, MSB_E_VALUE,
					     "env: the entries exceed %u bytes together",
					     MSB_EXEC_ENV_MAX_BYTES);
		const char *eq = strchr(kv, '=');
		if (!eq)
			return msb_error_set(err, MSB_E_VALUE,
					     "env: entry `%.80s` is not NAME=VALUE", kv);
		size_t n = (size_t)(eq - kv);
		if (n == 0)
			return msb_error_set(err, MSB_E_VALUE,
					     "env: entry `%.80s` has an empty name", kv);
		if (n > MSB_EXEC_ENV_MAX_NAME)
			return msb_error_set(err, MSB_E_VALUE,
					     "env: the name `%.40s...` is longer than %u bytes", kv,
					     MSB_EXEC_ENV_MAX_NAME);
		for (size_t k = 0; proxy_names[k]; k++)
			if (name_is(kv, n, proxy_names[k]))
				return msb_error_set(
					err, MSB_E_VALUE,
					"env: `%s` is reserved: the sandbox sets it to "
					"its egress proxy (docs/egress.md)",
					proxy_names[k]);
		if (name_is(kv, n, "PYTHONNOUSERSITE"))
			return msb_error_set(err, MSB_E_VALUE,
					     "env: `PYTHONNOUSERSITE` is reserved: the host-tool "
					     "launcher sets it (docs/hosttools.md)");
		if (name_is(kv, n, "PYTHONPATH")) {
			int r = check_pythonpath(eq + 1, err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* ---- terminals ------------------------------------------------------------------ */

struct msb_tty {
	atomic_uint size; /* rows << 16 | cols */
	int pipe[2];	  /* a byte per resize; nonblocking both ends */
};

static unsigned clamp_dim(unsigned v)
{
	return v < 1 ? 1 : v > MSB_TTY_MAX_DIM ? MSB_TTY_MAX_DIM : v;
}

int msb_tty_new(unsigned rows, unsigned cols, msb_tty **out, msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "output pointer is NULL");
	if (rows < 1 || rows > MSB_TTY_MAX_DIM || cols < 1 || cols > MSB_TTY_MAX_DIM)
		return msb_error_set(err, MSB_E_VALUE,
				     "a terminal of %u rows and %u columns: each must be 1..%u",
				     rows, cols, MSB_TTY_MAX_DIM);
	msb_tty *t = calloc(1, sizeof(*t));
	if (!t)
		return msb__error_nomem(err);
	int rc = msb__plat_wake_new(&t->pipe[0], &t->pipe[1], false);
	if (rc < 0) {
		free(t);
		return msb__error_errno(err, rc, "cannot make the terminal's resize pipe");
	}
	atomic_init(&t->size, rows << 16 | cols);
	*out = t;
	return 0;
}

/* Async-signal-safe: one atomic store and at most one write(2). */
void msb_tty_resize(msb_tty *t, unsigned rows, unsigned cols)
{
	if (!t)
		return;
	atomic_store(&t->size, clamp_dim(rows) << 16 | clamp_dim(cols));
	int saved = errno;
	char one = 1;
	ssize_t MSB_UNUSED n = write(t->pipe[1], &one, 1); /* full: a wake-up is pending */
	errno = saved;
}

void msb_tty_size(const msb_tty *t, unsigned *rows, unsigned *cols)
{
	unsigned v = t ? atomic_load(&((msb_tty *)t)->size) : (24u << 16 | 80u);
	if (rows)
		*rows = v >> 16;
	if (cols)
		*cols = v & 0xffffu;
}

int msb_tty_fd(const msb_tty *t)
{
	return t ? t->pipe[0] : -1;
}

bool msb_tty_take_resize(msb_tty *t, unsigned *rows, unsigned *cols)
{
	bool resized = false;
	char buf[64];
	while (t && read(t->pipe[0], buf, sizeof(buf)) > 0)
		resized = true;
	msb_tty_size(t, rows, cols);
	return resized;
}

void msb_tty_free(msb_tty *t)
{
	if (!t)
		return;
	msb__plat_wake_close(t->pipe[0], t->pipe[1]);
	free(t);
}

/* ---- the request's normal form ---------------------------------------------------- */

int msb__exec_prepare(unsigned served, const char *backend, const msb_exec_request *req,
		      msb_exec_request *out, const char *op, msb_error **err)
{
	if (req->version == 1) {
		/* a caller built against version 1: the members it has, no io */
		memcpy(out, req, offsetof(msb_exec_request, io));
		out->version = MSB_EXEC_REQUEST_VERSION;
		out->io = NULL;
	} else if (req->version == MSB_EXEC_REQUEST_VERSION) {
		*out = *req;
	} else {
		return msb_error_set(err, MSB_E_VALUE, "%s: request version %u is not supported",
				     op, req->version);
	}
	int r = msb_exec_env_check(out->env, err);
	if (r < 0)
		return msb_error_wrap(err, "%s", op);
	const msb_exec_io *io = out->io;
	if (!io)
		return 0;
	if (io->version != MSB_EXEC_IO_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "%s: io version %u is not supported", op,
				     io->version);
	if (io->stdin_fd >= 0 && out->stdin_len > 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: give stdin_data or io.stdin_fd, not both", op);
	if (io->stdin_fd >= 0) {
		if (!msb__plat_fd_readable(io->stdin_fd))
			return msb_error_set(err, MSB_E_VALUE,
					     "%s: io.stdin_fd %d is not a descriptor open for "
					     "reading",
					     op, io->stdin_fd);
	}
	static const struct {
		unsigned can;
		const char *what;
	} needs[] = {
		{MSB_EXEC_CAN_STDIN_FD, "stream stdin from a descriptor (io.stdin_fd)"},
		{MSB_EXEC_CAN_OUTPUT, "stream output as it comes (io.output)"},
		{MSB_EXEC_CAN_TTY, "run a command on a terminal (io.tty)"},
	};
	unsigned asked = (io->stdin_fd >= 0 ? MSB_EXEC_CAN_STDIN_FD : 0) |
			 (io->output ? MSB_EXEC_CAN_OUTPUT : 0) | (io->tty ? MSB_EXEC_CAN_TTY : 0);
	for (size_t i = 0; i < MSB_ARRAY_SIZE(needs); i++)
		if ((asked & needs[i].can) && !(served & needs[i].can))
			return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
					     "%s: the `%s` backend cannot %s", op, backend,
					     needs[i].what);
	return 0;
}
