/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include "backends/types.h"
#include "ns_sweep.h"
#include "util/fs.h"

/* One sandbox directory, locked, whose labels `select` took. */
static void take_down(DIR *d, const char *name, int dfd, const msb_ns_labels *l,
		      msb_ns_purge_fn purge, void *ctx, uint64_t *disposed,
		      msb_disposal_failure ***failures, size_t *n_failures)
{
	msb_disposal_code code = MSB_DISPOSAL_UNKNOWN;
	char *detail = NULL;
	msb_error *perr = NULL;
	int r = purge(ctx, name, dfd, l, &perr);
	if (r < 0) {
		code = r == MSB_E_RUNTIME ? MSB_DISPOSAL_TIMEOUT : MSB_DISPOSAL_UNKNOWN;
		detail = msb__asprintf("%s: %s", name, msb_error_message(perr));
		msb_error_free(perr);
	} else if ((r = msb__rm_rf_at(dirfd(d), name)) < 0) {
		code = MSB_DISPOSAL_REFUSED;
		detail = msb__asprintf("%s: the state directory was kept: %s", name, strerror(-r));
	}
	if (r < 0)
		msb_backends__add_failure(failures, n_failures, code, detail);
	free(detail);
	if (r == 0 && disposed)
		(*disposed)++;
}

int msb_ns__sweep(const char *state_dir, msb_ns_select_fn select, void *ud, msb_ns_purge_fn purge,
		  void *ctx, uint64_t *disposed, msb_disposal_failure ***failures,
		  size_t *n_failures)
{
	/* guest-names: ok - the state root is the host's */
	int statefd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (statefd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = fdopendir(statefd);
	if (!d) {
		int e = -errno;
		close(statefd);
		return e;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "msb-", 4) != 0)
			continue;
		int dfd = openat(dirfd(d), de->d_name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		while (flock(dfd, LOCK_EX) < 0 && errno == EINTR)
			;
		msb_ns_labels l = {0};
		bool labelled = msb_ns__labels_read(dfd, &l, NULL) == 0;
		bool take = labelled && select(&l, ud);
		int64_t shim = 0;
		if (!labelled && (msb_ns__shim_alive(dfd, &shim, NULL), shim == 0) &&
		    faccessat(dfd, MSB_NS_LABELS, F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
		    errno == ENOENT) {
			/* An acquire died before its labels landed: labels are written
			 * before any shim starts, so nothing can run here. We hold its
			 * lock; remove the debris. */
			msb__rm_rf_at(dirfd(d), de->d_name);
		}
		if (take)
			take_down(d, de->d_name, dfd, &l, purge, ctx, disposed, failures,
				  n_failures);
		msb_ns__labels_clear(&l);
		close(dfd);
	}
	closedir(d);
	return 0;
}

static void free_failures(msb_disposal_failure **fails, size_t n)
{
	for (size_t i = 0; i < n; i++)
		msb_disposal_failure_free(fails[i]);
	free(fails);
}

struct key_sel {
	const msb_key *key;
	const char *kind;
	const char *instance_id;
};

static bool select_key(const msb_ns_labels *l, void *ud)
{
	struct key_sel *s = ud;
	return msb_ns__labels_match(l, s->key, s->kind, s->instance_id);
}

int msb_ns__dispose(const char *state_dir, msb_ns_purge_fn purge, void *ctx, const msb_key *key,
		    const char *kind, const char *instance_id, msb_disposal_failure **failure,
		    msb_error **err)
{
	struct key_sel sel = {key, kind, instance_id};
	msb_disposal_failure **fails = NULL;
	size_t n = 0;
	int r = msb_ns__sweep(state_dir, select_key, &sel, purge, ctx, NULL, &fails, &n);
	if (r < 0) {
		_cleanup_free_ char *detail =
			msb__asprintf("cannot list `%s`: %s", state_dir, strerror(-r));
		return msb_disposal_failure_new(MSB_DISPOSAL_UNREACHABLE, detail, failure, err);
	}
	if (n > 0) {
		r = msb_fold_disposal_failures((const msb_disposal_failure *const *)fails, n,
					       failure, err);
		free_failures(fails, n);
		return r;
	}
	*failure = NULL;
	return 0;
}

struct scope_sel {
	const char *scope;
	const char *thread_id;
};

static bool select_scope(const msb_ns_labels *l, void *ud)
{
	struct scope_sel *s = ud;
	return msb__streq_null(l->scope, s->scope) && msb__streq_null(l->thread_id, s->thread_id);
}

int msb_ns__dispose_scope(const char *state_dir, const char *who, msb_ns_purge_fn purge, void *ctx,
			  const char *scope, const char *thread_id, msb_scope_purge *out,
			  msb_error **err)
{
	struct scope_sel sel = {scope, thread_id};
	msb_disposal_failure **fails = NULL;
	size_t n = 0;
	uint64_t count = 0;
	int r = msb_ns__sweep(state_dir, select_scope, &sel, purge, ctx, &count, &fails, &n);
	free_failures(fails, n);
	if (r < 0)
		return msb__error_errno(err, r, "%s: cannot list `%s`", who, state_dir);
	out->disposed = count;
	out->undisposed = n;
	return 0;
}
