/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `vm` backend's templates (docs/internals/vm.md, "Snapshots"): one VM
 * per template configuration (kernel, initramfs, image, memory, vCPUs, the
 * guest's limits) is booted once, its ready state saved by its shim, and
 * every new VM of that configuration restored from the file. The host name
 * and the identity are not in the template: each restored VM gets its own
 * from its shim's first SESSION record.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "util/fs.h"
#include "util/json.h"
#include "util/sha256.h"
#include "vm_backend.h"

/* The template's name: in its host name (replaced per VM) and its jail id. */
#define TEMPLATE_NAME "msb-template"
#define SNAPSHOT_FORMAT "msb-vm-snapshot 1"

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
			 msb_error **err)
{
	_cleanup_free_ char *dir = msb__asprintf("%s/tmpl-%.16s", b->state_dir, hex);
	if (!dir)
		return msb__error_nomem(err);
	msb__rm_rf_at(AT_FDCWD, dir);
	if (mkdir(dir, 0700) < 0)
		return msb__error_errno(err, errno, "vm: cannot create `%s`", dir);
	json_t *o = json_loads(cfg, 0, NULL);
	if (!o || json_object_set_new(o, "save_to", json_string(path)) < 0) {
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
	r = msb_vm__start_shim(b, dir, b->start_timeout, NULL, err);
	/* The shim removed what it made (it exits once saved); the rest. */
	msb_vm__purge(dir, true, NULL);
	msb__rm_rf_at(AT_FDCWD, dir);
	if (r < 0)
		return msb_error_wrap(err, "vm: the template could not be saved");
	return 0;
}

int msb_vm__template(const vm_backend *b, const msb_spec *spec, const char *work_dir, char **out,
		     msb_error **err)
{
	_cleanup_free_ char *cfg = NULL;
	int r = msb_vm__shim_config(b, spec, work_dir, TEMPLATE_NAME, &cfg, err);
	if (r < 0)
		return r;
	char hex[65];
	if ((r = template_digest(b, cfg, hex)) < 0)
		return msb__error_errno(err, r, "vm: cannot identify the template");
	_cleanup_free_ char *dir = msb__asprintf("%s/snapshots", b->cache_dir);
	_cleanup_free_ char *path = msb__asprintf("%s/snapshots/%s.state", b->cache_dir, hex);
	_cleanup_free_ char *lock = msb__asprintf("%s/snapshots/%s.lock", b->cache_dir, hex);
	if (!dir || !path || !lock)
		return msb__error_nomem(err);
	if (access(path, F_OK) == 0) {
		*out = TAKE_PTR(path);
		return 0;
	}
	if ((r = msb__mkdir_p(dir, 0700)) < 0)
		return msb__error_errno(err, r, "vm: cannot create `%s`", dir);
	/* Racing acquires make it once. */
	_cleanup_close_ int lfd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (lfd < 0)
		return msb__error_errno(err, errno, "vm: cannot open `%s`", lock);
	while (flock(lfd, LOCK_EX) < 0)
		if (errno != EINTR)
			return msb__error_errno(err, errno, "vm: cannot lock `%s`", lock);
	if (access(path, F_OK) != 0 && (r = make_template(b, cfg, hex, path, err)) < 0)
		return r;
	*out = TAKE_PTR(path);
	return 0;
}
