/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `vm` backend's templates (docs/internals/vm.md, "Snapshots"): one VM
 * per template configuration (kernel, initramfs, image, memory, vCPUs, the
 * guest's limits) is booted once in a RAM file of its own and saved by its
 * shim - the RAM file as it is, the devices in a small state file
 * (x-ignore-shared) - and every new VM of that configuration restored from
 * the two: the state read anew, the RAM mapped private from one sealed copy
 * per backend, so restored VMs share every page none of them wrote. The
 * host name and the identity are not in the template: each restored VM gets
 * its own from its shim's first SESSION record.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "util/fs.h"
#include "util/json.h"
#include "util/sha256.h"
#include "vm_backend.h"

/* The template's name: in its host name (replaced per VM) and its jail id. */
#define TEMPLATE_NAME "msb-template"
#define SNAPSHOT_FORMAT "msb-vm-snapshot 2"

/* The configuration's digest, with what qemu and the kernel are (a new
 * package at the same path makes a stale state: a new template). */
static int template_digest(const vm_backend *b, const char *cfg, char hex[65])
{
	struct stat q, k;
	if (stat(b->kvm ? b->host.qemu_kvm : b->host.qemu, &q) < 0 || stat(b->host.kernel, &k) < 0)
		return -errno;
	_cleanup_free_ char *text = msb__asprintf(
		"%s\n%lld.%ld %lld\n%lld.%ld %lld\n%s", SNAPSHOT_FORMAT,
		(long long)q.st_mtim.tv_sec, q.st_mtim.tv_nsec, (long long)q.st_size,
		(long long)k.st_mtim.tv_sec, k.st_mtim.tv_nsec, (long long)k.st_size, cfg);
	if (!text)
		return -ENOMEM;
	msb__sha256_hex(text, strlen(text), hex);
	return 0;
}

/* Boot the template once and have its shim save it to `path`. */
static int make_template(const vm_backend *b, const char *cfg, const char *hex, const char *path,
			 const char *ram, msb_error **err)
{
	_cleanup_free_ char *dir = msb__asprintf("%s/tmpl-%.16s", b->state_dir, hex);
	if (!dir)
		return msb__error_nomem(err);
	msb__rm_rf_at(AT_FDCWD, dir);
	if (mkdir(dir, 0700) < 0)
		return msb__error_errno(err, errno, "vm: cannot create `%s`", dir);
	json_t *o = json_loads(cfg, 0, NULL);
	if (!o || json_object_set_new(o, "save_to", json_string(path)) < 0 ||
	    json_object_set_new(o, "save_ram_to", json_string(ram)) < 0) {
		json_decref(o);
		return msb__error_nomem(err);
	}
	_cleanup_free_ char *text = msb__json_dump(o);
	json_decref(o);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = !text ? -ENOMEM : dfd < 0 ? -errno : 0;
	if (r == 0)
		r = msb__write_file_atomic_at(dfd, "shim.json", text, strlen(text), 0600);
	if (r < 0) {
		msb__rm_rf_at(AT_FDCWD, dir);
		return msb__error_errno(err, r, "vm: cannot write the template's configuration");
	}
	r = msb_vm__start_shim(b, dir, b->start_timeout, NULL, -1, err);
	/* The shim removed what it made (it exits once saved); the rest. */
	msb_vm__purge(dir, true, NULL);
	msb__rm_rf_at(AT_FDCWD, dir);
	if (r < 0)
		return msb_error_wrap(err, "vm: the template could not be saved");
	return 0;
}

/* What a template was made of, one line each ("SIZE\tSEC\tNSEC\tPATH"):
 * written beside it before it is made; a template whose inputs changed or
 * went (a new qemu or kernel package, a rebuilt initramfs or image) is
 * stale and removed when another template is made. */
static char *inputs_text(const vm_backend *b)
{
	const char *paths[] = {b->kvm ? b->host.qemu_kvm : b->host.qemu, b->host.kernel,
			       b->initramfs, b->disk};
	msb_buf t = MSB_BUF_INIT;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct stat st;
		if (paths[i] && stat(paths[i], &st) == 0)
			msb__buf_printf(&t, "%lld\t%lld\t%ld\t%s\n", (long long)st.st_size,
					(long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, paths[i]);
	}
	return msb__buf_steal_str(&t);
}

/* Every input recorded in `text` is still what it was. */
static bool inputs_current(char *text)
{
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		long long size, sec;
		long nsec;
		int off = 0;
		struct stat st;
		if (sscanf(line, "%lld\t%lld\t%ld\t%n", &size, &sec, &nsec, &off) != 3 ||
		    off == 0 || stat(line + off, &st) < 0 || st.st_size != size ||
		    st.st_mtim.tv_sec != sec || st.st_mtim.tv_nsec != nsec)
			return false;
	}
	return true;
}

static void remove_template(int dfd, const char *hex)
{
	static const char *const ext[] = {"state", "ram", "inputs", "lock"};
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		char name[96];
		snprintf(name, sizeof(name), "%.64s.%s", hex, ext[i]);
		unlinkat(dfd, name, 0);
	}
}

void msb_vm__template_remove(const char *state)
{
	const char *slash = strrchr(state, '/');
	const char *dot = strrchr(state, '.');
	if (!slash || !dot || dot - slash - 1 != 64)
		return;
	_cleanup_free_ char *dir = strndup(state, (size_t)(slash - state));
	_cleanup_close_ int dfd =
		dir ? open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	char hex[65];
	memcpy(hex, slash + 1, 64);
	hex[64] = '\0';
	if (dfd >= 0)
		remove_template(dfd, hex);
}

/* A template's state is there, or someone is making it (holds its lock):
 * else what is left of it (a RAM file whose state was removed) is not. */
static bool template_whole(int dfd, const char *hex)
{
	char name[96];
	snprintf(name, sizeof(name), "%s.state", hex);
	if (faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return true;
	snprintf(name, sizeof(name), "%s.lock", hex);
	_cleanup_close_ int lfd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	return lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) < 0;
}

/* `<hex>.ram.<pid>.tmp` or `<hex>.state.<pid>.tmp` of a template shim that
 * is gone (killed before it could remove them). */
static bool tmp_of_dead_shim(const char *name)
{
	size_t len = strlen(name);
	if (len < 5 || strcmp(name + len - 4, ".tmp") != 0)
		return false;
	const char *p = name + len - 4;
	while (p > name && p[-1] >= '0' && p[-1] <= '9')
		p--;
	if (p == name + len - 4 || p[-1] != '.')
		return false;
	long pid = strtol(p, NULL, 10);
	return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* Remove the templates of older inputs, what is left of a template whose
 * state went, the temporary files of a killed template shim, and states of
 * an older format (no inputs recorded); never `keep`. */
static void sweep_stale(const char *dir, const char *keep)
{
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int dup = dfd >= 0 ? fcntl(dfd, F_DUPFD_CLOEXEC, 3) : -1;
	DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
	if (!d) {
		if (dup >= 0)
			close(dup);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *dot = strchr(de->d_name, '.');
		if (!dot || dot - de->d_name != 64 || strncmp(de->d_name, keep, 64) == 0)
			continue;
		char hex[65], name[96];
		memcpy(hex, de->d_name, 64);
		hex[64] = '\0';
		bool stale;
		if (tmp_of_dead_shim(de->d_name)) {
			unlinkat(dfd, de->d_name, 0);
			continue;
		}
		if (strcmp(dot, ".inputs") == 0) {
			_cleanup_free_ char *text = NULL;
			size_t len = 0;
			stale = msb__read_file_at(dfd, de->d_name, 64 * 1024, &text, &len) < 0 ||
				!inputs_current(text) || !template_whole(dfd, hex);
		} else if (strcmp(dot, ".state") == 0) {
			snprintf(name, sizeof(name), "%s.inputs", hex);
			stale = faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0;
		} else {
			continue;
		}
		if (stale)
			remove_template(dfd, hex);
	}
	closedir(d);
}

/* The template's RAM file as a memfd sealed against every write: pages
 * that are zero (or holes) are left out, so the copy is as sparse as the
 * guest's use of its RAM. What restored VMs map private. */
static int load_ram(const char *path, int *out)
{
	_cleanup_close_ int in = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (in < 0 || fstat(in, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size <= 0)
		return -EINVAL;
	_cleanup_close_ int m = memfd_create("msb-vm-template", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (m < 0 || ftruncate(m, st.st_size) < 0)
		return -errno;
	enum { CHUNK = 1 << 20, PAGE = 4096 };
	_cleanup_free_ uint8_t *buf = malloc(CHUNK);
	if (!buf)
		return -ENOMEM;
	off_t off = 0;
	while (off < st.st_size) {
		off_t data = lseek(in, off, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break;
		off_t hole = data < 0 ? -1 : lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		for (off_t p = data; p < hole;) {
			size_t want = hole - p < CHUNK ? (size_t)(hole - p) : CHUNK;
			ssize_t n = pread(in, buf, want, p);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n < 0 ? -errno : -EIO;
			/* Runs of non-zero pages, written as runs. */
			for (size_t i = 0; i < (size_t)n;) {
				size_t end = i;
				while (end < (size_t)n) {
					size_t k = (size_t)n - end < PAGE ? (size_t)n - end : PAGE;
					bool zero = buf[end] == 0 &&
						    memcmp(buf + end, buf + end + 1, k - 1) == 0;
					if (zero)
						break;
					end += k;
				}
				if (end > i &&
				    pwrite(m, buf + i, end - i, p + (off_t)i) != (ssize_t)(end - i))
					return -EIO;
				i = end == i ? i + PAGE : end;
			}
			p += n;
		}
		off = hole;
	}
	if (fcntl(m, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return -errno;
	*out = TAKE_FD(m);
	return 0;
}

int msb_vm__template(vm_backend *b, const msb_spec *spec, const char *work_dir, char **state,
		     int *ram_fd, msb_error **err)
{
	_cleanup_free_ char *cfg = NULL;
	int r = msb_vm__shim_config(b, spec, work_dir, TEMPLATE_NAME, &cfg, err);
	if (r < 0)
		return r;
	char hex[65];
	if ((r = template_digest(b, cfg, hex)) < 0)
		return msb__error_errno(err, r, "vm: cannot identify the template");
	_cleanup_free_ char *dir = msb__asprintf("%s/snapshots", b->cache_dir);
	_cleanup_free_ char *path = msb__asprintf("%s/%s.state", dir, hex);
	_cleanup_free_ char *ram = msb__asprintf("%s/%s.ram", dir, hex);
	_cleanup_free_ char *inputs = msb__asprintf("%s.inputs", hex);
	_cleanup_free_ char *lock = msb__asprintf("%s/%s.lock", dir, hex);
	if (!dir || !path || !ram || !inputs || !lock)
		return msb__error_nomem(err);
	if (access(path, F_OK) != 0 || access(ram, F_OK) != 0) {
		if ((r = msb__mkdir_p(dir, 0700)) < 0)
			return msb__error_errno(err, r, "vm: cannot create `%s`", dir);
		/* Racing acquires make it once. */
		_cleanup_close_ int lfd =
			open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (lfd < 0)
			return msb__error_errno(err, errno, "vm: cannot open `%s`", lock);
		while (flock(lfd, LOCK_EX) < 0)
			if (errno != EINTR)
				return msb__error_errno(err, errno, "vm: cannot lock `%s`", lock);
		if (access(path, F_OK) != 0 || access(ram, F_OK) != 0) {
			_cleanup_free_ char *text = inputs_text(b);
			_cleanup_close_ int dfd =
				open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = !text ? -ENOMEM : dfd < 0 ? -errno : 0;
			if (r == 0)
				r = msb__write_file_atomic_at(dfd, inputs, text, strlen(text),
							      0600);
			if (r < 0)
				return msb__error_errno(err, r, "vm: cannot write `%s`", inputs);
			if ((r = make_template(b, cfg, hex, path, ram, err)) < 0)
				return r;
			sweep_stale(dir, hex);
		}
	}
	if (b->ram_fd < 0 || strcmp(b->ram_digest, hex) != 0) {
		int fd = -1;
		if ((r = load_ram(ram, &fd)) < 0)
			return msb__error_errno(err, r, "vm: cannot load the template's RAM `%s`",
						ram);
		if (b->ram_fd >= 0)
			close(b->ram_fd);
		b->ram_fd = fd;
		memcpy(b->ram_digest, hex, sizeof(hex));
	}
	*state = TAKE_PTR(path);
	*ram_fd = b->ram_fd;
	return 0;
}
