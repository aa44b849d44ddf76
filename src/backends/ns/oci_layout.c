/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OCI image layouts (image-spec "image-layout"): index.json, possibly an
 * image index in between, one image manifest, its config and its layers;
 * every blob is checked against the size and SHA-256 digest its descriptor
 * gives before anything is taken from it. Layers are unpacked once into
 *
 *   <cache root>/sha256/<hex>/   one layer, overlayfs-ready (oci_unpack.c)
 *   <cache root>/tmp/<hex>.<r>/  an unpack in progress, renamed into place
 *   <cache root>/locks/<hex>     flock: one unpack per layer at a time
 *
 * so that concurrent acquires never see half a layer and unpack it once.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <jansson.h>

#include "backends/ns/boundary/boundary.h"
#include "backends/ns/oci.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/sha256.h"
#include "util/syscalls.h"

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"
#define REF_NAME "org.opencontainers.image.ref.name"
#define MAX_MANIFESTS 1024
#define MAX_INDEX_DEPTH 2

static const struct {
	const char *media_type;
	msb_oci_compression comp;
} layer_types[] = {
	{"application/vnd.oci.image.layer.v1.tar", MSB_OCI_TAR},
	{"application/vnd.oci.image.layer.v1.tar+gzip", MSB_OCI_TAR_GZIP},
	{"application/vnd.oci.image.layer.v1.tar+zstd", MSB_OCI_TAR_ZSTD},
	{"application/vnd.oci.image.layer.nondistributable.v1.tar", MSB_OCI_TAR},
	{"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", MSB_OCI_TAR_GZIP},
	{"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", MSB_OCI_TAR_ZSTD},
	{"application/vnd.docker.image.rootfs.diff.tar", MSB_OCI_TAR},
	{"application/vnd.docker.image.rootfs.diff.tar.gzip", MSB_OCI_TAR_GZIP},
	{"application/vnd.docker.image.rootfs.diff.tar.zstd", MSB_OCI_TAR_ZSTD},
};

typedef struct desc {
	const char *media_type; /* borrowed from the JSON it came from */
	char hex[65];
	uint64_t size;
	const char *ref_name; /* NULL when not annotated */
	const char *os, *arch;
} desc;

struct layout {
	const char *image; /* as given, for messages */
	const char *path;
	int fd;
	msb_error **err;
};

static int bad(struct layout *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct layout *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!msg)
		return msb__error_nomem(l->err);
	return msb_error_set(l->err, MSB_E_VALUE, "ns image `%s`: %s", l->image, msg);
}

/* ---- the reference --------------------------------------------------------- */

static bool normalised_abs(const char *p)
{
	size_t n = strlen(p);
	if (n < 2 || n > 4000 || p[0] != '/' || p[n - 1] == '/')
		return false;
	for (const char *c = p; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return false;
	for (const char *c = p + 1; *c;) {
		const char *e = strchr(c, '/');
		size_t len = e ? (size_t)(e - c) : strlen(c);
		if (len == 0 || len > 255 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += len;
		if (*c == '/')
			c++;
	}
	return true;
}

int msb_ns__oci_parse_ref(const char *image, char **path, char **tag, msb_error **err)
{
	if (strncmp(image, "oci:", 4) != 0)
		return msb_error_set(err, MSB_E_VALUE, "ns image `%s`: not `oci:PATH[:TAG]`",
				     image);
	const char *p = image + 4;
	const char *colon = strchr(p, ':');
	_cleanup_free_ char *dir = colon ? msb__strndup(p, (size_t)(colon - p)) : strdup(p);
	if (!dir)
		return msb__error_nomem(err);
	if (!normalised_abs(dir))
		return msb_error_set(err, MSB_E_VALUE,
				     "ns image `%s`: PATH must be absolute and normalised, without "
				     "`:` (`oci:/PATH[:TAG]`)",
				     image);
	_cleanup_free_ char *t = NULL;
	if (colon) {
		const char *s = colon + 1;
		size_t n = strlen(s);
		if (n == 0 || n > MSB_OCI_MAX_TAG)
			return msb_error_set(err, MSB_E_VALUE,
					     "ns image `%s`: TAG must be 1 to %d characters", image,
					     MSB_OCI_MAX_TAG);
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
				return msb_error_set(err, MSB_E_VALUE,
						     "ns image `%s`: TAG must be printable ASCII "
						     "without spaces",
						     image);
		if (!(t = strdup(s)))
			return msb__error_nomem(err);
	}
	*path = TAKE_PTR(dir);
	*tag = TAKE_PTR(t);
	return 0;
}

/* ---- blobs ------------------------------------------------------------------ */

static int open_blob(struct layout *l, const char *hex, uint64_t size, uint64_t max)
{
	char rel[96];
	snprintf(rel, sizeof(rel), "blobs/sha256/%s", hex);
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd = msb__sys_openat2(l->fd, rel, &how);
	if (fd < 0)
		return fd == -ENOENT ? bad(l, "blob sha256:%s is missing from the layout", hex)
		       : fd == -ELOOP
			       ? bad(l, "blob sha256:%s is a link", hex)
			       : msb__error_errno(l->err, fd, "ns image `%s`: open blob sha256:%s",
						  l->image, hex);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return bad(l, "blob sha256:%s is not a regular file", hex);
	}
	if ((uint64_t)st.st_size != size) {
		close(fd);
		return bad(l,
			   "blob sha256:%s: size mismatch: the file has %llu bytes, its "
			   "descriptor says %llu",
			   hex, (unsigned long long)st.st_size, (unsigned long long)size);
	}
	if (size > max) {
		close(fd);
		return bad(l, "blob sha256:%s is oversized: %llu bytes (at most %llu)", hex,
			   (unsigned long long)size, (unsigned long long)max);
	}
	return fd;
}

/* A JSON blob, verified against its descriptor. */
static int read_json_blob(struct layout *l, const desc *d, json_t **out)
{
	_cleanup_close_ int fd = open_blob(l, d->hex, d->size, MSB_OCI_MAX_JSON);
	if (fd < 0)
		return fd;
	_cleanup_free_ char *buf = malloc(d->size + 1);
	if (!buf)
		return msb__error_nomem(l->err);
	size_t got = 0;
	while (got < d->size) {
		ssize_t n = read(fd, buf + got, d->size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return msb__error_errno(l->err, errno, "ns image `%s`: read blob sha256:%s",
						l->image, d->hex);
		if (n == 0)
			return bad(l, "blob sha256:%s is truncated", d->hex);
		got += (size_t)n;
	}
	char hex[65];
	msb__sha256_hex(buf, got, hex);
	if (strcmp(hex, d->hex) != 0)
		return bad(l, "blob sha256:%s: digest mismatch (the file is sha256:%s)", d->hex,
			   hex);
	json_error_t je;
	json_t *v = json_loadb(buf, got, JSON_REJECT_DUPLICATES, &je);
	if (!v || !json_is_object(v)) {
		json_decref(v);
		return bad(l, "blob sha256:%s is not a JSON object", d->hex);
	}
	*out = v;
	return 0;
}

/* A small file of the layout itself (oci-layout, index.json). */
static int read_json_file(struct layout *l, const char *name, json_t **out)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_close_ int fd = msb__sys_openat2(l->fd, name, &how);
	if (fd < 0)
		return fd == -ENOENT ? bad(l, "`%s/%s` is missing: not an OCI image layout",
					   l->path, name)
				     : msb__error_errno(l->err, fd, "ns image `%s`: open `%s`",
							l->image, name);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return bad(l, "`%s` is not a regular file", name);
	if ((uint64_t)st.st_size > MSB_OCI_MAX_JSON)
		return bad(l, "`%s` is oversized: %llu bytes (at most %u)", name,
			   (unsigned long long)st.st_size, MSB_OCI_MAX_JSON);
	_cleanup_free_ char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return msb__error_nomem(l->err);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return msb__error_errno(l->err, errno, "ns image `%s`: read `%s`", l->image,
						name);
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > (size_t)st.st_size)
			return bad(l, "`%s` grew while it was read", name);
	}
	json_error_t je;
	json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!v || !json_is_object(v)) {
		json_decref(v);
		return bad(l, "`%s` is not a JSON object", name);
	}
	*out = v;
	return 0;
}

/* ---- descriptors ------------------------------------------------------------- */

static int parse_desc(struct layout *l, json_t *o, const char *where, desc *d)
{
	memset(d, 0, sizeof(*d));
	if (!json_is_object(o))
		return bad(l, "%s: a descriptor must be an object", where);
	const char *digest = json_string_value(json_object_get(o, "digest"));
	const char *mt = json_string_value(json_object_get(o, "mediaType"));
	json_t *size = json_object_get(o, "size");
	if (!digest || !mt || !json_is_integer(size) || json_integer_value(size) < 0)
		return bad(l, "%s: a descriptor needs `mediaType`, `digest` and `size`", where);
	const char *colon = strchr(digest, ':');
	if (!colon)
		return bad(l, "%s: malformed digest `%.80s`", where, digest);
	if ((size_t)(colon - digest) != 6 || strncmp(digest, "sha256", 6) != 0)
		return bad(l, "%s: unsupported digest algorithm in `%.80s` (only sha256)", where,
			   digest);
	const char *hex = colon + 1;
	if (strlen(hex) != 64)
		return bad(l, "%s: malformed digest `%.80s`", where, digest);
	for (size_t i = 0; i < 64; i++)
		if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
			return bad(l, "%s: malformed digest `%.80s`", where, digest);
	memcpy(d->hex, hex, 65);
	d->size = (uint64_t)json_integer_value(size);
	d->media_type = mt;
	json_t *ann = json_object_get(o, "annotations");
	if (json_is_object(ann))
		d->ref_name = json_string_value(json_object_get(ann, REF_NAME));
	json_t *plat = json_object_get(o, "platform");
	if (json_is_object(plat)) {
		d->os = json_string_value(json_object_get(plat, "os"));
		d->arch = json_string_value(json_object_get(plat, "architecture"));
	}
	return 0;
}

static const char *host_arch(void)
{
	static const char *const map[][2] = {
		{"x86_64", "amd64"}, {"aarch64", "arm64"},   {"i686", "386"},
		{"i386", "386"},     {"armv7l", "arm"},	     {"ppc64le", "ppc64le"},
		{"s390x", "s390x"},  {"riscv64", "riscv64"},
	};
	static __thread char mach[65];
	struct utsname u;
	if (uname(&u) < 0)
		return "";
	for (size_t i = 0; i < MSB_ARRAY_SIZE(map); i++)
		if (strcmp(u.machine, map[i][0]) == 0)
			return map[i][1];
	snprintf(mach, sizeof(mach), "%s", u.machine);
	return mach;
}

static bool platform_fits(const desc *d)
{
	if (!d->os && !d->arch)
		return true;
	return d->os && strcmp(d->os, "linux") == 0 && d->arch && strcmp(d->arch, host_arch()) == 0;
}

static bool is_index(const char *mt)
{
	return strcmp(mt, MT_OCI_INDEX) == 0 || strcmp(mt, MT_DOCKER_LIST) == 0;
}

static bool is_manifest(const char *mt)
{
	return strcmp(mt, MT_OCI_MANIFEST) == 0 || strcmp(mt, MT_DOCKER_MANIFEST) == 0;
}

/*
 * Pick one descriptor of an index's "manifests": those named `tag` (when
 * given; at the top, the only one or the one named "latest" otherwise), then
 * the first whose platform is linux/<this machine> (or has none).
 */
static int choose(struct layout *l, json_t *index, const char *where, const char *tag, bool top,
		  desc *out)
{
	json_t *ms = json_object_get(index, "manifests");
	if (!json_is_array(ms))
		return bad(l, "%s: `manifests` must be an array", where);
	size_t n = json_array_size(ms);
	if (n == 0)
		return bad(l, "%s lists no manifest", where);
	if (n > MAX_MANIFESTS)
		return bad(l, "%s is oversized: %zu manifests (at most %d)", where, n,
			   MAX_MANIFESTS);
	const char *want = tag;
	if (top && !tag && n > 1)
		want = "latest";
	bool named = false, found = false;
	for (size_t i = 0; i < n && !found; i++) {
		desc d;
		int r = parse_desc(l, json_array_get(ms, i), where, &d);
		if (r < 0)
			return r;
		if (top && want && !(d.ref_name && strcmp(d.ref_name, want) == 0))
			continue;
		named = true;
		if (!platform_fits(&d))
			continue;
		*out = d;
		found = true;
	}
	if (found)
		return 0;
	if (top && !named && tag)
		return bad(l, "no manifest is named `%s` (annotation %s)", tag, REF_NAME);
	if (top && !named)
		return bad(l,
			   "%zu manifests and none named `latest`: name one with "
			   "`oci:%s:TAG`",
			   n, l->path);
	return bad(l, "%s: no manifest for linux/%s", where, host_arch());
}

static int layer_compression(struct layout *l, const desc *d, size_t i, msb_oci_compression *c)
{
	for (size_t k = 0; k < MSB_ARRAY_SIZE(layer_types); k++)
		if (strcmp(d->media_type, layer_types[k].media_type) == 0) {
			*c = layer_types[k].comp;
			return 0;
		}
	return bad(l, "layer %zu (sha256:%.12s): unknown media type `%.120s`", i, d->hex,
		   d->media_type);
}

/* ---- the cache ------------------------------------------------------------------ */

struct cache {
	char *root; /* absolute, resolved */
	int fd, layers, tmp, locks;
};

static void cache_close(struct cache *c)
{
	free(c->root);
	int *fds[] = {&c->fd, &c->layers, &c->tmp, &c->locks};
	for (size_t i = 0; i < MSB_ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
}

static int sub_dir(int fd, const char *name)
{
	if (mkdirat(fd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	int d = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return d < 0 ? -errno : d;
}

static int cache_open(const char *root, struct cache *c, msb_error **err)
{
	int r = msb__mkdir_p(root, 0700);
	if (r < 0)
		return msb__error_errno(err, r, "ns image cache `%s`", root);
	c->root = realpath(root, NULL);
	if (!c->root)
		return msb__error_errno(err, errno, "ns image cache `%s`", root);
	c->fd = open(c->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c->fd < 0)
		return msb__error_errno(err, errno, "ns image cache `%s`", c->root);
	if ((c->layers = sub_dir(c->fd, "sha256")) < 0 || (c->tmp = sub_dir(c->fd, "tmp")) < 0 ||
	    (c->locks = sub_dir(c->fd, "locks")) < 0) {
		int e = c->layers < 0 ? c->layers : c->tmp < 0 ? c->tmp : c->locks;
		return msb__error_errno(err, e, "ns image cache `%s`", c->root);
	}
	return 0;
}

/* Unpacks this lock holder finds under tmp/ for `hex` were left by a crash. */
static void clear_stale(struct cache *c, const char *hex)
{
	int dup = fcntl(c->tmp, F_DUPFD_CLOEXEC, 3);
	if (dup < 0)
		return;
	DIR *d = fdopendir(dup);
	if (!d) {
		close(dup);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)))
		if (strncmp(de->d_name, hex, 64) == 0 && de->d_name[64] == '.')
			msb__rm_rf_at(c->tmp, de->d_name);
	closedir(d);
}

static bool have_layer(struct cache *c, const char *hex)
{
	struct stat st;
	return fstatat(c->layers, hex, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

void msb_ns__oci_report(msb_oci_progress *pr)
{
	if (!pr || !pr->fn)
		return;
	pr->reported = pr->p.layer_bytes;
	pr->fn(pr->userdata, &pr->p);
}

/* The next layer begins: count it and report its start. */
static void progress_layer(msb_oci_progress *pr, uint64_t size)
{
	if (!pr)
		return;
	pr->p.layer++;
	pr->p.layer_bytes = 0;
	pr->p.layer_size = size;
	msb_ns__oci_report(pr);
}

static int ensure_layer(struct layout *l, struct cache *c, const desc *d, msb_oci_compression comp,
			const msb_oci_owner *owner, msb_oci_progress *pr)
{
	if (have_layer(c, d->hex))
		return 0;
	_cleanup_close_ int lock =
		openat(c->locks, d->hex, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (lock < 0)
		return msb__error_errno(l->err, errno, "ns image cache: lock sha256:%s", d->hex);
	while (flock(lock, LOCK_EX) < 0)
		if (errno != EINTR)
			return msb__error_errno(l->err, errno, "ns image cache: lock sha256:%s",
						d->hex);
	if (have_layer(c, d->hex)) {
		/* Unpacked by whoever held the lock: counted as read. */
		if (pr) {
			pr->p.bytes += d->size;
			progress_layer(pr, d->size);
		}
		return 0;
	}
	clear_stale(c, d->hex);
	progress_layer(pr, d->size);

	_cleanup_close_ int blob = open_blob(l, d->hex, d->size, MSB_OCI_MAX_BLOB_BYTES);
	if (blob < 0)
		return blob;
	uint8_t rnd[6];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return msb__error_errno(l->err, errno, "ns image cache: no randomness");
	char tmp[96];
	snprintf(tmp, sizeof(tmp), "%s.%02x%02x%02x%02x%02x%02x", d->hex, rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5]);
	if (mkdirat(c->tmp, tmp, 0700) < 0)
		return msb__error_errno(l->err, errno, "ns image cache: create tmp/%s", tmp);
	int dir = openat(c->tmp, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0) {
		int e = errno;
		msb__rm_rf_at(c->tmp, tmp);
		return msb__error_errno(l->err, e, "ns image cache: open tmp/%s", tmp);
	}
	char what[128];
	snprintf(what, sizeof(what), "sha256:%.12s of `%s`", d->hex, l->image);
	int r = msb_ns__oci_unpack(blob, d->size, d->hex, comp, owner, dir, what, pr, l->err);
	if (r == 0 && pr)
		msb_ns__oci_report(pr); /* the layer's end */
	if (r == 0 && syncfs(dir) < 0)
		r = msb__error_errno(l->err, errno, "ns image cache: sync tmp/%s", tmp);
	close(dir);
	if (r == 0 && renameat(c->tmp, tmp, c->layers, d->hex) < 0)
		r = msb__error_errno(l->err, errno, "ns image cache: move tmp/%s into place", tmp);
	if (r < 0)
		msb__rm_rf_at(c->tmp, tmp);
	return r;
}

/* ---- the whole image ------------------------------------------------------------ */

static int resolve_manifest(struct layout *l, const char *tag, json_t **manifest)
{
	json_t *lay = NULL;
	int r = read_json_file(l, "oci-layout", &lay);
	if (r < 0)
		return r;
	const char *ver = json_string_value(json_object_get(lay, "imageLayoutVersion"));
	bool ok = ver && strncmp(ver, "1.", 2) == 0;
	json_decref(lay);
	if (!ok)
		return bad(l, "`oci-layout` does not say imageLayoutVersion 1.x");

	json_t *index = NULL;
	if ((r = read_json_file(l, "index.json", &index)) < 0)
		return r;
	desc d;
	r = choose(l, index, "index.json", tag, true, &d);
	json_t *doc = NULL;
	/* A descriptor borrows from the document it came from: keep them. */
	json_t *keep[MAX_INDEX_DEPTH] = {NULL};
	for (int depth = 0; r == 0; depth++) {
		if (is_manifest(d.media_type)) {
			r = read_json_blob(l, &d, &doc);
			break;
		}
		if (!is_index(d.media_type)) {
			r = bad(l, "manifest sha256:%.12s: unknown media type `%.120s`", d.hex,
				d.media_type);
			break;
		}
		if (depth >= MAX_INDEX_DEPTH) {
			r = bad(l, "image indexes nested deeper than %d", MAX_INDEX_DEPTH);
			break;
		}
		json_t *inner = NULL;
		if ((r = read_json_blob(l, &d, &inner)) < 0)
			break;
		char where[96];
		snprintf(where, sizeof(where), "image index sha256:%.12s", d.hex);
		keep[depth] = inner;
		r = choose(l, inner, where, NULL, false, &d);
	}
	for (size_t i = 0; i < MAX_INDEX_DEPTH; i++)
		json_decref(keep[i]);
	json_decref(index);
	if (r < 0)
		return r;
	*manifest = doc;
	return 0;
}

int msb_ns__oci_prepare(const char *image, const char *cache_root, const msb_oci_owner *owner,
			msb_oci_progress *pr, char ***layers, size_t *n_layers, msb_error **err)
{
	_cleanup_free_ char *path = NULL, *tag = NULL;
	int r = msb_ns__oci_parse_ref(image, &path, &tag, err);
	if (r < 0)
		return r;
	struct layout l = {.image = image, .path = path, .err = err};
	l.fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l.fd < 0)
		return errno == ENOENT || errno == ENOTDIR
			       ? bad(&l, "`%s` is not a directory", path)
			       : msb__error_errno(err, errno, "ns image `%s`: open `%s`", image,
						  path);
	json_t *m = NULL;
	r = resolve_manifest(&l, tag, &m);
	struct cache c = {.fd = -1, .layers = -1, .tmp = -1, .locks = -1};
	char **out = NULL;
	if (r < 0)
		goto done;

	json_t *sv = json_object_get(m, "schemaVersion");
	if (!json_is_integer(sv) || json_integer_value(sv) != 2) {
		r = bad(&l, "the image manifest is not schemaVersion 2");
		goto done;
	}
	desc cfg;
	if ((r = parse_desc(&l, json_object_get(m, "config"), "manifest config", &cfg)) < 0)
		goto done;
	if (strcmp(cfg.media_type, MT_OCI_CONFIG) != 0 &&
	    strcmp(cfg.media_type, MT_DOCKER_CONFIG) != 0) {
		r = bad(&l, "config: unknown media type `%.120s` (not a container image)",
			cfg.media_type);
		goto done;
	}
	json_t *cdoc = NULL;
	if ((r = read_json_blob(&l, &cfg, &cdoc)) < 0)
		goto done;
	json_decref(cdoc);

	json_t *ls = json_object_get(m, "layers");
	size_t n = json_is_array(ls) ? json_array_size(ls) : 0;
	if (n == 0 || n > MSB_NS_MAX_LAYERS) {
		r = bad(&l, "the manifest must list 1 to %d layers", MSB_NS_MAX_LAYERS);
		goto done;
	}
	desc ds[MSB_NS_MAX_LAYERS];
	msb_oci_compression comps[MSB_NS_MAX_LAYERS];
	for (size_t i = 0; i < n; i++) {
		char where[32];
		snprintf(where, sizeof(where), "layer %zu", i);
		if ((r = parse_desc(&l, json_array_get(ls, i), where, &ds[i])) < 0 ||
		    (r = layer_compression(&l, &ds[i], i, &comps[i])) < 0)
			goto done;
	}
	if ((r = cache_open(cache_root, &c, err)) < 0)
		goto done;
	/* Progress covers the layers not yet in the cache. */
	if (pr && pr->fn) {
		pr->p.image = image;
		for (size_t i = 0; i < n; i++)
			if (!have_layer(&c, ds[i].hex)) {
				pr->p.layers++;
				pr->p.total += ds[i].size;
			}
		if (!pr->p.layers)
			pr = NULL;
	} else {
		pr = NULL;
	}
	for (size_t i = 0; i < n; i++)
		if ((r = ensure_layer(&l, &c, &ds[i], comps[i], owner, pr)) < 0)
			goto done;
	if (pr) {
		pr->p.done = true;
		msb_ns__oci_report(pr);
	}
	out = calloc(n + 1, sizeof(*out));
	if (!out) {
		r = msb__error_nomem(err);
		goto done;
	}
	for (size_t i = 0; i < n; i++) /* the overlay wants the top first */
		if (!(out[i] = msb__asprintf("%s/sha256/%s", c.root, ds[n - 1 - i].hex))) {
			r = msb__error_nomem(err);
			goto done;
		}
	*layers = TAKE_PTR(out);
	*n_layers = n;
	r = 0;
done:
	msb_strv_free(out);
	cache_close(&c);
	json_decref(m);
	close(l.fd);
	return r;
}
