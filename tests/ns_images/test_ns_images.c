/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OCI images, the fingerprint and reset of the `ns` backend, against the real
 * backend through the public API (issue 4: "Images", "SNAPSHOT / reset",
 * "Fingerprint and process observations"; checklist 18.12-18.15, 9.28, 9.29,
 * 4.23).
 *
 * Layouts are built here: once with scripts/make-oci-image (the round trip),
 * otherwise with libarchive from the host's busybox-static, so that each
 * hostile input is exactly the one named. A canary directory on the host
 * stands for "outside the cache": no refused layout may touch it. Needs root,
 * msb-shim, msb-agent and /bin/busybox (env MSB_SHIM, MSB_AGENT,
 * MSB_MAKE_OCI_IMAGE). Each test has its own state root and checks at the
 * end that disposal left no sandbox behind.
 */
#include <criterion/criterion.h>

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <msb/msb.h>
#include <msb/ns.h>

#include "util/fs.h"
#include "util/sha256.h"

#define SCOPE "test"
#define THREAD "images"
#define MT_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define MT_TAR "application/vnd.oci.image.layer.v1.tar"
#define MT_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"

static char root[64]; /* the private state root */
static char tmp[64];  /* layouts and the canary */
static char canary[96];
static msb_backend *backend;

/* ---- fixture ------------------------------------------------------------------ */

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/msbi-XXXXXX");
	cr_assert(mkdtemp(root));
	snprintf(tmp, sizeof(tmp), "/tmp/msbi-t-XXXXXX");
	cr_assert(mkdtemp(tmp));
	chmod(tmp, 0755);
	snprintf(canary, sizeof(canary), "%s/canary", tmp);
	cr_assert_eq(mkdir(canary, 0755), 0);
}

static size_t count_sandboxes(void)
{
	char ns[96];
	snprintf(ns, sizeof(ns), "%s/ns", root);
	size_t n = 0;
	DIR *d = opendir(ns);
	for (struct dirent *de; d && (de = readdir(d));)
		if (strncmp(de->d_name, "msb-", 4) == 0)
			n++;
	if (d)
		closedir(d);
	return n;
}

static void teardown(void)
{
	bool clean = true;
	if (backend) {
		msb_scope_purge purge = {0};
		msb_error *err = NULL;
		int r = msb_backend_dispose_scope(backend, SCOPE, THREAD, &purge, &err);
		clean = r == 0 && purge.undisposed == 0 && count_sandboxes() == 0;
		msb_error_free(err);
		msb_backend_unref(backend);
		backend = NULL;
	}
	msb__rm_rf(root);
	msb__rm_rf(tmp);
	cr_assert(clean, "disposal left something behind under %s", root);
}

TestSuite(ns_images, .init = setup, .fini = teardown, .timeout = 180);

static void make_backend(const char *image, uint64_t writable_bytes)
{
	if (backend)
		msb_backend_unref(backend);
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	o.image = image;
	o.writable_bytes = writable_bytes;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &backend, &err), 0, "%s", msb_error_message(err));
}

static int acquire(const char *agent_dir, msb_sandbox **out, msb_error **err)
{
	msb_key key = {.scope = SCOPE, .thread_id = THREAD, .agent_dir = agent_dir};
	msb_spec_builder *b = msb_spec_builder_new("ns-images");
	msb_spec_builder_set_requires(b, MSB_CAP_EXEC);
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(b, &spec, err), 0);
	msb_spec_builder_free(b);
	int r = msb_backend_acquire(backend, &key, spec, out, err);
	msb_spec_unref(spec);
	return r;
}

static msb_sandbox *acquire_ok(const char *agent_dir)
{
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(acquire(agent_dir, &sb, &err), 0, "acquire: %s", msb_error_message(err));
	return sb;
}

/* Run a shell command; its status and stdout (static buffer). */
static const char *run(msb_sandbox *sb, const char *cmd, int *status, char *errout, size_t esize)
{
	static char out[8192];
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = cmd;
	req.timeout = 60;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "exec `%s`: %s", cmd,
		     msb_error_message(err));
	*status = res.exit_code;
	snprintf(out, sizeof(out), "%s", res.stdout_bytes ? (char *)res.stdout_bytes : "");
	if (errout)
		snprintf(errout, esize, "%s", res.stderr_bytes ? (char *)res.stderr_bytes : "");
	msb_exec_result_clear(&res);
	return out;
}

static const char *sh(msb_sandbox *sb, const char *cmd)
{
	int status;
	char errout[1024];
	const char *out = run(sb, cmd, &status, errout, sizeof(errout));
	cr_assert_eq(status, 0, "`%s` exited %d: %s", cmd, status, errout);
	return out;
}

static void fingerprint(msb_sandbox *sb, msb_fingerprint *fp)
{
	bool supported = false;
	msb_error *err = NULL;
	memset(fp, 0, sizeof(*fp));
	cr_assert_eq(msb_sandbox_fingerprint(sb, &supported, fp, &err), 0, "fingerprint: %s",
		     msb_error_message(err));
	cr_assert(supported, "the ns backend fingerprints");
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t strv_len(char **v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

static char *joined(char **v)
{
	static char buf[8192];
	buf[0] = '\0';
	for (size_t i = 0; v && v[i]; i++) {
		strncat(buf, v[i], sizeof(buf) - strlen(buf) - 2);
		strncat(buf, " ", sizeof(buf) - strlen(buf) - 1);
	}
	return buf;
}

static bool has(char **v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

static void expect_refusal(int r, msb_error *err, int code, const char *phrase, const char *what)
{
	cr_assert_eq(r, code, "%s: got %s (%d) `%s`, want %s", what, msb_code_name(r), r,
		     err ? msb_error_message(err) : "", msb_code_name(code));
	cr_assert(err && strstr(msb_error_message(err), phrase), "%s: `%s` lacks `%s`", what,
		  err ? msb_error_message(err) : "", phrase);
}

/* The one sandbox directory under the state root. */
static void sandbox_dir(char *out, size_t size)
{
	char ns[96];
	snprintf(ns, sizeof(ns), "%s/ns", root);
	DIR *d = opendir(ns);
	cr_assert(d);
	out[0] = '\0';
	for (struct dirent *de; (de = readdir(d));)
		if (strncmp(de->d_name, "msb-", 4) == 0)
			snprintf(out, size, "%s/%.40s", ns, de->d_name);
	closedir(d);
	cr_assert(out[0], "no sandbox directory");
}

static pid_t init_pid(void)
{
	char dir[160], path[200];
	sandbox_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/init.pid", dir);
	FILE *f = fopen(path, "re");
	cr_assert(f);
	int pid = 0;
	cr_assert_eq(fscanf(f, "%d", &pid), 1);
	fclose(f);
	return pid;
}

/* ---- building layouts ------------------------------------------------------------- */

struct ent {
	char type; /* d f l(symlink) h(hardlink) c b p */
	const char *name;
	const char *data; /* file content, or a link's target */
	unsigned mode;
	unsigned major, minor;
	size_t len; /* for 'f' when data holds NULs: 0 = strlen */
};

struct buf {
	uint8_t *p;
	size_t n, cap;
};

static la_ssize_t buf_write(struct archive *a, void *ud, const void *data, size_t len)
{
	struct buf *b = ud;
	if (b->n + len > b->cap) {
		size_t cap = (b->n + len) * 2;
		b->p = realloc(b->p, cap);
		cr_assert(b->p);
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, len);
	b->n += len;
	return (la_ssize_t)len;
}

static uint8_t *busybox_data;
static size_t busybox_len;

static void load_busybox(void)
{
	if (busybox_data)
		return;
	int fd = open("/bin/busybox", O_RDONLY | O_CLOEXEC);
	cr_assert(fd >= 0, "needs /bin/busybox (Debian's busybox-static)");
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	busybox_len = (size_t)st.st_size;
	busybox_data = malloc(busybox_len);
	cr_assert_eq(read(fd, busybox_data, busybox_len), (ssize_t)busybox_len);
	close(fd);
}

/* A tar layer of `ents`, compressed as `mt` says. */
static struct buf make_tar(const struct ent *ents, size_t n, const char *mt)
{
	struct buf b = {0};
	struct archive *a = archive_write_new();
	cr_assert_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	/* No zero padding after the compressed stream (zstd would read a frame). */
	cr_assert_eq(archive_write_set_bytes_in_last_block(a, 1), ARCHIVE_OK);
	if (strcmp(mt, MT_GZIP) == 0) {
		cr_assert_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
		/* No time stamp: the same layer, the same digest. */
		cr_assert_eq(archive_write_set_filter_option(a, "gzip", "timestamp", NULL),
			     ARCHIVE_OK);
	} else if (strcmp(mt, MT_ZSTD) == 0)
		cr_assert_eq(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	cr_assert_eq(archive_write_open(a, &b, NULL, buf_write, NULL), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		const struct ent *e = &ents[i];
		struct archive_entry *ae = archive_entry_new();
		archive_entry_set_pathname(ae, e->name);
		archive_entry_set_uid(ae, 0);
		archive_entry_set_gid(ae, 0);
		archive_entry_set_mtime(ae, 1700000000, 0);
		unsigned mode = e->mode;
		const void *data = NULL;
		size_t len = 0;
		switch (e->type) {
		case 'd':
			archive_entry_set_filetype(ae, AE_IFDIR);
			mode = mode ? mode : 0755;
			break;
		case 'f':
			archive_entry_set_filetype(ae, AE_IFREG);
			mode = mode ? mode : 0644;
			data = e->data;
			len = e->len ? e->len : strlen(e->data);
			break;
		case 'l':
			archive_entry_set_filetype(ae, AE_IFLNK);
			archive_entry_set_symlink(ae, e->data);
			mode = 0777;
			break;
		case 'h':
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_hardlink(ae, e->data);
			mode = mode ? mode : 0644;
			break;
		case 'c':
		case 'b':
			archive_entry_set_filetype(ae, e->type == 'c' ? AE_IFCHR : AE_IFBLK);
			archive_entry_set_rdevmajor(ae, e->major);
			archive_entry_set_rdevminor(ae, e->minor);
			mode = mode ? mode : 0666;
			break;
		case 'p':
			archive_entry_set_filetype(ae, AE_IFIFO);
			mode = mode ? mode : 0644;
			break;
		}
		archive_entry_set_perm(ae, mode);
		archive_entry_set_size(ae, (la_int64_t)len);
		cr_assert(archive_write_header(a, ae) >= ARCHIVE_WARN, "tar header `%s`: %s",
			  e->name, archive_error_string(a));
		if (len)
			cr_assert_eq(archive_write_data(a, data, len), (la_ssize_t)len);
		archive_entry_free(ae);
	}
	cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	return b;
}

/* The busybox base layer: a shell and a handful of applets. */
static struct buf base_layer(void)
{
	load_busybox();
	struct ent e[] = {
		{'d', "bin"},
		{'d', "etc"},
		{'d', "tmp", NULL, 01777},
		{'d', "root", NULL, 0700},
		{'f', "bin/busybox", (const char *)busybox_data, 0755, 0, 0, busybox_len},
		{'l', "bin/sh", "/bin/busybox"},
		{'l', "bin/sleep", "busybox"},
		{'h', "bin/echo", "bin/busybox", 0755},
		{'f', "etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"},
		{'f', "etc/issue", "msb test image\n"},
	};
	return make_tar(e, MSB_ARRAY_SIZE(e), MT_GZIP);
}

struct blobref {
	char hex[65];
	size_t size;
	const char *mt;
};

static struct blobref put_blob(const char *layout, const void *data, size_t len, const char *mt)
{
	struct blobref r = {.size = len, .mt = mt};
	msb__sha256_hex(data, len, r.hex);
	char path[512];
	snprintf(path, sizeof(path), "%s/blobs/sha256", layout);
	cr_assert_eq(msb__mkdir_p(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", layout, r.hex);
	FILE *f = fopen(path, "we");
	cr_assert(f);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
	return r;
}

static struct blobref put_json(const char *layout, json_t *v, const char *mt)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert(s);
	struct blobref r = put_blob(layout, s, strlen(s), mt);
	free(s);
	json_decref(v);
	return r;
}

static json_t *desc_json(const struct blobref *b)
{
	char digest[80];
	snprintf(digest, sizeof(digest), "sha256:%s", b->hex);
	return json_pack("{s:s, s:s, s:I}", "mediaType", b->mt, "digest", digest, "size",
			 (json_int_t)b->size);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	cr_assert(f, "fopen %s", path);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

/* config, manifest (layers bottom first), index.json naming it `tag`, oci-layout. */
static void put_image(const char *layout, const struct blobref *layers, size_t n, const char *tag)
{
	json_t *cfg = json_pack("{s:s, s:s, s:{s:s, s:[]}}", "architecture", "amd64", "os", "linux",
				"rootfs", "type", "layers", "diff_ids");
	struct blobref c = put_json(layout, cfg, "application/vnd.oci.image.config.v1+json");
	json_t *ls = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(ls, desc_json(&layers[i]));
	json_t *m = json_pack("{s:i, s:s, s:o, s:o}", "schemaVersion", 2, "mediaType",
			      "application/vnd.oci.image.manifest.v1+json", "config", desc_json(&c),
			      "layers", ls);
	struct blobref mb = put_json(layout, m, "application/vnd.oci.image.manifest.v1+json");
	json_t *d = desc_json(&mb);
	json_object_set_new(d, "annotations",
			    json_pack("{s:s}", "org.opencontainers.image.ref.name", tag));
	json_t *index = json_pack("{s:i, s:[o]}", "schemaVersion", 2, "manifests", d);
	char path[512];
	snprintf(path, sizeof(path), "%s/index.json", layout);
	char *s = json_dumps(index, JSON_COMPACT);
	write_text(path, s);
	free(s);
	json_decref(index);
	snprintf(path, sizeof(path), "%s/oci-layout", layout);
	write_text(path, "{\"imageLayoutVersion\":\"1.0.0\"}");
}

/* A layout in tmp/<name> of the base layer plus `extra` layers; returns the
 * image reference (static buffer). */
static const char *image_with(const char *name, const struct buf *extra, size_t n_extra,
			      const char *const *extra_mt)
{
	static char ref[256];
	char layout[200];
	snprintf(layout, sizeof(layout), "%s/%s", tmp, name);
	cr_assert_eq(mkdir(layout, 0755), 0);
	struct blobref l[8];
	struct buf base = base_layer();
	l[0] = put_blob(layout, base.p, base.n, MT_GZIP);
	free(base.p);
	for (size_t i = 0; i < n_extra; i++)
		l[i + 1] = put_blob(layout, extra[i].p, extra[i].n,
				    extra_mt && extra_mt[i] ? extra_mt[i] : MT_GZIP);
	put_image(layout, l, n_extra + 1, "latest");
	snprintf(ref, sizeof(ref), "oci:%s", layout);
	return ref;
}

static size_t dir_entries(const char *path)
{
	size_t n = 0;
	DIR *d = opendir(path);
	for (struct dirent *de; d && (de = readdir(d));)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	if (d)
		closedir(d);
	return n;
}

/* ---- the round trip --------------------------------------------------------------- */

static void run_script(const char *out, const char *const *extra)
{
	const char *script = getenv("MSB_MAKE_OCI_IMAGE");
	cr_assert(script, "MSB_MAKE_OCI_IMAGE is not set");
	const char *argv[16] = {script, out};
	size_t k = 2;
	for (size_t i = 0; extra && extra[i] && k < 15; i++)
		argv[k++] = extra[i];
	argv[k] = NULL;
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		execv(script, (char *const *)argv);
		_exit(127);
	}
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "make-oci-image failed");
}

/* Issue 4 "Done when": an OCI layout round trip: build, acquire, run a
 * program from it, read its output file. */
Test(ns_images, oci_layout_round_trip)
{
	char layout[160], image[200];
	snprintf(layout, sizeof(layout), "%s/busybox", tmp);
	const char *args[] = {"--tag", "v1", NULL};
	run_script(layout, args);
	snprintf(image, sizeof(image), "oci:%s:v1", layout);
	make_backend(image, 0);
	msb_sandbox *sb = acquire_ok("/agent");

	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	const char *argv[] = {"/bin/busybox", "echo", "from the image", NULL};
	req.argv = argv;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(res.exit_code, 0);
	cr_assert_str_eq((char *)res.stdout_bytes, "from the image\n");
	msb_exec_result_clear(&res);

	cr_assert_str_eq(sh(sb, "cat /etc/os-release | head -1"), "NAME=\"msb busybox\"\n");
	cr_assert_str_eq(sh(sb, "ls /usr/lib 2>&1; test -e /usr/bin/python3 || echo no-host"),
			 "ls: /usr/lib: No such file or directory\nno-host\n",
			 "nothing of the host's /usr");
	sh(sb, "echo result > out.txt && wc -c < /bin/busybox > size.txt");
	uint8_t *data = NULL;
	size_t len = 0;
	cr_assert_eq(msb_sandbox_read_file(sb, "out.txt", NULL, 1 << 20, &data, &len, &err), 0,
		     "%s", msb_error_message(err));
	cr_assert_eq(len, 7);
	cr_assert(memcmp(data, "result\n", 7) == 0);
	free(data);
	msb_sandbox_free(sb);

	/* Layers went into the cache once, read-only to the guest's other ids. */
	char cache[160];
	snprintf(cache, sizeof(cache), "%s/images/sha256", root);
	cr_assert_eq(dir_entries(cache), 2, "two layers unpacked");
	snprintf(cache, sizeof(cache), "%s/images/tmp", root);
	cr_assert_eq(dir_entries(cache), 0, "no unpack left half-way");

	/* A tag that is not there. */
	snprintf(image, sizeof(image), "oci:%s:v2", layout);
	make_backend(image, 0);
	msb_sandbox *none = NULL;
	int r = acquire("/agent2", &none, &err);
	expect_refusal(r, err, MSB_E_VALUE, "no manifest is named `v2`", "unknown tag");
	msb_error_free(err);
	/* The reference is checked when the backend is made. */
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	o.image = "oci:relative/path";
	msb_backend *b = NULL;
	err = NULL;
	r = msb_ns_backend_new(&o, &b, &err);
	expect_refusal(r, err, MSB_E_VALUE, "absolute", "relative layout path");
	msb_error_free(err);
}

/* What a progress callback saw. */
struct seen {
	unsigned calls, max_layer, layers, done;
	uint64_t last_bytes, total;
	bool monotonic;
};

static void on_progress(void *ud, const msb_ns_progress *p)
{
	struct seen *s = ud;
	if (s->calls && p->bytes < s->last_bytes)
		s->monotonic = false;
	s->calls++;
	s->last_bytes = p->bytes;
	s->total = p->total;
	s->layers = p->layers;
	if (p->layer > s->max_layer)
		s->max_layer = p->layer;
	if (p->done)
		s->done++;
	cr_assert(p->image && strncmp(p->image, "oci:", 4) == 0);
	cr_assert_leq(p->layer_bytes, p->layer_size);
}

/* Issue 16: an OCI image's first unpack reports layers and bytes through the
 * options' callback (version 2) or msb_ns_backend_set_progress; a cached
 * image reports nothing; version 1 options are still accepted. */
Test(ns_images, unpack_progress_first_time_only)
{
	char layout[160], image[200];
	snprintf(layout, sizeof(layout), "%s/busybox", tmp);
	run_script(layout, NULL);
	snprintf(image, sizeof(image), "oci:%s", layout);

	struct seen s = {.monotonic = true};
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	o.image = image;
	o.progress = on_progress;
	o.progress_userdata = &s;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &backend, &err), 0, "%s", msb_error_message(err));
	msb_sandbox_free(acquire_ok("/agent"));
	cr_assert_eq(s.layers, 2);
	cr_assert_eq(s.max_layer, 2);
	cr_assert_eq(s.done, 1, "one final report");
	cr_assert(s.monotonic, "bytes only grow");
	cr_assert(s.total > 0 && s.last_bytes == s.total, "done at %llu of %llu",
		  (unsigned long long)s.last_bytes, (unsigned long long)s.total);
	cr_assert_geq(s.calls, 5, "start and end of each layer, then done");

	/* Cached now: a second backend on the same cache has nothing to say. */
	msb_backend *second = NULL;
	struct seen again = {.monotonic = true};
	o.progress_userdata = &again;
	cr_assert_eq(msb_ns_backend_new(&o, &second, &err), 0);
	msb_backend *keep = backend;
	backend = second;
	msb_sandbox_free(acquire_ok("/agent2"));
	cr_assert_eq(again.calls, 0, "a cached image reports nothing");
	msb_scope_purge purge = {0};
	cr_assert_eq(msb_backend_dispose_scope(second, SCOPE, THREAD, &purge, NULL), 0);
	msb_backend_unref(second);
	backend = keep;

	/* Set on a backend made from backend JSON; refused on another backend. */
	cr_assert_eq(msb_ns_backend_set_progress(backend, NULL, NULL, &err), 0);
	msb_backend *fake = NULL;
	cr_assert_eq(msb_backend_from_json("{\"type\": \"fake\"}", 16, &fake, NULL), 0);
	cr_assert_eq(msb_ns_backend_set_progress(fake, on_progress, &s, &err), MSB_E_VALUE);
	msb_error_free(err);
	msb_backend_unref(fake);

	/* Version 1 of the options (no progress fields) is still read. */
	struct {
		unsigned version;
		const char *name, *state_root, *shim_path, *agent_path, *image;
		uint64_t memory_bytes, pids_max, cpu_millis, writable_bytes;
		double start_timeout;
		const char *egress_config;
	} v1 = {1, NULL, root, NULL, NULL, "host", 0, 0, 0, 0, 0, NULL};
	msb_backend *old = NULL;
	err = NULL;
	cr_assert_eq(msb_ns_backend_new((const msb_ns_options *)&v1, &old, &err), 0, "%s",
		     msb_error_message(err));
	msb_backend_unref(old);
	o.version = MSB_NS_OPTIONS_VERSION + 1;
	cr_assert_eq(msb_ns_backend_new(&o, &old, &err), MSB_E_VALUE);
	msb_error_free(err);
}

/* Whiteouts and opaque directories of upper layers hide what lower layers
 * hold; hardlinks and zstd layers unpack. */
Test(ns_images, whiteouts_honoured)
{
	struct ent l1[] = {
		{'d', "opt"},
		{'d', "opt/old"},
		{'f', "opt/old/a", "a"},
		{'f', "opt/old/b", "b"},
		{'d', "opt/gone"},
		{'f', "opt/gone/x", "x"},
		{'f', "opt/keep", "keep"},
		{'f', "opt/replaced", "first"},
	};
	struct ent l2[] = {
		{'f', "etc/.wh.issue", ""},
		{'f', "opt/old/.wh..wh..opq", ""},
		{'f', "opt/old/c", "c"},
		{'f', "opt/.wh.gone", ""},
		{'f', "opt/.wh.replaced", ""},
		{'f', "opt/replaced", "second"},
		{'f', "opt/orig", "linked\n"},
		{'h', "opt/link", "opt/orig"},
		{'c', "opt/.wh-as-device", NULL, 0, 0, 0},
	};
	struct buf extra[2] = {make_tar(l1, MSB_ARRAY_SIZE(l1), MT_ZSTD),
			       make_tar(l2, MSB_ARRAY_SIZE(l2), MT_GZIP)};
	const char *mts[] = {MT_ZSTD, MT_GZIP};
	make_backend(image_with("wh", extra, 2, mts), 0);
	free(extra[0].p);
	free(extra[1].p);
	msb_sandbox *sb = acquire_ok("/agent");
	cr_assert_str_eq(sh(sb, "ls -a /opt/old | tr '\\n' ' '"), ". .. c ",
			 "an opaque directory shows only its own layer");
	cr_assert_str_eq(sh(sb, "test -e /etc/issue || echo gone"), "gone\n");
	cr_assert_str_eq(sh(sb, "test -e /opt/gone || echo gone"), "gone\n");
	cr_assert_str_eq(sh(sb, "cat /opt/keep /opt/replaced"), "keepsecond",
			 "a whiteout hides lower layers only, never its own layer's entry");
	cr_assert_str_eq(sh(sb, "cat /opt/link; stat -c %h /opt/orig"), "linked\n2\n",
			 "a hardlink within the layer");
	cr_assert_str_eq(
		sh(sb, "test -e /opt/.wh-as-device || echo gone; ls -A /opt | tr '\\n' ' '"),
		"gone\nkeep link old orig replaced ", "a 0/0 device is a whiteout, not a node");
	/* The guest can still delete and recreate over whiteouts. */
	sh(sb, "echo new > /etc/issue && rm /opt/keep");
	cr_assert_str_eq(sh(sb, "cat /etc/issue; test -e /opt/keep || echo gone"), "new\ngone\n");
	msb_sandbox_free(sb);
}

/* ---- hostile layouts ------------------------------------------------------------- */

struct hostile {
	const char *name;
	const char *phrase;
	struct ent ents[4];
	size_t n;
	const char *mt;
	enum {
		AS_IS,
		TRUNCATE,
		FLIP_BYTE,
		WRONG_SIZE,
		NO_LAYOUT_FILE,
		BIG_INDEX,
		MISSING_BLOB
	} how;
};

static void check_nothing_outside(const char *what, const char *bad_hex)
{
	cr_assert_eq(dir_entries(canary), 0, "%s: something landed in the canary", what);
	char p[160];
	snprintf(p, sizeof(p), "%s/images/tmp", root);
	cr_assert_eq(dir_entries(p), 0, "%s: an unpack was left in tmp/", what);
	snprintf(p, sizeof(p), "%s/images/sha256/%s", root, bad_hex);
	cr_assert(access(p, F_OK) < 0, "%s: the refused layer was cached", what);
	struct stat st;
	cr_assert(stat("/etc/evil", &st) < 0 && stat("/tmp/evil", &st) < 0,
		  "%s: a file outside the cache", what);
}

static void hostile_case(const struct hostile *h)
{
	char layout[200];
	snprintf(layout, sizeof(layout), "%s/%s", tmp, h->name);
	cr_assert_eq(mkdir(layout, 0755), 0);
	struct buf base = base_layer();
	struct blobref l[2];
	l[0] = put_blob(layout, base.p, base.n, MT_GZIP);
	free(base.p);
	const char *mt = h->mt ? h->mt : MT_GZIP;
	struct buf bad = make_tar(h->ents, h->n, strcmp(mt, MT_TAR) == 0 ? MT_TAR : MT_GZIP);
	if (h->how == TRUNCATE)
		bad.n = bad.n * 2 / 3; /* digest and size say the truncated bytes */
	l[1] = put_blob(layout, bad.p, bad.n, mt);
	if (h->how == FLIP_BYTE || h->how == MISSING_BLOB || h->how == WRONG_SIZE) {
		char path[512];
		snprintf(path, sizeof(path), "%s/blobs/sha256/%s", layout, l[1].hex);
		if (h->how == MISSING_BLOB) {
			cr_assert_eq(unlink(path), 0);
		} else if (h->how == FLIP_BYTE) {
			bad.p[bad.n / 2] ^= 0xff;
			FILE *f = fopen(path, "we");
			cr_assert_eq(fwrite(bad.p, 1, bad.n, f), bad.n);
			fclose(f);
		} else {
			l[1].size += 1;
		}
	}
	free(bad.p);
	put_image(layout, l, 2, "latest");
	char path[512];
	if (h->how == NO_LAYOUT_FILE) {
		snprintf(path, sizeof(path), "%s/oci-layout", layout);
		cr_assert_eq(unlink(path), 0);
	}
	if (h->how == BIG_INDEX) {
		snprintf(path, sizeof(path), "%s/index.json", layout);
		FILE *f = fopen(path, "we");
		fputs("{\"schemaVersion\":2,\"manifests\":[],\"pad\":\"", f);
		for (int i = 0; i < (2 << 20) / 64; i++)
			fputs("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			      f);
		fputs("\"}", f);
		fclose(f);
	}
	char image[256];
	snprintf(image, sizeof(image), "oci:%s", layout);
	make_backend(image, 0);
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	int r = acquire("/agent", &sb, &err);
	expect_refusal(r, err, MSB_E_VALUE, h->phrase, h->name);
	msb_error_free(err);
	check_nothing_outside(h->name, l[1].hex);
	msb__rm_rf(layout);
}

Test(ns_images, hostile_layouts_refused)
{
	static char evil_abs[160], in_canary[160];
	snprintf(evil_abs, sizeof(evil_abs), "%s/evil", canary);
	snprintf(in_canary, sizeof(in_canary), "%s", canary);
	const struct hostile cases[] = {
		{"absolute", "absolute entry", {{'f', evil_abs, "x"}}, 1},
		{"dotdot", "`..` component", {{'f', "../../../../tmp/evil", "x"}}, 1},
		{"dotdot-inner", "`..` component", {{'f', "etc/../../evil", "x"}}, 1},
		{"symlink-out", "points out of the tree", {{'l', "etc/up", "../../../../etc"}}, 1},
		{"write-through-link",
		 "lies below a link",
		 {{'l', "c", in_canary}, {'f', "c/evil", "x"}},
		 2},
		{"hardlink-out", "points out of the tree", {{'h', "etc/pw", "/etc/passwd"}}, 1},
		{"hardlink-dotdot",
		 "points out of the tree",
		 {{'h', "etc/pw", "../../etc/passwd"}},
		 1},
		{"hardlink-missing", "not in this layer", {{'h', "etc/pw", "etc/nothing"}}, 1},
		{"device-node",
		 "device node `dev/null2`",
		 {{'d', "dev"}, {'c', "dev/null2", NULL, 0, 1, 3}},
		 2},
		{"block-device", "device node", {{'b', "sda", NULL, 0, 8, 0}}, 1},
		{"truncated",
		 "truncated or corrupt",
		 {{'f', "etc/big", "0123456789"}},
		 1,
		 NULL,
		 TRUNCATE},
		{"digest-mismatch", "digest mismatch", {{'f', "etc/x", "x"}}, 1, NULL, FLIP_BYTE},
		{"size-mismatch", "size mismatch", {{'f', "etc/x", "x"}}, 1, NULL, WRONG_SIZE},
		{"unknown-media-type",
		 "unknown media type",
		 {{'f', "etc/x", "x"}},
		 1,
		 "application/vnd.oci.image.layer.v1.tar+bzip2"},
		{"missing-blob",
		 "missing from the layout",
		 {{'f', "etc/x", "x"}},
		 1,
		 NULL,
		 MISSING_BLOB},
		{"not-a-layout",
		 "not an OCI image layout",
		 {{'f', "etc/x", "x"}},
		 1,
		 NULL,
		 NO_LAYOUT_FILE},
		{"oversized-index", "oversized", {{'f', "etc/x", "x"}}, 1, NULL, BIG_INDEX},
	};
	for (size_t i = 0; i < MSB_ARRAY_SIZE(cases); i++)
		hostile_case(&cases[i]);
	/* The base layer, the same in every case, was cached once; nothing else. */
	char p[160];
	snprintf(p, sizeof(p), "%s/images/sha256", root);
	cr_assert_eq(dir_entries(p), 1);
}

/* Many acquires of one new image at once: one unpack per layer, every
 * sandbox serves. */
struct racer {
	char agent_dir[32];
	int r;
	char msg[256];
	char out[64];
};

static void *race(void *arg)
{
	struct racer *rc = arg;
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	msb_key key = {.scope = SCOPE, .thread_id = THREAD, .agent_dir = rc->agent_dir};
	msb_spec_builder *b = msb_spec_builder_new("ns-images");
	msb_spec *spec = NULL;
	msb_spec_build(b, &spec, NULL);
	msb_spec_builder_free(b);
	rc->r = msb_backend_acquire(backend, &key, spec, &sb, &err);
	msb_spec_unref(spec);
	if (rc->r < 0) {
		snprintf(rc->msg, sizeof(rc->msg), "%s", msb_error_message(err));
		msb_error_free(err);
		return NULL;
	}
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = "cat /etc/issue";
	msb_exec_result res = {0};
	rc->r = msb_sandbox_exec(sb, &req, &res, &err);
	if (rc->r == 0)
		snprintf(rc->out, sizeof(rc->out), "%s", (char *)res.stdout_bytes);
	else
		snprintf(rc->msg, sizeof(rc->msg), "%s", msb_error_message(err));
	msb_error_free(err);
	msb_exec_result_clear(&res);
	msb_sandbox_free(sb);
	return NULL;
}

Test(ns_images, concurrent_acquires_unpack_once)
{
	struct ent l1[] = {{'f', "etc/motd", "hello\n"}};
	struct buf extra = make_tar(l1, 1, MT_GZIP);
	make_backend(image_with("race", &extra, 1, NULL), 0);
	free(extra.p);
	char tmpdir[160];
	snprintf(tmpdir, sizeof(tmpdir), "%s/images/tmp", root);
	cr_assert_eq(msb__mkdir_p(tmpdir, 0700), 0);
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	cr_assert(in >= 0);
	cr_assert(inotify_add_watch(in, tmpdir, IN_CREATE) >= 0);

	enum { N = 6 };
	struct racer rc[N];
	pthread_t th[N];
	for (int i = 0; i < N; i++) {
		memset(&rc[i], 0, sizeof(rc[i]));
		snprintf(rc[i].agent_dir, sizeof(rc[i].agent_dir), "/agent/%d", i);
		cr_assert_eq(pthread_create(&th[i], NULL, race, &rc[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(rc[i].r, 0, "racer %d: %s", i, rc[i].msg);
		cr_assert_str_eq(rc[i].out, "msb test image\n");
	}
	char ev[16384];
	int created = 0;
	ssize_t n = read(in, ev, sizeof(ev));
	for (ssize_t off = 0; n > 0 && off < n;) {
		struct inotify_event *e = (struct inotify_event *)(ev + off);
		if (e->mask & IN_CREATE)
			created++;
		off += (ssize_t)(sizeof(*e) + e->len);
	}
	close(in);
	cr_assert_eq(created, 2, "two layers, each unpacked once (saw %d unpacks)", created);
	cr_assert_eq(dir_entries(tmpdir), 0);
	cr_assert_eq(count_sandboxes(), N);
}

/* ---- fingerprint (18.12-18.15) ---------------------------------------------------- */

static const char *busybox_image(void)
{
	static char ref[256];
	struct stat st;
	char layout[160];
	snprintf(layout, sizeof(layout), "%s/bb", tmp);
	if (stat(layout, &st) < 0)
		snprintf(ref, sizeof(ref), "%s", image_with("bb", NULL, 0, NULL));
	return ref;
}

/* 18.13/18.14: a fresh sandbox has no changed path and no program but its
 * agent, for every image kind. */
Test(ns_images, fingerprint_of_a_fresh_sandbox_is_empty)
{
	const char *images[] = {busybox_image(), "host"};
	for (size_t i = 0; i < MSB_ARRAY_SIZE(images); i++) {
		make_backend(images[i], 0);
		char agent[32];
		snprintf(agent, sizeof(agent), "/agent/%zu", i);
		msb_sandbox *sb = acquire_ok(agent);
		msb_fingerprint fp;
		fingerprint(sb, &fp);
		cr_assert_eq(strv_len(fp.changed_paths), 0, "%s: changed: %s", images[i],
			     joined(fp.changed_paths));
		cr_assert_eq(strv_len(fp.running_programs), 0, "%s: programs: %s", images[i],
			     joined(fp.running_programs));
		msb_fingerprint_clear(&fp);
		/* An exec that leaves nothing behind leaves the fingerprint empty. */
		sh(sb, "echo hi >/dev/null");
		fingerprint(sb, &fp);
		cr_assert_eq(strv_len(fp.changed_paths) + strv_len(fp.running_programs), 0,
			     "%s: %s", images[i], joined(fp.changed_paths));
		msb_fingerprint_clear(&fp);
		msb_sandbox_free(sb);
	}
}

/* 18.13: changed paths are engine-answered: the overlay's upper dir
 * (deletions included), the storage base and /dev/shm. */
Test(ns_images, fingerprint_shows_writes_and_deletions)
{
	make_backend(busybox_image(), 0);
	msb_sandbox *sb = acquire_ok("/agent");
	sh(sb, "echo x > /tmp/f && rm /etc/issue && echo o > out && mkdir -p d/e && "
	       "echo s > /dev/shm/seg");
	msb_fingerprint fp;
	fingerprint(sb, &fp);
	const char *want[] = {"/dev/shm/seg",
			      "/etc",
			      "/etc/issue",
			      "/maf-sandbox/work/d",
			      "/maf-sandbox/work/d/e",
			      "/maf-sandbox/work/out",
			      "/tmp",
			      "/tmp/f"};
	cr_assert_eq(strv_len(fp.changed_paths), MSB_ARRAY_SIZE(want), "changed: %s",
		     joined(fp.changed_paths));
	for (size_t i = 0; i < MSB_ARRAY_SIZE(want); i++)
		cr_assert_str_eq(fp.changed_paths[i], want[i], "sorted set: %s",
				 joined(fp.changed_paths));
	msb_fingerprint_clear(&fp);

	/* Written then restored is still a change of the upper dir. */
	sh(sb, "rm /tmp/f /dev/shm/seg out && rm -r d");
	fingerprint(sb, &fp);
	cr_assert(has(fp.changed_paths, "/etc/issue") && !has(fp.changed_paths, "/tmp/f") &&
			  !has(fp.changed_paths, "/maf-sandbox/work/out"),
		  "changed: %s", joined(fp.changed_paths));
	msb_fingerprint_clear(&fp);
	msb_sandbox_free(sb);
}

/* 18.13: running programs carry pid, start time and argv, so that a
 * replacement with the same command (and even the same pid) differs. */
Test(ns_images, fingerprint_shows_programs_and_replacements)
{
	make_backend(busybox_image(), 0);
	msb_sandbox *sb = acquire_ok("/agent");
	sh(sb, "sleep 1000 </dev/null >/dev/null 2>&1 &");
	msb_fingerprint fp;
	fingerprint(sb, &fp);
	cr_assert_eq(strv_len(fp.running_programs), 1, "programs: %s", joined(fp.running_programs));
	char first[256];
	snprintf(first, sizeof(first), "%s", fp.running_programs[0]);
	cr_assert(strstr(first, ":sleep 1000"), "identity `%s`", first);
	msb_fingerprint_clear(&fp);

	sh(sb, "kill $(pidof sleep); while pidof sleep >/dev/null; do :; done; "
	       "sleep 1000 </dev/null >/dev/null 2>&1 &");
	fingerprint(sb, &fp);
	cr_assert_eq(strv_len(fp.running_programs), 1);
	cr_assert(strstr(fp.running_programs[0], ":sleep 1000"));
	cr_assert_str_neq(fp.running_programs[0], first, "the replacement has its own identity");
	msb_fingerprint_clear(&fp);

	sh(sb, "kill $(pidof sleep); while pidof sleep >/dev/null; do :; done");
	fingerprint(sb, &fp);
	cr_assert_eq(strv_len(fp.running_programs), 0, "programs: %s", joined(fp.running_programs));
	msb_fingerprint_clear(&fp);
	msb_sandbox_free(sb);
}

/* 18.15: writable storage the fingerprint cannot see is refused, never
 * reported clean. A tmpfs is mounted into the sandbox from the host. */
Test(ns_images, fingerprint_refuses_an_unseen_writable_mount)
{
	make_backend(busybox_image(), 0);
	msb_sandbox *sb = acquire_ok("/agent");
	msb_fingerprint fp;
	fingerprint(sb, &fp);
	msb_fingerprint_clear(&fp);

	pid_t init = init_pid();
	pid_t child = fork();
	cr_assert(child >= 0);
	if (child == 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)init);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNS) < 0)
			_exit(1);
		if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID, "size=1m") < 0)
			_exit(2);
		_exit(0);
	}
	int status = 0;
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "mount into the sandbox: %d",
		  status);
	sh(sb, "echo hidden > /tmp/x");
	bool supported = false;
	msb_error *err = NULL;
	memset(&fp, 0, sizeof(fp));
	int r = msb_sandbox_fingerprint(sb, &supported, &fp, &err);
	expect_refusal(r, err, MSB_E_RUNTIME, "cannot attest", "tmpfs on /tmp");
	cr_assert(strstr(msb_error_message(err), "`/tmp`"), "%s", msb_error_message(err));
	msb_error_free(err);
	msb_sandbox_free(sb);
}

/* ---- reset (9.28, 9.29, 4.23) ----------------------------------------------------- */

Test(ns_images, reset_returns_a_dirty_sandbox_to_pristine)
{
	make_backend(busybox_image(), 0);
	const msb_declarations *d = msb_backend_declarations(backend);
	cr_assert(d->capabilities & MSB_CAP_SNAPSHOT, "ns declares SNAPSHOT");
	msb_sandbox *sb = acquire_ok("/agent");
	char id[128];
	snprintf(id, sizeof(id), "%s", msb_sandbox_instance_id(sb));
	pid_t init_before = init_pid();
	sh(sb, "echo x > /tmp/f && rm /etc/issue && echo o > out && echo s > /dev/shm/s && "
	       "sleep 1000 </dev/null >/dev/null 2>&1 &");
	msb_fingerprint fp;
	fingerprint(sb, &fp);
	cr_assert(strv_len(fp.changed_paths) > 0 && strv_len(fp.running_programs) == 1);
	msb_fingerprint_clear(&fp);

	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_reset(sb, 30, &err), 0, "reset: %s", msb_error_message(err));
	fingerprint(sb, &fp);
	cr_assert_eq(strv_len(fp.changed_paths), 0, "changed after reset: %s",
		     joined(fp.changed_paths));
	cr_assert_eq(strv_len(fp.running_programs), 0, "programs after reset: %s",
		     joined(fp.running_programs));
	msb_fingerprint_clear(&fp);
	cr_assert_str_eq(msb_sandbox_instance_id(sb), id, "9.29: the same instance, restored");
	cr_assert_neq(init_pid(), init_before, "a new init");
	/* It serves, on this handle and on a new acquire, with the image as built. */
	cr_assert_str_eq(sh(sb, "cat /etc/issue; find /tmp /dev/shm . -mindepth 1 | wc -l; "
				"pidof sleep || echo none"),
			 "msb test image\n0\nnone\n");
	msb_sandbox *again = acquire_ok("/agent");
	cr_assert_str_eq(msb_sandbox_instance_id(again), id);
	msb_sandbox_free(again);

	/* Reset twice in a row, and on a clean sandbox: still pristine. */
	cr_assert_eq(msb_sandbox_reset(sb, 30, &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(msb_sandbox_reset(sb, 30, &err), 0, "%s", msb_error_message(err));
	fingerprint(sb, &fp);
	cr_assert_eq(strv_len(fp.changed_paths) + strv_len(fp.running_programs), 0);
	msb_fingerprint_clear(&fp);
	cr_assert_eq(count_sandboxes(), 1);
	msb_sandbox_free(sb);
}

/* 9.28: reset is bounded by its timeout; the restart it started still
 * completes, and the sandbox is pristine and serving afterwards. */
Test(ns_images, reset_is_bounded_by_its_timeout)
{
	make_backend(busybox_image(), 0);
	msb_sandbox *sb = acquire_ok("/agent");
	sh(sb, "echo x > /tmp/f && sleep 1000 </dev/null >/dev/null 2>&1 &");
	msb_error *err = NULL;
	int64_t t0 = now_ms();
	int r = msb_sandbox_reset(sb, 0.001, &err);
	int64_t took = now_ms() - t0;
	expect_refusal(r, err, MSB_E_TIMEOUT, "in time", "a 1 ms reset");
	msb_error_free(err);
	cr_assert(took < 500, "the caller got control back after %lld ms", (long long)took);
	msb_fingerprint fp = {0};
	bool clean = false;
	for (int i = 0; i < 500 && !clean; i++) {
		bool supported = false;
		err = NULL;
		if (msb_sandbox_fingerprint(sb, &supported, &fp, &err) == 0) {
			clean = strv_len(fp.changed_paths) + strv_len(fp.running_programs) == 0;
			msb_fingerprint_clear(&fp);
		}
		msb_error_free(err);
		if (!clean)
			usleep(20000);
	}
	cr_assert(clean, "the restart completed");
	cr_assert_str_eq(sh(sb, "echo serving"), "serving\n");
	msb_sandbox_free(sb);
}

/* Reset of the `host` image too: its root is an overlay like the others. */
Test(ns_images, reset_of_the_host_image)
{
	make_backend("host", 0);
	msb_sandbox *sb = acquire_ok("/agent");
	sh(sb, "echo x > /tmp/f && echo y > /root/g && echo o > out");
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_reset(sb, 30, &err), 0, "reset: %s", msb_error_message(err));
	cr_assert_str_eq(sh(sb, "find /tmp /root . -mindepth 1 | wc -l"), "0\n", "nothing left");
	msb_fingerprint fp;
	fingerprint(sb, &fp);
	cr_assert_eq(strv_len(fp.changed_paths) + strv_len(fp.running_programs), 0, "%s",
		     joined(fp.changed_paths));
	msb_fingerprint_clear(&fp);
	msb_sandbox_free(sb);
}

/* ---- the writable layer's cap ------------------------------------------------------ */

Test(ns_images, writable_layer_full_is_enospc_inside)
{
	make_backend(busybox_image(), 4u << 20);
	msb_sandbox *sb = acquire_ok("/agent");
	int status = 0;
	char errout[1024];
	run(sb, "dd if=/dev/zero of=/tmp/big bs=1048576 count=16", &status, errout, sizeof(errout));
	cr_assert_neq(status, 0, "16 MiB into a 4 MiB layer");
	cr_assert(strstr(errout, "No space left on device"), "stderr: %s", errout);
	/* The sandbox keeps serving; space comes back once the file goes. */
	cr_assert_str_eq(sh(sb, "rm /tmp/big && echo ok > /tmp/small && cat /tmp/small"), "ok\n");
	msb_sandbox_free(sb);
}
