/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` warm pool (docs/pool.md): sandboxes made ahead of any acquire for
 * a template, never having run workload code, and handed out by acquire,
 * which gives one its identity when it claims it.
 *
 *   <state>/ns/pool/<16 hex>/              one template's pool; flock: fill, drain
 *   <state>/ns/pool/<16 hex>/msb-<32 hex>/ a pooled sandbox's state directory
 *       pool.json     {"template": <64 hex>, "created_ns": N}: written first,
 *                     removed once a claim is complete
 *       shim.json, egress.json (allowlist: no rules yet), what the shim makes
 *
 * The template (ns_template) is everything a sandbox is made from that does
 * not depend on its key: the shim's configuration but the host name (image,
 * layers, work_dir, limits), the egress mode with the backend's egress
 * settings, the shim and agent binaries and the caller's ids. Its SHA-256
 * names the pool; a sandbox is only ever handed to an acquire that computes
 * the same digest, so a changed template, image (an OCI tag that moved) or
 * binary is never served by a sandbox made from the old one.
 *
 * What a claim gives the sandbox, in this order, under the lock of the
 * pooled directory: the key's labels with a new instance id, shim.json with
 * the key's name as host name, the spec's egress rules; then the directory
 * is renamed onto the key's (an empty directory the acquire holds locked:
 * rename(2) replaces it, so every other process either waits on the old
 * one, finds it unlinked and starts over, or finds the new one locked);
 * then the agent sets the host name (IDENTITY) and the shim puts the rules
 * in force; last pool.json goes. A key directory that still holds pool.json
 * is a claim that died half-way: acquire replaces it (ns_backend.c).
 *
 * A pooled sandbox's shim (`--pool`) holds the directory's lock until the
 * sandbox is ready: a claim passes over what it cannot lock (LOCK_NB), so
 * two processes claiming at once take two different sandboxes, and never
 * one still starting. A claim discards a pooled sandbox whose shim or agent
 * died; fills discard those and the ones whose shim never started.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "backends/ns/boundary/boundary.h"
#include "ns_int.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/sha256.h"

#define POOL_DIR "pool"
#define TEMPLATE_VERSION 1
/* Seconds a claim gives the agent and the shim to take the identity. */
#define CLAIM_TIMEOUT 10.0
/* Most pooled sandboxes one pass looks at. */
#define POOL_SCAN_MAX 256

/* ---- the template ------------------------------------------------------------ */

void msb_ns__template_clear(ns_template *t)
{
	json_decref(t->cfg);
	free(t->egress_base);
	memset(t, 0, sizeof(*t));
}

int msb_ns__template_init(const ns_backend *b, const msb_spec *spec, const char *work_dir,
			  ns_template *t, msb_error **err)
{
	memset(t, 0, sizeof(*t));
	int r = msb_ns__shim_config_obj(b, spec, work_dir, &t->cfg, err);
	if (r == 0 && b->pool_ops->config_extra)
		r = b->pool_ops->config_extra(b, t->cfg, err);
	if (r < 0) {
		msb_ns__template_clear(t);
		return r;
	}
	if (msb_spec_egress(spec) != MSB_EGRESS_ALLOWLIST)
		return 0;
	/* The proxy's settings without the spec's rules, which the claim writes. */
	json_t *o = NULL;
	if (b->egress_config)
		r = msb__json_load_object(b->egress_config, strlen(b->egress_config),
					  "ns options.egress_config", &o, err);
	else if (!(o = json_object()))
		r = msb__error_nomem(err);
	if (r == 0 && json_object_set_new(o, "allow", json_array()) < 0)
		r = msb__error_nomem(err);
	if (r == 0 && !(t->egress_base = msb__json_dump(o)))
		r = msb__error_nomem(err);
	json_decref(o);
	if (r < 0)
		msb_ns__template_clear(t);
	return r;
}

/* "dev:ino:size:mtime" of a binary: a rebuilt or reinstalled one is
 * another template. */
static json_t *file_identity(const char *path)
{
	struct stat st;
	char buf[128];
	/* guest-names: ok - the host's shim and agent binaries */
	if (stat(path, &st) < 0)
		snprintf(buf, sizeof(buf), "missing");
	else
		snprintf(buf, sizeof(buf), "%llu:%llu:%lld:%lld.%09ld",
			 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
			 (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	return json_string(buf);
}

/* The identity of each unpacked OCI layer directory of the shim's
 * configuration: an image cache removed and unpacked again is another
 * template, since the pooled sandboxes of the old one have their layers
 * deleted under their mounts (the paths alone are the same). */
static json_t *layer_identities(const json_t *cfg)
{
	json_t *out = json_array();
	const json_t *layers = json_object_get(cfg, "layers");
	size_t i;
	json_t *l;
	json_array_foreach (layers, i, l) {
		struct stat st;
		char buf[64];
		/* guest-names: ok - the host's image cache; the layer's own
		 * directory is not followed */
		if (fstatat(AT_FDCWD, json_string_value(l), &st, AT_SYMLINK_NOFOLLOW) < 0)
			snprintf(buf, sizeof(buf), "missing");
		else
			snprintf(buf, sizeof(buf), "%llu:%llu", (unsigned long long)st.st_dev,
				 (unsigned long long)st.st_ino);
		if (!out || json_array_append_new(out, json_string(buf)) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

int msb_ns__template_digest(const ns_backend *b, ns_template *t, msb_error **err)
{
	if (t->digest[0])
		return 0;
	json_t *eg = NULL;
	if (t->egress_base && !(eg = json_loads(t->egress_base, 0, NULL)))
		return msb__error_nomem(err);
	json_t *lid = layer_identities(t->cfg);
	/* the oci backend's runtime: a reinstalled one is another template */
	const char *extra = b->pool_ops->extra_binary ? b->pool_ops->extra_binary(b) : NULL;
	json_t *o =
		lid ? json_pack("{s:i, s:O, s:o, s:o, s:o, s:o, s:o, s:I, s:I}", "v",
				TEMPLATE_VERSION, "config", t->cfg, "egress", eg ? eg : json_null(),
				"layers", lid, "shim", file_identity(b->shim_path), "agent",
				file_identity(b->agent_path), "runtime",
				extra ? file_identity(extra) : json_null(), "uid",
				(json_int_t)geteuid(), "gid", (json_int_t)getegid())
		    : NULL;
	if (!lid)
		json_decref(eg);
	_cleanup_free_ char *text = o ? msb__json_dump(o) : NULL;
	json_decref(o);
	if (!text)
		return msb__error_nomem(err);
	static const char hex[] = "0123456789abcdef";
	msb_sha256 h;
	uint8_t d[32];
	msb__sha256_init(&h);
	msb__sha256_update(&h, text, strlen(text));
	msb__sha256_final(&h, d);
	for (int i = 0; i < 32; i++) {
		t->digest[2 * i] = hex[d[i] >> 4];
		t->digest[2 * i + 1] = hex[d[i] & 15];
	}
	t->digest[64] = '\0';
	memcpy(t->dir, t->digest, 16);
	t->dir[16] = '\0';
	return 0;
}

/* ---- the ns backend's own ----------------------------------------------------- */

static int ns_purge(const char *dir, int timeout_ms, msb_error **err)
{
	return msb_ns__state_purge(dir, false, timeout_ms, err);
}

static int ns_claimed(ns_backend *b, const char *name, int sfd, const msb_ns_labels *labels,
		      int shim_pidfd, const char *hostname, bool egress, double timeout,
		      msb_sandbox **out, msb_error **err)
{
	msb_sandbox *sb = NULL;
	int r = msb_ns__sandbox_new(b, name, sfd, labels, shim_pidfd, &sb, err);
	if (r == 0 && (r = msb_ns__sandbox_identity(sb, hostname, egress, timeout, err)) < 0) {
		msb_sandbox_free(sb);
		sb = NULL;
	}
	*out = sb;
	return r;
}

const ns_pool_ops msb_ns__pool_ns_ops = {
	.what = "ns",
	.dir_mode = 0700,
	.allowlist = true,
	.spawn = msb_ns__shim_spawn,
	.await = msb_ns__shim_await,
	.purge = ns_purge,
	.claimed = ns_claimed,
};

/* ---- pooled directories ------------------------------------------------------ */

bool msb_ns__pool_exists(const ns_backend *b, int statefd)
{
	(void)b;
	return faccessat(statefd, POOL_DIR, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool slot_name(const char *n)
{
	if (strncmp(n, "msb-", 4) != 0 || strlen(n) != 36)
		return false;
	for (const char *p = n + 4; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* The names in directory fd that pass `keep`, at most POOL_SCAN_MAX. */
static int list_names(int fd, bool (*keep)(const char *), char ***out, size_t *n)
{
	*out = NULL;
	*n = 0;
	int dup = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dup < 0)
		return -errno;
	DIR *d = fdopendir(dup);
	if (!d) {
		int e = -errno;
		close(dup);
		return e;
	}
	char **v = calloc(POOL_SCAN_MAX + 1, sizeof(*v));
	if (!v) {
		closedir(d);
		return -ENOMEM;
	}
	size_t k = 0;
	struct dirent *de;
	while (k < POOL_SCAN_MAX && (de = readdir(d)))
		if (keep(de->d_name) && !(v[k++] = strdup(de->d_name))) {
			closedir(d);
			msb__strv_freep(&v);
			return -ENOMEM;
		}
	closedir(d);
	*out = v;
	*n = k;
	return 0;
}

static bool template_name(const char *n)
{
	if (strlen(n) != 16)
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* pool.json's template digest and creation time. */
static int read_pool_file(int sfd, char digest[65], int64_t *created)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = msb__read_file_at(sfd, MSB_NS_POOL_FILE, 4096, &text, &len);
	if (r < 0)
		return r;
	json_auto_t *o = json_loadb(text, len, 0, NULL);
	const char *t = json_string_value(json_object_get(o, "template"));
	json_t *c = json_object_get(o, "created_ns");
	if (!t || strlen(t) != 64 || !json_is_integer(c))
		return -EINVAL;
	memcpy(digest, t, 65);
	*created = json_integer_value(c);
	return 0;
}

/* Remove everything inside dfd. */
static int clear_dir(int dfd)
{
	int dup = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dup < 0)
		return -errno;
	DIR *d = fdopendir(dup);
	if (!d) {
		close(dup);
		return -errno;
	}
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

/* Take down the pooled sandbox `name` of template directory tdir (its
 * directory sfd, locked by the caller) and remove it. */
static int discard(const ns_backend *b, const char *tdir, int tfd, const char *name, int sfd,
		   msb_error **err)
{
	_cleanup_free_ char *path =
		msb__asprintf("%s/%s/%s/%s", b->state_dir, POOL_DIR, tdir, name);
	if (!path)
		return msb__error_nomem(err);
	int r = b->pool_ops->purge(path, 5000, err);
	if (r < 0)
		return r;
	if ((r = clear_dir(sfd)) == 0 && unlinkat(tfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	return r < 0 ? msb__error_errno(err, r, "warm pool: remove `%s`", path) : 0;
}

/* Open name in tfd and lock it, waiting up to wait_ms for another holder
 * (a shim still starting, a claim); -EWOULDBLOCK when it is still held then,
 * -ESTALE when it is no longer there under that name (a claim took it, a
 * drain removed it). */
static int lock_slot(int tfd, const char *name, int64_t wait_ms, int *out)
{
	_cleanup_close_ int sfd =
		openat(tfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return -errno;
	int64_t until = msb__now_ns() + wait_ms * 1000000;
	while (flock(sfd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (msb__now_ns() >= until)
			return -EWOULDBLOCK;
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	struct stat a, c;
	if (fstat(sfd, &a) < 0 || a.st_nlink == 0 ||
	    fstatat(tfd, name, &c, AT_SYMLINK_NOFOLLOW) < 0 || a.st_ino != c.st_ino ||
	    a.st_dev != c.st_dev)
		return -ESTALE;
	*out = TAKE_FD(sfd);
	return 0;
}

/* ---- claim ------------------------------------------------------------------- */

/* Give the locked pooled sandbox sfd (`slot` in tfd) the key's identity and
 * name. 1, or 2 when it failed after the rename (start over), or < 0 before
 * it (the caller discards the pooled sandbox). shim_pidfd (taken): a pidfd
 * on its shim, found alive under the lock (-1: not known). */
static int take(ns_backend *b, const ns_template *t, const msb_key *key, const char *kind,
		const char *work_dir, const char *egress, const char *name, int statefd, int tfd,
		const char *slot, int sfd, int shim_pidfd, msb_sandbox **out, msb_error **err)
{
	_cleanup_close_ int shim_fd = shim_pidfd;
	char instance[33];
	msb_ns_labels nl;
	int r = msb_ns__key_labels(&nl, instance, key, kind, work_dir, b->image, b->pool_ops->what,
				   err);
	if (r == 0)
		r = msb_ns__labels_write(sfd, &nl, err);
	if (r < 0)
		return r;
	/* What the sandbox is made of, under its name: what it would have been
	 * made with for this key (a reset makes it again from this). */
	_cleanup_free_ char *cfg = NULL;
	if ((r = msb_ns__shim_config_text(t->cfg, name, &cfg, err)) < 0)
		return r;
	if ((r = msb__write_file_atomic_at(sfd, "shim.json", cfg, strlen(cfg), 0600)) < 0)
		return msb__error_errno(err, r, "warm pool: write the shim configuration");
	if (egress && (r = msb__write_file_atomic_at(sfd, MSB_NS_EGRESS_CONFIG, egress,
						     strlen(egress), 0600)) < 0)
		return msb__error_errno(err, r, "warm pool: write the egress configuration");
	/* Onto the key's empty, locked directory. */
	if (renameat(tfd, slot, statefd, name) < 0)
		return msb__error_errno(err, errno, "warm pool: rename `%s` to `%s`", slot, name);

	msb_sandbox *sb = NULL;
	r = b->pool_ops->claimed(b, name, sfd, &nl, TAKE_FD(shim_fd), name, egress != NULL,
				 CLAIM_TIMEOUT, &sb, err);
	if (r == 0 && unlinkat(sfd, MSB_NS_POOL_FILE, 0) < 0)
		r = msb__error_errno(err, errno, "warm pool: remove `%s/%s`", name,
				     MSB_NS_POOL_FILE);
	if (r == 0) {
		*out = sb;
		return 1;
	}
	/* It has the key's name and is ours (locked): take it down and let the
	 * acquire start over. */
	msb_sandbox_free(sb);
	_cleanup_free_ char *path = msb__asprintf("%s/%s", b->state_dir, name);
	if (path)
		b->pool_ops->purge(path, 5000, NULL);
	clear_dir(sfd);
	unlinkat(statefd, name, AT_REMOVEDIR);
	msb_error_free(err ? *err : NULL);
	if (err)
		*err = NULL;
	return 2;
}

/* Remove the template directory tdir (tfd) and the pool's when they are
 * empty and no fill holds them. */
static void tidy(int statefd, const char *tdir, int tfd)
{
	if (flock(tfd, LOCK_EX | LOCK_NB) < 0)
		return; /* a fill is at work */
	char rel[sizeof(POOL_DIR) + 17];
	snprintf(rel, sizeof(rel), "%s/%s", POOL_DIR, tdir);
	if (unlinkat(statefd, rel, AT_REMOVEDIR) == 0)
		unlinkat(statefd, POOL_DIR, AT_REMOVEDIR);
	flock(tfd, LOCK_UN);
}

int msb_ns__pool_claim(ns_backend *b, const ns_template *t, const msb_key *key, const char *kind,
		       const char *work_dir, const char *egress, const char *name, int statefd,
		       msb_sandbox **out, msb_error **err)
{
	char rel[sizeof(POOL_DIR) + 17];
	snprintf(rel, sizeof(rel), "%s/%s", POOL_DIR, t->dir);
	_cleanup_close_ int tfd =
		openat(statefd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tfd < 0)
		return errno == ENOENT ? 0
				       : msb__error_errno(err, errno, "warm pool: open `%s`", rel);
	_cleanup_strv_ char **names = NULL;
	size_t n = 0;
	int r = list_names(tfd, slot_name, &names, &n);
	if (r < 0)
		return msb__error_errno(err, r, "warm pool: list `%s`", rel);
	for (size_t i = 0; i < n; i++) {
		_cleanup_close_ int sfd = -1;
		if (lock_slot(tfd, names[i], 0, &sfd) < 0)
			continue; /* starting, being claimed or drained, or gone */
		char digest[65];
		int64_t created;
		if (read_pool_file(sfd, digest, &created) < 0 || strcmp(digest, t->digest) != 0)
			continue; /* not (or no longer) a pooled sandbox of t */
		int64_t shim = 0;
		bool init = false;
		_cleanup_close_ int shim_fd = -1;
		msb_ns_liveness live = msb_ns__liveness_init(sfd, &shim, NULL, &init, &shim_fd);
		if (live == MSB_NS_STALE)
			continue; /* its shim has not started yet: a fill's business */
		if (live != MSB_NS_RUNNING || !init) {
			/* Gone stale (its shim or agent died): never handed out. */
			discard(b, t->dir, tfd, names[i], sfd, NULL);
			continue;
		}
		r = take(b, t, key, kind, work_dir, egress, name, statefd, tfd, names[i], sfd,
			 TAKE_FD(shim_fd), out, err);
		if (r == 1 && !b->pool_size)
			tidy(statefd, t->dir, tfd); /* no refill comes: leave no empty pool */
		if (r == 1 || r == 2)
			return r;
		/* Failed before it took the key's name: never handed out. */
		msb_error_free(err ? *err : NULL);
		if (err)
			*err = NULL;
		discard(b, t->dir, tfd, names[i], sfd, NULL);
	}
	return 0;
}

/* ---- fill -------------------------------------------------------------------- */

/* Open <state>/ns/pool/<dir>, made when missing. */
static int open_template_dir(const ns_backend *b, const char *dir, int *out, msb_error **err)
{
	_cleanup_free_ char *path = msb__asprintf("%s/%s/%s", b->state_dir, POOL_DIR, dir);
	if (!path)
		return msb__error_nomem(err);
	/* guest-names: ok - the state root is the host's */
	int r = msb__mkdir_p(path, b->pool_ops->dir_mode);
	if (r < 0)
		return msb__error_errno(err, r, "warm pool: create `%s`", path);
	/* guest-names: ok - the state root is the host's */
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return msb__error_errno(err, errno, "warm pool: open `%s`", path);
	/* Whatever the umask made them: an oci runtime traverses the pool's
	 * directories as the sandbox's mapped root. */
	if (fchmod(fd, b->pool_ops->dir_mode) < 0 ||
	    fchmodat(fd, "..", b->pool_ops->dir_mode, 0) < 0) {
		int e = errno;
		close(fd);
		return msb__error_errno(err, e, "warm pool: chmod `%s`", path);
	}
	*out = fd;
	return 0;
}

/* Under the template directory's lock: discard the pooled sandboxes that
 * went stale and count the others (ready, starting, being claimed). */
static size_t sweep_and_count(const ns_backend *b, const char *tdir, int tfd)
{
	_cleanup_strv_ char **names = NULL;
	size_t n = 0, count = 0;
	if (list_names(tfd, slot_name, &names, &n) < 0)
		return 0;
	int64_t now = msb__realtime_ns();
	int64_t grace = (int64_t)(2 * b->start_timeout * 1e9);
	for (size_t i = 0; i < n; i++) {
		_cleanup_close_ int sfd = -1;
		int r = lock_slot(tfd, names[i], 0, &sfd);
		if (r == -EWOULDBLOCK) {
			count++; /* starting, or a claim has it */
			continue;
		}
		if (r < 0)
			continue;
		char digest[65];
		int64_t created = 0;
		bool ours = read_pool_file(sfd, digest, &created) == 0;
		if (!ours) {
			struct stat st;
			created =
				fstat(sfd, &st) == 0 ? (int64_t)st.st_ctim.tv_sec * 1000000000 : 0;
		}
		msb_ns_liveness live = msb_ns__liveness(sfd, NULL, NULL);
		bool young = now - created < grace;
		if (ours && live == MSB_NS_RUNNING && msb_ns__init_alive(sfd))
			count++;
		else if (live == MSB_NS_STALE && young)
			count++; /* made, its shim about to start */
		else
			discard(b, tdir, tfd, names[i], sfd, NULL);
	}
	return count;
}

/* Make one pooled sandbox's directory and files (its shim not started). */
static int make_slot(const ns_backend *b, const ns_template *t, int tfd, char name[37],
		     msb_error **err)
{
	memcpy(name, "msb-", 4);
	if (msb_ns__random_hex(name + 4, 16) < 0)
		return msb__error_errno(err, errno, "warm pool: no randomness for a name");
	if (mkdirat(tfd, name, b->pool_ops->dir_mode) < 0)
		return msb__error_errno(err, errno, "warm pool: create `%s`", name);
	_cleanup_close_ int sfd =
		openat(tfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return msb__error_errno(err, errno, "warm pool: open `%s`", name);
	/* Locked while its files are written: a claim passes over it. */
	while (flock(sfd, LOCK_EX) < 0)
		if (errno != EINTR)
			return msb__error_errno(err, errno, "warm pool: lock `%s`", name);
	_cleanup_free_ char *cfg = NULL;
	json_t *pf = json_pack("{s:s, s:I}", "template", t->digest, "created_ns",
			       (json_int_t)msb__realtime_ns());
	_cleanup_free_ char *pool = pf ? msb__json_dump(pf) : NULL;
	json_decref(pf);
	if (!pool)
		return msb__error_nomem(err);
	int r = msb_ns__shim_config_text(t->cfg, name, &cfg, err);
	if (r < 0)
		return r;
	if ((r = msb__write_file_atomic_at(sfd, "shim.json", cfg, strlen(cfg), 0600)) < 0 ||
	    (t->egress_base &&
	     (r = msb__write_file_atomic_at(sfd, MSB_NS_EGRESS_CONFIG, t->egress_base,
					    strlen(t->egress_base), 0600)) < 0) ||
	    (r = msb__write_file_atomic_at(sfd, MSB_NS_POOL_FILE, pool, strlen(pool), 0600)) < 0)
		return msb__error_errno(err, r, "warm pool: write `%s`", name);
	return 0;
}

/*
 * Bring the pool of t up to `target` pooled sandboxes: count under the
 * template directory's lock, make the missing ones' directories, then start
 * their shims; with `wait`, wait for each to be ready. *made: how many were
 * started (ready, with `wait`).
 */
static int fill(const ns_backend *b, const ns_template *t, unsigned target, bool wait,
		unsigned *made, msb_error **err)
{
	*made = 0;
	_cleanup_close_ int tfd = -1;
	int r;
	for (int attempt = 0;; attempt++) {
		if ((r = open_template_dir(b, t->dir, &tfd, err)) < 0)
			return r;
		while (flock(tfd, LOCK_EX) < 0)
			if (errno != EINTR)
				return msb__error_errno(err, errno, "warm pool: lock `%s`", t->dir);
		struct stat st;
		if (fstat(tfd, &st) == 0 && st.st_nlink > 0)
			break;
		/* A drain, or the claim that emptied it, removed it meanwhile. */
		close(TAKE_FD(tfd));
		if (attempt == 3)
			return msb_error_set(err, MSB_E_RUNTIME,
					     "warm pool: `%s` keeps disappearing", t->dir);
	}
	size_t have = sweep_and_count(b, t->dir, tfd);
	unsigned need = have >= target ? 0 : target - (unsigned)have;
	char names[MSB_NS_POOL_MAX][37];
	unsigned k = 0;
	for (; k < need && k < MSB_NS_POOL_MAX; k++)
		if ((r = make_slot(b, t, tfd, names[k], err)) < 0)
			break;
	flock(tfd, LOCK_UN);
	int ready[MSB_NS_POOL_MAX];
	unsigned started = 0;
	for (unsigned i = 0; i < k; i++) {
		_cleanup_free_ char *dir =
			msb__asprintf("%s/%s/%s/%s", b->state_dir, POOL_DIR, t->dir, names[i]);
		ready[i] = -1;
		if (!dir) {
			r = msb__error_nomem(err);
			break;
		}
		msb_error *e = NULL;
		if (b->pool_ops->spawn(b, dir, t->egress_base != NULL, true,
				       wait ? &ready[i] : NULL, &e) < 0) {
			if (r == 0)
				r = msb__error_propagate(err, e);
			else
				msb_error_free(e);
			continue;
		}
		started++;
	}
	if (!wait) {
		*made = started;
		return r;
	}
	for (unsigned i = 0; i < k; i++) {
		if (ready[i] < 0)
			continue;
		msb_error *e = NULL;
		if (b->pool_ops->await(b, ready[i], b->start_timeout, &e) == 0) {
			(*made)++;
			continue;
		}
		if (r == 0)
			r = msb__error_propagate(err, e);
		else
			msb_error_free(e);
	}
	return r;
}

struct refill {
	ns_backend *b;
	ns_template t;
};

static void *refill_main(void *arg)
{
	struct refill *rf = arg;
	ns_backend *b = rf->b;
	unsigned made = 0;
	fill(b, &rf->t, b->pool_size, false, &made, NULL);
	msb_ns__template_clear(&rf->t);
	free(rf);
	pthread_mutex_lock(&b->refill_lock);
	b->refills--;
	pthread_cond_broadcast(&b->refill_done);
	pthread_mutex_unlock(&b->refill_lock);
	return NULL;
}

void msb_ns__pool_refill(ns_backend *b, const ns_template *t)
{
	if (!b->pool_size || !t->digest[0])
		return;
	struct refill *rf = calloc(1, sizeof(*rf));
	if (!rf)
		return;
	rf->b = b;
	rf->t = *t;
	rf->t.cfg = json_deep_copy(t->cfg);
	rf->t.egress_base = msb__strdup(t->egress_base);
	if (!rf->t.cfg || (t->egress_base && !rf->t.egress_base)) {
		msb_ns__template_clear(&rf->t);
		free(rf);
		return;
	}
	pthread_mutex_lock(&b->refill_lock);
	b->refills++;
	pthread_mutex_unlock(&b->refill_lock);
	pthread_attr_t at;
	pthread_t th;
	int r = pthread_attr_init(&at);
	if (r == 0) {
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		r = pthread_create(&th, &at, refill_main, rf);
		pthread_attr_destroy(&at);
	}
	if (r != 0) {
		/* No thread: the next claim tries again. */
		msb_ns__template_clear(&rf->t);
		free(rf);
		pthread_mutex_lock(&b->refill_lock);
		b->refills--;
		pthread_mutex_unlock(&b->refill_lock);
	}
}

void msb_ns__pool_wait(ns_backend *b)
{
	pthread_mutex_lock(&b->refill_lock);
	while (b->refills > 0)
		pthread_cond_wait(&b->refill_done, &b->refill_lock);
	pthread_mutex_unlock(&b->refill_lock);
}

/* ---- the public verbs: fill, list, drain (msb/ns.h) ------------------------------ */

ns_backend *msb_ns__pool_backend_of(const msb_backend *b)
{
	ns_backend *nb = msb_ns__backend_of(b);
	return nb ? nb : msb_oci__pool_backend_of(b);
}

int msb_ns_pool_fill(msb_backend *backend, const msb_spec *spec, unsigned n, unsigned *made,
		     msb_error **err)
{
	ns_backend *b = msb_ns__pool_backend_of(backend);
	if (!b)
		return msb_error_set(err, MSB_E_VALUE,
				     "the warm pool is the `ns` and `oci` backends'; "
				     "backend `%s` is neither",
				     msb_backend_name(backend));
	if (!spec)
		return msb_error_set(err, MSB_E_VALUE, "warm pool: a spec is required");
	unsigned target = n ? n : b->pool_size;
	if (target == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "warm pool: how many? the backend's `pool_size` is 0");
	if (target > MSB_NS_POOL_MAX)
		return msb_error_set(err, MSB_E_VALUE, "warm pool: %u is over the most, %u", target,
				     MSB_NS_POOL_MAX);
	const char *work_dir = msb_spec_work_dir(spec);
	if (!work_dir)
		work_dir = MSB_DEFAULT_WORK_DIR;
	if (work_dir[0] != '/')
		return msb_error_set(err, MSB_E_VALUE,
				     "%s: work_dir `%s` must be an absolute guest path",
				     b->pool_ops->what, work_dir);
	ns_template t;
	int r = msb_ns__limits_check(b, spec, err);
	if (r < 0 || (r = msb_ns__template_init(b, spec, work_dir, &t, err)) < 0)
		return r;
	if (t.egress_base && !b->pool_ops->allowlist) {
		msb_ns__template_clear(&t);
		return msb_error_set(
			err, MSB_E_VALUE,
			"%s pool: an allowlist sandbox is never pooled here (its "
			"proxy's rules are the spec's from its start): fill with egress "
			"closed",
			b->pool_ops->what);
	}
	unsigned got = 0;
	if ((r = msb_ns__template_digest(b, &t, err)) == 0)
		r = fill(b, &t, target, true, &got, err);
	msb_ns__template_clear(&t);
	if (made)
		*made = got;
	return r;
}

/* What a pooled sandbox's directory says of it, without its lock. */
static const char *slot_state(int sfd, int64_t *shim)
{
	*shim = 0;
	if (flock(sfd, LOCK_SH | LOCK_NB) < 0)
		return "starting"; /* its shim holds it until ready (or a claim or drain) */
	msb_ns_liveness live = msb_ns__liveness(sfd, shim, NULL);
	bool init = msb_ns__init_alive(sfd);
	flock(sfd, LOCK_UN);
	if (live == MSB_NS_RUNNING && init)
		return "ready";
	if (live == MSB_NS_STALE && *shim == 0 &&
	    faccessat(sfd, MSB_NS_STATE_SHIM_PID, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return "starting"; /* its shim has not begun */
	return "stale";
}

int msb_ns_pool_list(const msb_backend *backend, msb_ns_pool_entry **entries, size_t *n,
		     msb_error **err)
{
	const ns_backend *b = msb_ns__pool_backend_of(backend);
	if (!b)
		return msb_error_set(err, MSB_E_VALUE,
				     "the warm pool is the `ns` and `oci` backends'; "
				     "backend `%s` is neither",
				     msb_backend_name(backend));
	*entries = NULL;
	*n = 0;
	_cleanup_free_ char *pool = msb__asprintf("%s/%s", b->state_dir, POOL_DIR);
	if (!pool)
		return msb__error_nomem(err);
	/* guest-names: ok - the state root is the host's */
	_cleanup_close_ int pfd = open(pool, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return errno == ENOENT ? 0
				       : msb__error_errno(err, errno, "warm pool: open `%s`", pool);
	_cleanup_strv_ char **tdirs = NULL;
	size_t nt = 0;
	int r = list_names(pfd, template_name, &tdirs, &nt);
	if (r < 0)
		return msb__error_errno(err, r, "warm pool: list `%s`", pool);
	msb_ns_pool_entry *v = NULL;
	size_t count = 0;
	for (size_t i = 0; i < nt && r == 0; i++) {
		_cleanup_close_ int tfd =
			openat(pfd, tdirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		_cleanup_strv_ char **names = NULL;
		size_t ns = 0;
		if (tfd < 0 || list_names(tfd, slot_name, &names, &ns) < 0)
			continue;
		for (size_t k = 0; k < ns; k++) {
			_cleanup_close_ int sfd = openat(
				tfd, names[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sfd < 0)
				continue;
			msb_ns_pool_entry *nv = msb__reallocarray(v, count + 1, sizeof(*v));
			if (!nv) {
				r = msb__error_nomem(err);
				break;
			}
			v = nv;
			msb_ns_pool_entry *e = &v[count++];
			memset(e, 0, sizeof(*e));
			char digest[65];
			if (read_pool_file(sfd, digest, &e->created_ns) < 0)
				e->created_ns = 0;
			e->state = slot_state(sfd, &e->shim_pid);
			e->name = strdup(names[k]);
			e->template_id = strdup(tdirs[i]);
			if (!e->name || !e->template_id) {
				r = msb__error_nomem(err);
				break;
			}
		}
	}
	if (r < 0) {
		msb_ns_pool_entries_free(v, count);
		return r;
	}
	*entries = v;
	*n = count;
	return 0;
}

void msb_ns_pool_entries_free(msb_ns_pool_entry *entries, size_t n)
{
	for (size_t i = 0; entries && i < n; i++) {
		free(entries[i].name);
		free(entries[i].template_id);
	}
	free(entries);
}

/* Every pooled sandbox of one template directory, under its lock. */
static int drain_template(const ns_backend *b, int pfd, const char *tdir, size_t *removed,
			  msb_error **err)
{
	_cleanup_close_ int tfd =
		openat(pfd, tdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tfd < 0)
		return errno == ENOENT ? 0
				       : msb__error_errno(err, errno, "warm pool: open `%s`", tdir);
	while (flock(tfd, LOCK_EX) < 0)
		if (errno != EINTR)
			return msb__error_errno(err, errno, "warm pool: lock `%s`", tdir);
	int ret = 0;
	for (;;) {
		_cleanup_strv_ char **names = NULL;
		size_t n = 0;
		int r = list_names(tfd, slot_name, &names, &n);
		if (r < 0)
			return msb__error_errno(err, r, "warm pool: list `%s`", tdir);
		size_t gone = 0;
		for (size_t i = 0; i < n; i++) {
			_cleanup_close_ int sfd = -1;
			/* Waits for a shim still starting, or a claim. */
			int64_t wait_ms = (int64_t)(b->start_timeout * 1000) + 5000;
			int q = lock_slot(tfd, names[i], wait_ms, &sfd);
			if (q == -EWOULDBLOCK && ret == 0)
				ret = msb_error_set(err, MSB_E_RUNTIME,
						    "warm pool: `%s/%s` stayed locked for %lld ms",
						    tdir, names[i], (long long)wait_ms);
			if (q < 0)
				continue;
			msb_error *e = NULL;
			if (discard(b, tdir, tfd, names[i], sfd, &e) < 0) {
				if (ret == 0)
					ret = msb__error_propagate(err, e);
				else
					msb_error_free(e);
				continue;
			}
			gone++;
			(*removed)++;
		}
		/* Only the ones that failed, or what a claim left (none). */
		if (gone == 0 || n < POOL_SCAN_MAX)
			break;
	}
	if (ret == 0 && unlinkat(pfd, tdir, AT_REMOVEDIR) < 0 && errno != ENOENT)
		ret = msb__error_errno(err, errno, "warm pool: remove `%s`", tdir);
	return ret;
}

int msb_ns_pool_drain(msb_backend *backend, const char *template_id, size_t *removed,
		      msb_error **err)
{
	const ns_backend *b = msb_ns__pool_backend_of(backend);
	size_t count = 0;
	if (removed)
		*removed = 0;
	if (!b)
		return msb_error_set(err, MSB_E_VALUE,
				     "the warm pool is the `ns` and `oci` backends'; "
				     "backend `%s` is neither",
				     msb_backend_name(backend));
	if (template_id && !template_name(template_id))
		return msb_error_set(
			err, MSB_E_VALUE,
			"warm pool: `%s` is not a template (16 hex digits, `msb pool ls`)",
			template_id);
	_cleanup_free_ char *pool = msb__asprintf("%s/%s", b->state_dir, POOL_DIR);
	if (!pool)
		return msb__error_nomem(err);
	/* guest-names: ok - the state root is the host's */
	_cleanup_close_ int pfd = open(pool, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return errno == ENOENT ? 0
				       : msb__error_errno(err, errno, "warm pool: open `%s`", pool);
	int r = 0;
	if (template_id) {
		r = drain_template(b, pfd, template_id, &count, err);
	} else {
		_cleanup_strv_ char **tdirs = NULL;
		size_t nt = 0;
		if ((r = list_names(pfd, template_name, &tdirs, &nt)) < 0)
			return msb__error_errno(err, r, "warm pool: list `%s`", pool);
		for (size_t i = 0; i < nt; i++) {
			msb_error *e = NULL;
			if (drain_template(b, pfd, tdirs[i], &count, &e) < 0) {
				if (r == 0)
					r = msb__error_propagate(err, e);
				else
					msb_error_free(e);
			}
		}
	}
	if (removed)
		*removed = count;
	/* guest-names: ok - the state root is the host's; rmdir never follows */
	if (r == 0 && rmdir(pool) < 0 && errno != ENOENT && errno != ENOTEMPTY)
		r = msb__error_errno(err, errno, "warm pool: remove `%s`", pool);
	return r;
}
