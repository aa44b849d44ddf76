/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `oci` backend: get-or-create under flock on the key-derived state
 * directory `<root>/oci/<name>/`, a per-sandbox msb-oci-shim started
 * detached, disposal selected from labels on disk - the ns backend's life
 * cycle (ns_backend.c) around another shim.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <jansson.h>

#include "backends/ns/ns_sweep.h"
#include "backends/oci/oci_int.h"
#include "backends/types.h"
#include "egress/egress.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/syscalls.h"

#ifndef MSB_LIBEXECDIR
#define MSB_LIBEXECDIR "/usr/local/libexec/msb"
#endif

#define PURGE_TIMEOUT_MS 8000

/* What every oci backend declares, whatever its runtime: the ns file plane
 * (the storage base is a host directory bound in), reset, both scopes, host
 * tools over exec (msb/hosttools_exec.h: exec and the file plane only).
 * The network namespace has only lo; allowlist: the agent's proxy port in
 * the sandbox, its tunnels relayed by the shim to msb-shim's proxy in a
 * process of the shim's (docs/oci.md "Egress"), as on ns and vm; method
 * tokens are the verbs it enforces. */
static const msb_declarations oci_declarations = {
	.version = MSB_DECLARATIONS_VERSION,
	.capabilities = MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_FILES_LIST |
			MSB_CAP_FILES_DELETE | MSB_CAP_RECLAIM | MSB_CAP_SNAPSHOT |
			MSB_CAP_HOST_TOOLS | MSB_CAP_EGRESS_METHODS,
	.limits = {{256u << 20, 1u << 30, 4096}, {256u << 20, 1u << 30, 4096}},
	.egress_modes = MSB_EGRESS_CLOSED | MSB_EGRESS_ALLOWLIST,
	.egress_method_tokens = msb_egress__method_tokens,
	.n_egress_method_tokens = MSB_EGRESS_N_METHOD_TOKENS,
	.os_families = MSB_OS_POSIX,
	.isolation_scopes = MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL,
};

const char *msb_oci__rung(oci_runtime rt)
{
	return rt == OCI_RUNSC ? "hardened_container" : "container";
}

/* `name` in $PATH, executable; NULL when absent. */
char *msb_oci__find_in_path(const char *name)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	while (*path) {
		const char *colon = strchr(path, ':');
		size_t n = colon ? (size_t)(colon - path) : strlen(path);
		if (n > 0 && path[0] == '/') {
			char *cand = msb__asprintf("%.*s/%s", (int)n, path, name);
			/* guest-names: ok - the host's PATH */
			if (cand && access(cand, X_OK) == 0)
				return cand;
			free(cand);
		}
		if (!colon)
			break;
		path = colon + 1;
	}
	return NULL;
}

int msb_oci__check_traversable(const char *path, msb_error **err)
{
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return msb__error_nomem(err);
	for (;;) {
		struct stat st;
		/* guest-names: ok - the host's state root and its ancestors */
		if (stat(p, &st) < 0)
			return msb__error_errno(err, errno, "oci: `%s`", p);
		if (!(st.st_mode & S_IXOTH))
			return msb_error_set(
				err, MSB_E_PERMISSION,
				"oci: `%s` must let others traverse it (o+x): the "
				"runtime reaches the sandbox's root as its mapped root",
				p);
		char *slash = strrchr(p, '/');
		if (!slash || slash == p)
			return 0;
		*slash = '\0';
	}
}

static void backend_clear(oci_backend *b)
{
	msb_ns__backend_clear(&b->ns);
	free(b->runtime_path);
	free(b->platform);
	memset(b, 0, sizeof(*b));
}

static int backend_init(oci_backend *b, const msb_oci_options *opts, msb_error **err)
{
	msb_oci_options defaults = MSB_OCI_OPTIONS_INIT;
	if (!opts)
		opts = &defaults;
	/* Version 1 is the struct without pool_size. */
	if (opts->version < 1 || opts->version > MSB_OCI_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "oci options: unsupported version %u",
				     opts->version);
	memset(b, 0, sizeof(*b));
	const char *rt = opts->runtime ? opts->runtime : "runsc";
	int k = msb_oci__runtime_from_name(rt);
	if (k < 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "oci: runtime `%s`: expected `runsc`, `crun` or `runc`", rt);
	b->runtime = (oci_runtime)k;
	if (b->runtime == OCI_RUNC)
		/* runc proxies a foreground container's stdio through pipes of its
		 * own (the agent needs the socket itself), and moves the container
		 * into cgroups of its own, out of the sandbox's limits. */
		return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
				     "oci: runtime `runc` is not served yet: it relays stdio "
				     "through pipes and moves the container out of the sandbox's "
				     "cgroup; use `crun` for the container rung");
	if (opts->platform && b->runtime != OCI_RUNSC)
		return msb_error_set(err, MSB_E_VALUE,
				     "oci: `platform` is gVisor's: it applies to runsc, not `%s`",
				     rt);
	if (geteuid() != 0)
		return msb_error_set(err, MSB_E_PERMISSION,
				     "oci: the runtimes run as root: %s needs euid 0", rt);
	if (opts->runtime_path) {
		if (opts->runtime_path[0] != '/')
			return msb_error_set(err, MSB_E_VALUE,
					     "oci: runtime_path `%s` must be absolute",
					     opts->runtime_path);
		b->runtime_path = strdup(opts->runtime_path);
	} else if (!(b->runtime_path = msb_oci__find_in_path(rt))) {
		return msb_error_set(err, MSB_E_NOT_FOUND,
				     "oci: the runtime `%s` is not in PATH (scripts/install-deps "
				     "installs runsc and crun)",
				     rt);
	}
	b->platform = b->runtime == OCI_RUNSC
			      ? strdup(opts->platform ? opts->platform : OCI_DEFAULT_PLATFORM)
			      : NULL;
	const char *shim =
		opts->shim_path && *opts->shim_path ? opts->shim_path : getenv("MSB_OCI_SHIM");
	_cleanup_free_ char *shim_path =
		shim && *shim ? strdup(shim) : msb__asprintf("%s/msb-oci-shim", MSB_LIBEXECDIR);
	if (!b->runtime_path || (b->runtime == OCI_RUNSC && !b->platform) || !shim_path) {
		backend_clear(b);
		return msb__error_nomem(err);
	}
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.name = opts->name ? opts->name : "oci";
	o.state_root = opts->state_root;
	o.shim_path = shim_path;
	o.agent_path = opts->agent_path;
	o.image = opts->image;
	o.memory_bytes = opts->memory_bytes;
	o.pids_max = opts->pids_max;
	o.cpu_millis = opts->cpu_millis;
	o.writable_bytes = opts->writable_bytes;
	o.start_timeout = opts->start_timeout > 0 ? opts->start_timeout : 60.0;
	o.pool_size = opts->version >= 2 ? opts->pool_size : 0;
	o.egress_config = opts->version >= 2 ? opts->egress_config : NULL;
	int r = msb_ns__backend_init(&b->ns, &o, err);
	if (r < 0) {
		free(b->runtime_path);
		free(b->platform);
		memset(b, 0, sizeof(*b));
		return msb_error_wrap(err, "oci");
	}
	b->ns.pool_ops = &msb_oci__pool_ops;
	/* <root>/oci beside <root>/ns; <dir>/<name>/agent.sock fits sun_path. */
	char *dir = msb__asprintf("%s/oci", b->ns.state_root);
	if (!dir) {
		backend_clear(b);
		return msb__error_nomem(err);
	}
	free(b->ns.state_dir);
	b->ns.state_dir = dir;
	if (strlen(dir) + 1 + 36 + 1 + strlen(MSB_NS_STATE_SOCKET) >= 108) {
		backend_clear(b);
		return msb_error_set(err, MSB_E_VALUE,
				     "oci: state directory `%s` is too long for a unix socket path",
				     dir);
	}
	return 0;
}

static int purge_sandbox(const oci_backend *b, const char *name, msb_error **err)
{
	_cleanup_free_ char *dir = msb__asprintf("%s/%s", b->ns.state_dir, name);
	if (!dir)
		return msb__error_nomem(err);
	return msb_oci__state_purge(dir, false, PURGE_TIMEOUT_MS, err);
}

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

/* <root> and <root>/oci exist, others may traverse them (0711 when made
 * here), and so may every directory above. (The shim makes the sandbox's own
 * directory 0711 whatever the umask made it.) */
static int prepare_root(const oci_backend *b, msb_error **err)
{
	/* guest-names: ok - the state root is the host's (its owner picks it) */
	int r = msb__mkdir_p(b->ns.state_dir, 0711);
	if (r < 0)
		return msb__error_errno(err, r, "oci: cannot create the state directory `%s`",
					b->ns.state_dir);
	return msb_oci__check_traversable(b->ns.state_dir, err);
}

/* A sandbox made here for the key, in its empty, locked directory dfd. */
static int create_sandbox(oci_backend *b, const msb_key *key, const char *kind,
			  const char *work_dir, const char *egress, const char *cfg,
			  const char *name, int statefd, int dfd, msb_sandbox **out,
			  msb_error **err)
{
	char instance[33];
	msb_ns_labels nl;
	int r = msb_ns__key_labels(&nl, instance, key, kind, work_dir, b->ns.image, "oci", err);
	/* Labels first, so a purge finds the sandbox even if setup fails (4.20). */
	if (r == 0)
		r = msb_ns__labels_write(dfd, &nl, err);
	if (r < 0)
		return r;
	r = msb__write_file_atomic_at(dfd, "shim.json", cfg, strlen(cfg), 0600);
	if (r < 0)
		return msb__error_errno(err, r, "oci: cannot write the shim configuration");
	if (egress && (r = msb__write_file_atomic_at(dfd, MSB_NS_EGRESS_CONFIG, egress,
						     strlen(egress), 0600)) < 0)
		return msb__error_errno(err, r, "oci: cannot write the egress configuration");
	_cleanup_free_ char *dir = msb__asprintf("%s/%s", b->ns.state_dir, name);
	if (!dir)
		return msb__error_nomem(err);
	int ready = -1;
	r = msb_ns__shim_spawn(&b->ns, dir, false, false, &ready, err);
	if (r == 0)
		r = msb_ns__shim_await(&b->ns, ready, b->ns.start_timeout, err);
	if (r < 0) {
		purge_sandbox(b, name, NULL);
		clear_dir(dfd);
		unlinkat(statefd, name, AT_REMOVEDIR);
		return r;
	}
	return msb_oci__sandbox_new(b, name, &nl, out, err);
}

/* new_sandbox: a pooled sandbox took the key's name and then failed. */
#define OCI_START_OVER 1

/* A sandbox for the key in its empty, locked directory dfd: from the warm
 * pool when it has one of this template ready (ns_pool.c, docs/pool.md),
 * else made here; either way the pool is topped up after. An allowlist
 * sandbox is always made here: its proxy's rules are the spec's from the
 * start (the oci shim has no request to put new rules in force). */
static int new_sandbox(oci_backend *b, const msb_key *key, const msb_spec *spec, const char *kind,
		       const char *work_dir, const char *egress, const char *name, int statefd,
		       int dfd, msb_sandbox **out, msb_error **err)
{
	ns_template t;
	int r = msb_ns__template_init(&b->ns, spec, work_dir, &t, err);
	if (r < 0)
		return r;
	bool pooled = !egress && (b->ns.pool_size > 0 || msb_ns__pool_exists(&b->ns, statefd));
	if (pooled && (r = msb_ns__template_digest(&b->ns, &t, err)) == 0) {
		r = msb_ns__pool_claim(&b->ns, &t, key, kind, work_dir, NULL, name, statefd, out,
				       err);
		if (r > 0) {
			msb_ns__pool_refill(&b->ns, &t);
			msb_ns__template_clear(&t);
			return r == 1 ? 0 : OCI_START_OVER;
		}
	}
	_cleanup_free_ char *cfg = NULL;
	if (r == 0)
		r = msb_ns__shim_config_text(t.cfg, name, &cfg, err);
	if (r == 0)
		r = create_sandbox(b, key, kind, work_dir, egress, cfg, name, statefd, dfd, out,
				   err);
	if (r == 0 && pooled)
		msb_ns__pool_refill(&b->ns, &t);
	msb_ns__template_clear(&t);
	return r;
}

static int oci_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		       msb_error **err)
{
	oci_backend *b = impl;
	const char *kind = msb_spec_kind(spec);
	const char *work_dir = msb_spec_work_dir(spec);
	if (!work_dir)
		work_dir = MSB_DEFAULT_WORK_DIR;
	if (work_dir[0] != '/')
		return msb_error_set(err, MSB_E_VALUE,
				     "oci: work_dir `%s` must be an absolute guest path", work_dir);
	int r = msb_ns__limits_check(&b->ns, spec, err);
	if (r < 0)
		return r;
	/* allowlist: the proxy's configuration, egress.json (else NULL) */
	_cleanup_free_ char *egress = NULL;
	r = msb_ns__egress_config(&b->ns, spec, &egress, err);
	if (r < 0)
		return r;
	char name[37];
	msb_ns__name(key, kind, name);
	if ((r = prepare_root(b, err)) < 0)
		return r;
	/* guest-names: ok - the state root is the host's */
	_cleanup_close_ int statefd = open(b->ns.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (statefd < 0)
		return msb__error_errno(err, errno, "oci: cannot open `%s`", b->ns.state_dir);

	for (int attempt = 0; attempt < 8; attempt++) {
		if (mkdirat(statefd, name, 0711) < 0 && errno != EEXIST)
			return msb__error_errno(err, errno, "oci: cannot create `%s`", name);
		_cleanup_close_ int dfd =
			openat(statefd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0) {
			if (errno == ENOENT)
				continue;
			return msb__error_errno(err, errno, "oci: cannot open `%s`", name);
		}
		while (flock(dfd, LOCK_EX) < 0)
			if (errno != EINTR)
				return msb__error_errno(err, errno, "oci: cannot lock `%s`", name);
		struct stat st;
		if (fstat(dfd, &st) < 0)
			return msb__error_errno(err, errno, "oci: cannot stat `%s`", name);
		if (st.st_nlink == 0)
			continue;

		int64_t pid = 0;
		msb_ns__shim_alive(dfd, &pid, NULL);
		msb_ns_labels labels = {0};
		/* A claim from the pool that died before the sandbox had its
		 * identity (ns_pool.c): never handed out, replaced below. */
		bool half_claimed =
			faccessat(dfd, MSB_NS_POOL_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
		if (pid > 0 && !half_claimed && msb_ns__labels_read(dfd, &labels, NULL) == 0 &&
		    msb__streq_null(labels.kind, kind)) {
			r = msb_ns__limits_match(dfd, name, &b->ns, spec, err);
			if (r == 0)
				r = msb_ns__egress_match(dfd, name, egress, err);
			if (r == 0)
				r = msb_oci__sandbox_new(b, name, &labels, out, err);
			msb_ns__labels_clear(&labels);
			return r;
		}
		msb_ns__labels_clear(&labels);
		r = purge_sandbox(b, name, err);
		if (r < 0)
			return msb_error_wrap(err, "oci: cannot clear the stale sandbox `%s`",
					      name);
		if ((r = clear_dir(dfd)) < 0)
			return msb__error_errno(err, r, "oci: cannot clear stale state in `%s`",
						name);
		r = new_sandbox(b, key, spec, kind, work_dir, egress, name, statefd, dfd, out, err);
		if (r == OCI_START_OVER)
			continue;
		return r;
	}
	return msb_error_set(err, MSB_E_RUNTIME, "oci: `%s` kept disappearing during acquire",
			     name);
}

/* The sweep's teardown of one sandbox (backends/ns/ns_sweep.c). */
static int sweep_purge(void *ctx, const char *name, int dfd, const msb_ns_labels *l,
		       msb_error **err)
{
	oci_backend *b = ctx;
	int r = purge_sandbox(b, name, err);
	/* The shim and its proxy are down: the records of the tunnels it
	 * closed are in; report them before the directory goes. */
	if (b->ns.reporter.report) {
		msb_key key = {l->scope, l->thread_id, l->agent_dir, l->call_id};
		msb_ns__egress_drain(dfd, &key, &b->ns.reporter);
	}
	return r;
}

static int oci_dispose(void *impl, const msb_key *key, const char *kind, const char *instance_id,
		       msb_disposal_failure **failure, msb_error **err)
{
	oci_backend *b = impl;
	return msb_ns__dispose(b->ns.state_dir, sweep_purge, b, key, kind, instance_id, failure,
			       err);
}

static int oci_dispose_scope(void *impl, const char *scope, const char *thread_id,
			     msb_scope_purge *out, msb_error **err)
{
	oci_backend *b = impl;
	return msb_ns__dispose_scope(b->ns.state_dir, "oci", sweep_purge, b, scope, thread_id, out,
				     err);
}

static void oci_set_egress_reporter(void *impl, const msb_egress_reporter *reporter)
{
	oci_backend *b = impl;
	if (reporter)
		b->ns.reporter = *reporter;
	else
		memset(&b->ns.reporter, 0, sizeof(b->ns.reporter));
}

static void oci_free(void *impl)
{
	oci_backend *b = impl;
	if (!b)
		return;
	msb_ns__pool_wait(&b->ns);
	backend_clear(b);
	free(b);
}

static const msb_backend_ops oci_ops = {
	.version = MSB_BACKEND_OPS_VERSION,
	.acquire = oci_acquire,
	.dispose = oci_dispose,
	.dispose_scope = oci_dispose_scope,
	.set_egress_reporter = oci_set_egress_reporter,
	.free = oci_free,
};

int msb_oci_backend_new(const msb_oci_options *opts, msb_backend **out, msb_error **err)
{
	oci_backend *b = calloc(1, sizeof(*b));
	if (!b)
		return msb__error_nomem(err);
	int r = backend_init(b, opts, err);
	if (r < 0) {
		free(b);
		return r;
	}
	msb_backend_info info = {
		.version = MSB_BACKEND_INFO_VERSION,
		.name = b->ns.name,
		.isolation = msb_oci__rung(b->runtime),
		.declarations = &oci_declarations,
	};
	return msb_backend_new(&oci_ops, &info, b, out, err);
}

const char *msb_oci_backend_state_root(const msb_backend *b)
{
	const oci_backend *ob = msb_backend_impl(b, &oci_ops);
	return ob ? ob->ns.state_root : NULL;
}

const char *msb_oci_backend_runtime(const msb_backend *b)
{
	const oci_backend *ob = msb_backend_impl(b, &oci_ops);
	return ob ? msb_oci__runtime_name(ob->runtime) : NULL;
}

ns_backend *msb_oci__pool_backend_of(const msb_backend *b)
{
	oci_backend *ob = b ? msb_backend_impl(b, &oci_ops) : NULL;
	return ob ? &ob->ns : NULL;
}
