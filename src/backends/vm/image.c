/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `host` image of a VM: a read-only erofs disk holding host programs and
 * everything they need to run, built by msb and stored once per content
 * under <cache>/images/<sha256>.erofs (vm_int.h has the rules).
 *
 * The whole host /usr is not copied: on the machines msb runs on it is many
 * gigabytes (toolchains, SDKs). The image is the closure of the programs
 * named - each path resolved one component at a time so that every symlink
 * on the way (a merged-/usr /bin, an alternatives link, a versioned shared
 * object) is kept as a symlink - plus python3's standard library when
 * python3 is one of them, and a synthesized /etc. The digest covers every
 * path, type, mode, size, mtime and link target that goes in, so a host
 * upgrade makes a new image and the old one keeps serving the VMs that use it.
 */
#include <dirent.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "backends/ns/oci.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "vm_int.h"

#define IMAGE_FORMAT "msb-vm-host-image-1"
#define MAX_ENTRIES 200000
#define MAX_LINK_DEPTH 40

enum kind { K_DIR, K_FILE, K_LINK };

struct entry {
	char *path; /* absolute host path, normalised */
	enum kind kind;
	char *target; /* K_LINK */
	mode_t mode;
	uint64_t size;
	int64_t mtime_ns;
};

struct image {
	struct entry *v;
	size_t n, cap;
	char **elf_done; /* real paths whose dependencies were added */
	msb_error **err;
};

static void image_clear(struct image *im)
{
	for (size_t i = 0; i < im->n; i++) {
		free(im->v[i].path);
		free(im->v[i].target);
	}
	free(im->v);
	msb__strv_freep(&im->elf_done);
}

static int record(struct image *im, const char *path, const struct stat *st, const char *target)
{
	if (im->n >= MAX_ENTRIES)
		return msb_error_set(im->err, MSB_E_VALUE, "vm: host image: more than %d entries",
				     MAX_ENTRIES);
	if (im->n == im->cap) {
		size_t cap = im->cap ? im->cap * 2 : 1024;
		struct entry *v = msb__reallocarray(im->v, cap, sizeof(*v));
		if (!v)
			return msb__error_nomem(im->err);
		im->v = v;
		im->cap = cap;
	}
	struct entry *e = &im->v[im->n];
	memset(e, 0, sizeof(*e));
	e->kind = S_ISDIR(st->st_mode) ? K_DIR : S_ISLNK(st->st_mode) ? K_LINK : K_FILE;
	e->mode = st->st_mode & 0777; /* never setuid/setgid in the guest */
	e->size = e->kind == K_FILE ? (uint64_t)st->st_size : 0;
	e->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	e->path = strdup(path);
	e->target = target ? strdup(target) : NULL;
	if (!e->path || (target && !e->target)) {
		free(e->path);
		free(e->target);
		return msb__error_nomem(im->err);
	}
	im->n++;
	return 0;
}

/* Lexical normalisation of an absolute path ("." and ".." and "//"). */
static char *normalise(const char *path)
{
	size_t len = strlen(path);
	char *out = malloc(len + 2);
	if (!out)
		return NULL;
	size_t o = 0;
	for (const char *p = path; *p;) {
		while (*p == '/')
			p++;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t n = (size_t)(p - s);
		if (n == 0 || (n == 1 && s[0] == '.'))
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			continue;
		}
		out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return out;
}

/*
 * Add `path` and everything on the way to it: each directory, each symlink
 * (followed), and the file or directory it ends at. *real gets the path it
 * resolves to. -ENOENT (no error set) when it does not exist.
 */
static int add_path(struct image *im, const char *path, int depth, char **real)
{
	if (depth > MAX_LINK_DEPTH)
		return msb_error_set(im->err, MSB_E_VALUE, "vm: host image: `%s`: too many links",
				     path);
	_cleanup_free_ char *norm = normalise(path);
	if (!norm)
		return msb__error_nomem(im->err);
	size_t len = strlen(norm);
	for (size_t i = 1; i <= len; i++) {
		if (i < len && norm[i] != '/')
			continue;
		char saved = norm[i];
		norm[i] = '\0';
		struct stat st;
		if (lstat(norm, &st) < 0) {
			norm[i] = saved;
			return -ENOENT;
		}
		if (S_ISLNK(st.st_mode)) {
			char target[4096];
			ssize_t n = readlink(norm, target, sizeof(target) - 1);
			if (n <= 0) {
				norm[i] = saved;
				return -ENOENT;
			}
			target[n] = '\0';
			int r = record(im, norm, &st, target);
			if (r < 0)
				return r;
			char *slash = strrchr(norm, '/');
			_cleanup_free_ char *next = NULL;
			const char *rest = saved ? norm + i + 1 : "";
			if (target[0] == '/')
				next = msb__asprintf("%s/%s", target, rest);
			else
				next = msb__asprintf("%.*s/%s/%s", (int)(slash - norm), norm,
						     target, rest);
			if (!next)
				return msb__error_nomem(im->err);
			return add_path(im, next, depth + 1, real);
		}
		if (i == len || S_ISDIR(st.st_mode)) {
			if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
				norm[i] = saved;
				return -ENOENT; /* devices, fifos: never in an image */
			}
			int r = record(im, norm, &st, NULL);
			if (r < 0)
				return r;
		} else {
			norm[i] = saved;
			return -ENOENT; /* a file in the middle of the path */
		}
		norm[i] = saved;
	}
	*real = TAKE_PTR(norm);
	return 0;
}

static const char *const lib_dirs[] = {"/lib/x86_64-linux-gnu",
				       "/usr/lib/x86_64-linux-gnu",
				       "/lib64",
				       "/usr/lib64",
				       "/lib",
				       "/usr/lib",
				       NULL};

static int add_elf(struct image *im, const char *real, int depth);

static int add_lib(struct image *im, const char *name, int depth)
{
	for (size_t i = 0; lib_dirs[i]; i++) {
		_cleanup_free_ char *p = msb__asprintf("%s/%s", lib_dirs[i], name);
		if (!p)
			return msb__error_nomem(im->err);
		_cleanup_free_ char *real = NULL;
		int r = add_path(im, p, 0, &real);
		if (r == -ENOENT)
			continue;
		if (r < 0)
			return r;
		return add_elf(im, real, depth + 1);
	}
	return 0; /* not on this host: the program fails the way it would here */
}

/* The shared objects an ELF file needs, transitively. */
static int add_elf(struct image *im, const char *real, int depth)
{
	if (depth > 32 || msb__strv_contains(im->elf_done, real))
		return 0;
	if (msb__strv_push(&im->elf_done, real) < 0)
		return msb__error_nomem(im->err);
	_cleanup_close_ int fd = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	_cleanup_free_ char *interp = NULL;
	_cleanup_strv_ char **needed = NULL;
	int r = msb_vm__elf_deps(fd, &interp, &needed);
	if (r == -ENOEXEC)
		return 0; /* a script or data */
	if (r < 0)
		return msb__error_errno(im->err, r, "vm: host image: read `%s`", real);
	if (interp) {
		_cleanup_free_ char *ireal = NULL;
		r = add_path(im, interp, 0, &ireal);
		if (r == 0)
			r = add_elf(im, ireal, depth + 1);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	for (size_t i = 0; needed && needed[i]; i++)
		if (!strchr(needed[i], '/') && (r = add_lib(im, needed[i], depth)) < 0)
			return r;
	return 0;
}

/* A whole directory tree (python3's standard library), ELF files with their
 * dependencies. */
static int add_tree(struct image *im, const char *dir, int depth)
{
	if (depth > 32)
		return 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (depth == 0 && (!strcmp(de->d_name, "test") || !strcmp(de->d_name, "idlelib"))))
			continue;
		_cleanup_free_ char *p = msb__asprintf("%s/%s", dir, de->d_name);
		if (!p) {
			r = msb__error_nomem(im->err);
			break;
		}
		struct stat st;
		if (lstat(p, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if ((r = record(im, p, &st, NULL)) == 0)
				r = add_tree(im, p, depth + 1);
		} else if (S_ISLNK(st.st_mode) || S_ISREG(st.st_mode)) {
			_cleanup_free_ char *real = NULL;
			r = add_path(im, p, 0, &real);
			if (r == -ENOENT)
				r = 0;
			else if (r == 0 && strstr(de->d_name, ".so"))
				r = add_elf(im, real, 0);
		}
	}
	closedir(d);
	return r;
}

static int add_program(struct image *im, const char *prog)
{
	static const char *const bin_dirs[] = {"/usr/bin", "/usr/sbin", "/bin", "/sbin", NULL};
	for (size_t i = 0; bin_dirs[i] || prog[0] == '/'; i++) {
		_cleanup_free_ char *p =
			prog[0] == '/' ? strdup(prog) : msb__asprintf("%s/%s", bin_dirs[i], prog);
		if (!p)
			return msb__error_nomem(im->err);
		_cleanup_free_ char *real = NULL;
		int r = add_path(im, p, 0, &real);
		if (r == -ENOENT) {
			if (prog[0] == '/')
				break;
			continue;
		}
		if (r < 0)
			return r;
		if ((r = add_elf(im, real, 0)) < 0)
			return r;
		/* python3.N: its standard library and its /etc entries. */
		const char *base = strrchr(real, '/') + 1;
		if (strncmp(base, "python3.", 8) == 0 &&
		    strspn(base + 8, "0123456789") == strlen(base + 8)) {
			_cleanup_free_ char *lib = msb__asprintf("/usr/lib/%s", base);
			_cleanup_free_ char *etc = msb__asprintf("/etc/%s", base);
			_cleanup_free_ char *lreal = NULL, *ereal = NULL;
			if (!lib || !etc)
				return msb__error_nomem(im->err);
			if ((r = add_path(im, lib, 0, &lreal)) == 0)
				r = add_tree(im, lreal, 0);
			if (r < 0 && r != -ENOENT)
				return r;
			if ((r = add_path(im, etc, 0, &ereal)) == 0)
				r = add_tree(im, ereal, 1);
			if (r < 0 && r != -ENOENT)
				return r;
		}
		return 0;
	}
	return msb_error_set(im->err, MSB_E_VALUE, "vm: host image: no program `%s` on this host",
			     prog);
}

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return strcmp(x->path, y->path);
}

/* Sort by path and drop duplicates (a path reached twice is the same). */
static void sort_unique(struct image *im)
{
	qsort(im->v, im->n, sizeof(*im->v), entry_cmp);
	size_t o = 0;
	for (size_t i = 0; i < im->n; i++) {
		if (o > 0 && strcmp(im->v[o - 1].path, im->v[i].path) == 0) {
			free(im->v[i].path);
			free(im->v[i].target);
			continue;
		}
		im->v[o++] = im->v[i];
	}
	im->n = o;
}

/* The synthesized /etc and the guest's mount points. */
static const struct {
	const char *path;
	const char *content; /* NULL: a directory */
	mode_t mode;
} synth[] = {
	{"/dev", NULL, 0755},
	{"/etc", NULL, 0755},
	{"/etc/group", "root:x:0:\nnogroup:x:65534:\n", 0644},
	{"/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost\n", 0644},
	{"/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n", 0644},
	{"/etc/passwd",
	 "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
	 0644},
	{"/etc/resolv.conf", "", 0644},
	{"/home", NULL, 0755},
	{"/proc", NULL, 0555},
	{"/root", NULL, 0700},
	{"/run", NULL, 0755},
	{"/sys", NULL, 0555},
	{"/tmp", NULL, 01777},
	{"/var", NULL, 0755},
	{"/var/tmp", NULL, 01777},
};

static void digest(const struct image *im, char hex[65])
{
	msb_sha256 s;
	msb__sha256_init(&s);
	msb__sha256_update(&s, IMAGE_FORMAT, sizeof(IMAGE_FORMAT));
	for (size_t i = 0; i < sizeof(synth) / sizeof(synth[0]); i++) {
		char line[128];
		int n = snprintf(line, sizeof(line), "S %s %o\n", synth[i].path,
				 (unsigned)synth[i].mode);
		msb__sha256_update(&s, line, (size_t)n);
		if (synth[i].content)
			msb__sha256_update(&s, synth[i].content, strlen(synth[i].content) + 1);
	}
	for (size_t i = 0; i < im->n; i++) {
		const struct entry *e = &im->v[i];
		char line[128];
		int n = snprintf(line, sizeof(line), "%d %o %llu %lld ", (int)e->kind,
				 (unsigned)e->mode, (unsigned long long)e->size,
				 (long long)e->mtime_ns);
		msb__sha256_update(&s, line, (size_t)n);
		msb__sha256_update(&s, e->path, strlen(e->path) + 1);
		if (e->target)
			msb__sha256_update(&s, e->target, strlen(e->target) + 1);
	}
	uint8_t d[32];
	msb__sha256_final(&s, d);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static int copy_file(const char *src, int dfd, const char *name, mode_t mode, uint64_t size)
{
	_cleanup_close_ int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return -errno;
	_cleanup_close_ int out =
		openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	uint64_t done = 0;
	while (done < size) {
		ssize_t n = sendfile(out, in, NULL,
				     size - done > (1u << 30) ? (1u << 30) : size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break; /* shrank meanwhile: the next build sees it */
		done += (uint64_t)n;
	}
	return fchmod(out, mode) < 0 ? -errno : 0;
}

/* Lay the entries out below `root` (a fresh directory). */
static int stage(const struct image *im, const char *root, msb_error **err)
{
	_cleanup_close_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0)
		return msb__error_errno(err, -errno, "vm: host image: open `%s`", root);
	for (size_t i = 0; i < sizeof(synth) / sizeof(synth[0]); i++) {
		const char *rel = synth[i].path + 1;
		int r = 0;
		if (!synth[i].content) {
			if (mkdirat(rfd, rel, 0700) < 0 && errno != EEXIST)
				r = -errno;
			_cleanup_close_ int fd =
				r ? -1 : openat(rfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
			if (r == 0 && (fd < 0 || fchmod(fd, synth[i].mode) < 0))
				r = -errno;
		} else {
			/* All synthesized files are in etc/. */
			_cleanup_close_ int efd =
				openat(rfd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = efd < 0 ? -errno
				    : msb__write_file_atomic_at(
					      efd, strrchr(rel, '/') + 1, synth[i].content,
					      strlen(synth[i].content), synth[i].mode);
		}
		if (r < 0)
			return msb__error_errno(err, r, "vm: host image: make `%s`", synth[i].path);
	}
	for (size_t i = 0; i < im->n; i++) {
		const struct entry *e = &im->v[i];
		const char *rel = e->path + 1;
		if (!*rel)
			continue;
		int r = 0;
		switch (e->kind) {
		case K_DIR:
			if (mkdirat(rfd, rel, 0755) < 0 && errno != EEXIST)
				r = -errno;
			break;
		case K_LINK:
			if (symlinkat(e->target, rfd, rel) < 0 && errno != EEXIST)
				r = -errno;
			break;
		case K_FILE:
			r = copy_file(e->path, rfd, rel, e->mode, e->size);
			if (r == -EEXIST)
				r = 0;
			break;
		}
		if (r < 0)
			return msb__error_errno(err, r, "vm: host image: copy `%s`", e->path);
	}
	return 0;
}

static int run_mkfs(const char *mkfs, const char *out, const char *root, msb_error **err)
{
	const char *argv[] = {(char *)mkfs, "--quiet",	 "--all-root", "-T0",
			      "-x-1",	    (char *)out, (char *)root, NULL};
	pid_t pid = fork();
	if (pid < 0)
		return msb__error_errno(err, -errno, "vm: cannot run `%s`", mkfs);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		extern char **environ;
		execve(mkfs, (char *const *)argv, environ);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return msb__error_errno(err, -errno, "vm: wait for `%s`", mkfs);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "vm: `%s` failed building the host image (status 0x%x)", mkfs,
				     (unsigned)status);
	return 0;
}

int msb_vm__host_image(const char *cache, const char *mkfs, char *const *programs, char **out,
		       msb_error **err)
{
	struct image im = {.err = err};
	int r = 0;
	/* The top-level links of a merged-/usr host, whoever uses them. */
	static const char *const top[] = {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"};
	for (size_t i = 0; r == 0 && i < sizeof(top) / sizeof(top[0]); i++) {
		struct stat st;
		char target[256];
		ssize_t n;
		if (lstat(top[i], &st) == 0 && S_ISLNK(st.st_mode) &&
		    (n = readlink(top[i], target, sizeof(target) - 1)) > 0) {
			target[n] = '\0';
			r = record(&im, top[i], &st, target);
		}
	}
	for (size_t i = 0; r == 0 && programs && programs[i]; i++)
		r = add_program(&im, programs[i]);
	if (r < 0) {
		image_clear(&im);
		return r;
	}
	sort_unique(&im);
	char hex[65];
	digest(&im, hex);

	_cleanup_free_ char *dir = msb__asprintf("%s/images", cache);
	_cleanup_free_ char *name = msb__asprintf("%s.erofs", hex);
	_cleanup_free_ char *path = msb__asprintf("%s/images/%s.erofs", cache, hex);
	if (!dir || !name || !path) {
		image_clear(&im);
		return msb__error_nomem(err);
	}
	if ((r = msb__mkdir_p(dir, 0755)) < 0) {
		image_clear(&im);
		return msb__error_errno(err, r, "vm: cannot create `%s`", dir);
	}
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || flock(dfd, LOCK_EX) < 0) {
		image_clear(&im);
		return msb__error_errno(err, -errno, "vm: cannot lock `%s`", dir);
	}
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
		image_clear(&im);
		*out = TAKE_PTR(path);
		return 0;
	}
	_cleanup_free_ char *build = msb__asprintf("%s/.build-%s", dir, hex);
	_cleanup_free_ char *root = msb__asprintf("%s/.build-%s/root", dir, hex);
	_cleanup_free_ char *tmp = msb__asprintf("%s/.build-%s/image", dir, hex);
	if (!build || !root || !tmp) {
		image_clear(&im);
		return msb__error_nomem(err);
	}
	msb__rm_rf(build);
	if ((r = msb__mkdir_p(root, 0700)) < 0)
		r = msb__error_errno(err, r, "vm: cannot create `%s`", root);
	if (r == 0)
		r = stage(&im, root, err);
	image_clear(&im);
	if (r == 0)
		r = run_mkfs(mkfs, tmp, root, err);
	if (r == 0 && rename(tmp, path) < 0)
		r = msb__error_errno(err, -errno, "vm: cannot store `%s`", path);
	msb__rm_rf(build);
	if (r < 0)
		return r;
	*out = TAKE_PTR(path);
	return 0;
}

/* ---- dir:PATH ------------------------------------------------------------------- */

#define DIR_FORMAT "msb-vm-dir-image-1"
#define MAX_DIR_DEPTH 256

/* The manifest digest of a tree: every entry's relative path, type, mode,
 * size, mtime and link target, never following a link. */
static int hash_tree(msb_sha256 *s, int dfd, const char *rel, int depth, size_t *count,
		     msb_error **err)
{
	if (depth > MAX_DIR_DEPTH)
		return msb_error_set(err, MSB_E_VALUE, "vm: dir image: deeper than %d levels",
				     MAX_DIR_DEPTH);
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return msb__error_errno(err, -errno, "vm: dir image: open `%s`", rel);
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return msb__error_errno(err, -errno, "vm: dir image: open `%s`", rel);
	}
	/* Sorted, so the digest does not depend on the directory's order. */
	char **names = NULL;
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = msb__strv_push(&names, de->d_name);
	if (r < 0) {
		closedir(d);
		msb__strv_freep(&names);
		return msb__error_nomem(err);
	}
	msb__strv_sort(names);
	for (size_t i = 0; r == 0 && names && names[i]; i++) {
		if (++*count > MAX_ENTRIES) {
			r = msb_error_set(err, MSB_E_VALUE, "vm: dir image: more than %d entries",
					  MAX_ENTRIES);
			break;
		}
		struct stat st;
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		char line[160];
		int n = snprintf(line, sizeof(line), "%o %llu %lld.%09ld %u %u ",
				 (unsigned)st.st_mode, (unsigned long long)st.st_size,
				 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
				 (unsigned)major(st.st_rdev), (unsigned)minor(st.st_rdev));
		msb__sha256_update(s, line, (size_t)n);
		msb__sha256_update(s, rel, strlen(rel) + 1);
		msb__sha256_update(s, names[i], strlen(names[i]) + 1);
		if (S_ISLNK(st.st_mode)) {
			char target[4096];
			ssize_t tn = readlinkat(dirfd(d), names[i], target, sizeof(target));
			if (tn > 0)
				msb__sha256_update(s, target, (size_t)tn);
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), names[i],
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				continue;
			_cleanup_free_ char *srel = msb__asprintf("%s/%s", rel, names[i]);
			r = srel ? hash_tree(s, sub, srel, depth + 1, count, err)
				 : msb__error_nomem(err);
			close(sub);
		}
	}
	closedir(d);
	msb__strv_freep(&names);
	return r;
}

int msb_vm__dir_image(const char *cache, const char *mkfs, const char *path, char **out,
		      msb_error **err)
{
	if (path[0] != '/' || strcmp(path, "/") == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "vm image `dir:%s`: an absolute directory other than `/`",
				     path);
	_cleanup_close_ int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return msb__error_errno(err, -errno, "vm image `dir:%s`", path);
	msb_sha256 s;
	msb__sha256_init(&s);
	msb__sha256_update(&s, DIR_FORMAT, sizeof(DIR_FORMAT));
	size_t count = 0;
	int r = hash_tree(&s, root, "", 0, &count, err);
	if (r < 0)
		return r;
	uint8_t d[32];
	msb__sha256_final(&s, d);
	char hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	_cleanup_free_ char *dir = msb__asprintf("%s/images", cache);
	_cleanup_free_ char *name = msb__asprintf("dir-%s.erofs", hex);
	_cleanup_free_ char *dst = msb__asprintf("%s/images/dir-%s.erofs", cache, hex);
	_cleanup_free_ char *tmp = msb__asprintf("%s/images/.dir-%s.tmp", cache, hex);
	if (!dir || !name || !dst || !tmp)
		return msb__error_nomem(err);
	if ((r = msb__mkdir_p(dir, 0755)) < 0)
		return msb__error_errno(err, r, "vm: cannot create `%s`", dir);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || flock(dfd, LOCK_EX) < 0)
		return msb__error_errno(err, -errno, "vm: cannot lock `%s`", dir);
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
		*out = TAKE_PTR(dst);
		return 0;
	}
	unlink(tmp);
	r = run_mkfs(mkfs, tmp, path, err);
	if (r == 0 && rename(tmp, dst) < 0)
		r = msb__error_errno(err, -errno, "vm: cannot store `%s`", dst);
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	*out = TAKE_PTR(dst);
	return 0;
}

/* ---- oci:PATH[:TAG] --------------------------------------------------------------- */

#define OCI_FORMAT "msb-vm-oci-image-1"

/* In a private mount namespace: <stage>/<i> bound read-only to layer i, then
 * mkfs.erofs of <stage>, keeping xattrs (user.overlay.opaque). */
static int mkfs_layers(const char *mkfs, const char *out, const char *stage, char **layers,
		       size_t n, msb_error **err)
{
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *d = msb__asprintf("%s/%zu", stage, i);
		if (!d)
			return msb__error_nomem(err);
		if (mkdir(d, 0755) < 0 && errno != EEXIST)
			return msb__error_errno(err, -errno, "vm: oci image: make `%s`", d);
	}
	pid_t pid = fork();
	if (pid < 0)
		return msb__error_errno(err, -errno, "vm: cannot run `%s`", mkfs);
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(126);
		for (size_t i = 0; i < n; i++) {
			char d[4096];
			snprintf(d, sizeof(d), "%s/%zu", stage, i);
			if (mount(layers[i], d, NULL, MS_BIND | MS_REC, NULL) < 0 ||
			    mount(NULL, d, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0)
				_exit(126);
		}
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		const char *argv[] = {(char *)mkfs, "--quiet",	   "--all-root", "-T0",
				      (char *)out,  (char *)stage, NULL};
		extern char **environ;
		execve(mkfs, (char *const *)argv, environ);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return msb__error_errno(err, -errno, "vm: wait for `%s`", mkfs);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "vm: `%s` failed building the oci image (status 0x%x)", mkfs,
				     (unsigned)status);
	return 0;
}

int msb_vm__oci_image(const char *cache, const char *mkfs, const char *image, char **out,
		      size_t *n_layers, msb_error **err)
{
	_cleanup_free_ char *unpacked = msb__asprintf("%s/oci", cache);
	if (!unpacked)
		return msb__error_nomem(err);
	/* Ownership is normalised by --all-root: no shift. */
	msb_oci_owner owner = {.shift = false, .id_base = 0};
	_cleanup_strv_ char **layers = NULL;
	size_t n = 0;
	int r = msb_ns__oci_prepare(image, unpacked, &owner, NULL, &layers, &n, err);
	if (r < 0)
		return r;
	if (n == 0 || n > 64)
		return msb_error_set(err, MSB_E_VALUE,
				     "vm image `%s`: %zu layers (1 to 64 are served)", image, n);
	/* The layers' directories are named by their digests: the image is
	 * exactly those layers in that order. */
	msb_sha256 s;
	msb__sha256_init(&s);
	msb__sha256_update(&s, OCI_FORMAT, sizeof(OCI_FORMAT));
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(layers[i], '/');
		base = base ? base + 1 : layers[i];
		msb__sha256_update(&s, base, strlen(base) + 1);
	}
	uint8_t d[32];
	msb__sha256_final(&s, d);
	char hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	_cleanup_free_ char *dir = msb__asprintf("%s/images", cache);
	_cleanup_free_ char *name = msb__asprintf("oci-%s.erofs", hex);
	_cleanup_free_ char *dst = msb__asprintf("%s/images/oci-%s.erofs", cache, hex);
	_cleanup_free_ char *stage = msb__asprintf("%s/images/.oci-%s", cache, hex);
	_cleanup_free_ char *tmp = msb__asprintf("%s/images/.oci-%s.tmp", cache, hex);
	if (!dir || !name || !dst || !stage || !tmp)
		return msb__error_nomem(err);
	if ((r = msb__mkdir_p(dir, 0755)) < 0)
		return msb__error_errno(err, r, "vm: cannot create `%s`", dir);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || flock(dfd, LOCK_EX) < 0)
		return msb__error_errno(err, -errno, "vm: cannot lock `%s`", dir);
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
		msb__rm_rf(stage);
		unlink(tmp);
		if (mkdir(stage, 0700) < 0)
			return msb__error_errno(err, -errno, "vm: cannot create `%s`", stage);
		r = mkfs_layers(mkfs, tmp, stage, layers, n, err);
		if (r == 0 && rename(tmp, dst) < 0)
			r = msb__error_errno(err, -errno, "vm: cannot store `%s`", dst);
		msb__rm_rf(stage);
		unlink(tmp);
		if (r < 0)
			return r;
	}
	*out = TAKE_PTR(dst);
	*n_layers = n;
	return 0;
}
