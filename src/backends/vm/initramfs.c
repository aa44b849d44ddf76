/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest's initramfs, built by msb: msb-agent as /init, the kernel
 * modules the init loads (vm_init.c) under /msb/modules in load order, and
 * the init's mount points. Stored once per content under
 * <cache>/initramfs/<sha256>.cpio; every VM of the same agent and kernel
 * shares it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "util/fs.h"
#include "util/sha256.h"
#include "vm_int.h"

/* What vm_init.c needs beyond the kernel's built-ins, by module name. */
const char *const msb_vm__guest_modules[] = {
	"virtio_mmio", "virtio_console", "virtio_blk", "virtio_balloon", "erofs", "overlay", NULL};

#define MAX_MODULES 32
#define MAX_MODULE_BYTES (16u << 20)
#define MAX_AGENT_BYTES (64u << 20)
#define MAX_DEP_BYTES (16u << 20)

/* "kernel/fs/erofs/erofs.ko" -> "erofs" ('-' read as '_'). */
static void module_name(const char *path, size_t len, char *out, size_t size)
{
	const char *base = path;
	for (size_t i = 0; i < len; i++)
		if (path[i] == '/')
			base = path + i + 1;
	size_t n = (size_t)(path + len - base);
	const char *dot = memchr(base, '.', n);
	if (dot)
		n = (size_t)(dot - base);
	if (n >= size)
		n = size - 1;
	for (size_t i = 0; i < n; i++)
		out[i] = base[i] == '-' ? '_' : base[i];
	out[n] = '\0';
}

/* The modules.dep line of `name`: its path and its dependencies. */
static const char *find_line(const char *dep, const char *name, size_t *line_len)
{
	for (const char *p = dep; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		const char *colon = memchr(p, ':', len);
		if (colon) {
			char n[128];
			module_name(p, (size_t)(colon - p), n, sizeof(n));
			if (strcmp(n, name) == 0) {
				*line_len = len;
				return p;
			}
		}
		p += len + (nl ? 1 : 0);
	}
	return NULL;
}

/* modules.builtin: one path per line, no colon. */
static bool is_builtin(const char *builtin, const char *name)
{
	for (const char *p = builtin; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char n[128];
		module_name(p, len, n, sizeof(n));
		if (strcmp(n, name) == 0)
			return true;
		p += len + (nl ? 1 : 0);
	}
	return false;
}

struct plan {
	char *paths[MAX_MODULES]; /* relative to the modules dir, load order */
	char *names[MAX_MODULES];
	size_t n;
};

static void plan_clear(struct plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->paths[i]);
		free(p->names[i]);
	}
	p->n = 0;
}

static int plan_add(struct plan *p, const char *dep, const char *builtin, const char *name,
		    int depth, msb_error **err)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->names[i], name) == 0)
			return 0;
	if (depth > 16)
		return msb_error_set(err, MSB_E_VALUE, "vm: module dependencies of `%s` loop",
				     name);
	size_t len = 0;
	const char *line = find_line(dep, name, &len);
	if (!line) {
		if (is_builtin(builtin, name))
			return 0;
		return msb_error_set(err, MSB_E_VALUE,
				     "vm: the guest kernel has no module `%s`, built in or not",
				     name);
	}
	const char *colon = memchr(line, ':', len);
	_cleanup_free_ char *path = msb__strndup(line, (size_t)(colon - line));
	_cleanup_free_ char *deps = msb__strndup(colon + 1, len - (size_t)(colon + 1 - line));
	if (!path || !deps)
		return msb__error_nomem(err);
	/* Dependencies are listed nearest first: load them deepest first. */
	char *words[MAX_MODULES];
	size_t nw = 0;
	for (char *w = deps; *w && nw < MAX_MODULES;) {
		while (*w == ' ')
			w++;
		if (!*w)
			break;
		words[nw++] = w;
		while (*w && *w != ' ')
			w++;
		if (*w)
			*w++ = '\0';
	}
	for (size_t i = nw; i-- > 0;) {
		char n[128];
		module_name(words[i], strlen(words[i]), n, sizeof(n));
		int r = plan_add(p, dep, builtin, n, depth + 1, err);
		if (r < 0)
			return r;
	}
	if (p->n >= MAX_MODULES)
		return msb_error_set(err, MSB_E_VALUE, "vm: too many guest modules");
	size_t pl = strlen(path);
	if (pl > 3 && strcmp(path + pl - 3, ".ko") != 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "vm: module `%s` is compressed (`%s`): the guest init loads "
				     "plain .ko files only",
				     name, path);
	p->names[p->n] = strdup(name);
	p->paths[p->n] = TAKE_PTR(path);
	if (!p->names[p->n]) {
		free(p->paths[p->n]);
		return msb__error_nomem(err);
	}
	p->n++;
	return 0;
}

static int add_file(msb_buf *b, const char *name, const char *path, size_t max, msb_error **err)
{
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	int r = msb__read_file_at(AT_FDCWD, path, max, &data, &len);
	if (r < 0)
		return msb__error_errno(err, r, "vm: cannot read `%s`", path);
	if (msb_vm__cpio_add(b, name, S_IFREG | 0755, data, len) < 0)
		return msb__error_nomem(err);
	return 0;
}

int msb_vm__initramfs(const char *cache, const char *agent_path, const char *modules_dir,
		      char **out, msb_error **err)
{
	_cleanup_free_ char *dep_path = msb__asprintf("%s/modules.dep", modules_dir);
	_cleanup_free_ char *bi_path = msb__asprintf("%s/modules.builtin", modules_dir);
	if (!dep_path || !bi_path)
		return msb__error_nomem(err);
	_cleanup_free_ char *dep = NULL, *builtin = NULL;
	int r = msb__read_file_at(AT_FDCWD, dep_path, MAX_DEP_BYTES, &dep, NULL);
	if (r < 0)
		return msb__error_errno(err, r, "vm: cannot read `%s`", dep_path);
	msb__read_file_at(AT_FDCWD, bi_path, MAX_DEP_BYTES, &builtin, NULL);

	struct plan plan = {0};
	for (size_t i = 0; msb_vm__guest_modules[i]; i++)
		if ((r = plan_add(&plan, dep, builtin, msb_vm__guest_modules[i], 0, err)) < 0) {
			plan_clear(&plan);
			return r;
		}

	msb_buf b = MSB_BUF_INIT;
	static const char *const dirs[] = {"dev",	  "proc",      "sys",	 "msb",
					   "msb/modules", "msb/lower", "msb/rw", "msb/root"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (msb_vm__cpio_add(&b, dirs[i], S_IFDIR | 0755, NULL, 0) < 0)
			r = -ENOMEM;
	if (r == 0)
		r = add_file(&b, "init", agent_path, MAX_AGENT_BYTES, err);
	for (size_t i = 0; r == 0 && i < plan.n; i++) {
		_cleanup_free_ char *src = msb__asprintf("%s/%s", modules_dir, plan.paths[i]);
		_cleanup_free_ char *dst =
			msb__asprintf("msb/modules/%02zu-%s.ko", i, plan.names[i]);
		if (!src || !dst)
			r = msb__error_nomem(err);
		else
			r = add_file(&b, dst, src, MAX_MODULE_BYTES, err);
	}
	plan_clear(&plan);
	if (r == 0 && msb_vm__cpio_finish(&b) < 0)
		r = -ENOMEM;
	if (r == -ENOMEM || (r == 0 && b.oom))
		r = msb__error_nomem(err);
	if (r < 0) {
		msb__buf_free(&b);
		return r;
	}

	char hex[65];
	msb__sha256_hex(b.data, b.len, hex);
	_cleanup_free_ char *dir = msb__asprintf("%s/initramfs", cache);
	_cleanup_free_ char *name = msb__asprintf("%s.cpio", hex);
	if (!dir || !name) {
		msb__buf_free(&b);
		return msb__error_nomem(err);
	}
	r = msb__mkdir_p(dir, 0755);
	_cleanup_close_ int dfd =
		r < 0 ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (dfd < 0) {
		msb__buf_free(&b);
		return msb__error_errno(err, r < 0 ? r : -errno, "vm: cannot create `%s`", dir);
	}
	/* Content-addressed: present with the right size is the same bytes. */
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
	    (size_t)st.st_size != b.len)
		r = msb__write_file_atomic_at(dfd, name, b.data, b.len, 0644);
	msb__buf_free(&b);
	if (r < 0)
		return msb__error_errno(err, r, "vm: cannot store the initramfs in `%s`", dir);
	*out = msb__asprintf("%s/%s", dir, name);
	return *out ? 0 : msb__error_nomem(err);
}
