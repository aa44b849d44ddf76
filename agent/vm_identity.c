/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A `vm` guest's identity, applied per host session (docs/internals/vm.md,
 * "Sessions and identity"): the host's SESSION record carries fresh entropy,
 * the host name and the instance id. The port pump (no capabilities) hands
 * the record to this helper, forked by the init before it drops anything and
 * left in the initramfs's root with every capability; it credits the bytes
 * to the kernel's pool and reseeds the CRNG, sets the host name, writes
 * /run/msb-instance-id in the guest's root, and only then acknowledges, so
 * the pump says READY (and the host runs anything) after the guest is unique.
 * A restored snapshot thus never shares its template's random state or name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "proto/mux.h"

/* <linux/random.h>, which the musl build does not have. */
#ifndef RNDADDENTROPY
#define RNDADDENTROPY _IOW('R', 0x03, int[2])
#endif
#ifndef RNDRESEEDCRNG
#define RNDRESEEDCRNG _IO('R', 0x07)
#endif

struct pool_seed {
	int entropy_count; /* bits */
	int buf_size;	   /* bytes */
	uint8_t buf[MSB_MUX_SESSION_SEED];
};

#define ID_FILE VM_LAYER_ID_FILE
#define ID_TMP ".msb-instance-id.new"

static bool name_ok(const uint8_t *p, size_t cap, size_t *len, bool dots)
{
	size_t n = strnlen((const char *)p, cap);
	if (n == cap)
		return false;
	for (size_t i = n; i < cap; i++)
		if (p[i] != 0)
			return false;
	for (size_t i = 0; i < n; i++) {
		char c = (char)p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || (dots && c == '.')))
			return false;
	}
	*len = n;
	return true;
}

static int credit(int rnd, const uint8_t *seed)
{
	struct pool_seed u = {.entropy_count = (int)MSB_MUX_SESSION_SEED * 8,
			      .buf_size = (int)MSB_MUX_SESSION_SEED};
	memcpy(u.buf, seed, MSB_MUX_SESSION_SEED);
	int r = ioctl(rnd, RNDADDENTROPY, &u);
	explicit_bzero(&u, sizeof(u));
	if (r < 0)
		return -errno;
	/* The pool is mixed into the CRNG now, not at the next reseed. */
	if (ioctl(rnd, RNDRESEEDCRNG) < 0)
		return -errno;
	return 0;
}

/* root/run/msb-instance-id, replaced by rename: no name below a guest-writable
 * directory is followed. */
static int write_id(int rootfd, const char *id, size_t len)
{
	if (mkdirat(rootfd, "run", 0755) < 0 && errno != EEXIST)
		return -errno;
	int run = openat(rootfd, "run", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (run < 0)
		return -errno;
	unlinkat(run, ID_TMP, 0);
	int fd = openat(run, ID_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	int r = fd < 0 ? -errno : 0;
	if (r == 0) {
		char line[MSB_MUX_SESSION_ID + 1];
		memcpy(line, id, len);
		line[len] = '\n';
		if (write(fd, line, len + 1) != (ssize_t)(len + 1))
			r = -EIO;
		close(fd);
	}
	if (r == 0 && renameat(run, ID_TMP, run, ID_FILE) < 0)
		r = -errno;
	/* The fingerprint leaves out what this wrote, and only that (layer.c):
	 * the inodes as the writable layer itself has them (the overlay's own
	 * numbers for a directory are not those). */
	int urun = r == 0 && vm_layer.marks && vm_layer.upper_fd >= 0
			   ? openat(vm_layer.upper_fd, "run",
				    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
			   : -1;
	struct stat rs, is;
	if (urun >= 0 && fstat(urun, &rs) == 0 &&
	    fstatat(urun, ID_FILE, &is, AT_SYMLINK_NOFOLLOW) == 0) {
		__atomic_store_n(&vm_layer.marks->run_ino, (uint64_t)rs.st_ino, __ATOMIC_RELEASE);
		__atomic_store_n(&vm_layer.marks->id_ino, (uint64_t)is.st_ino, __ATOMIC_RELEASE);
	}
	if (urun >= 0)
		close(urun);
	close(run);
	return r;
}

static int apply(int rnd, int rootfd, const uint8_t *p)
{
	const uint8_t *seed = p + MSB_MUX_SESSION_MAGIC_LEN;
	const uint8_t *host = seed + MSB_MUX_SESSION_SEED;
	const uint8_t *id = host + MSB_MUX_SESSION_NAME;
	size_t hlen, ilen;
	if (!name_ok(host, MSB_MUX_SESSION_NAME, &hlen, true) ||
	    !name_ok(id, MSB_MUX_SESSION_ID, &ilen, false)) {
		agent_log("vm identity: a malformed host name or instance id");
		return -EINVAL;
	}
	int r = credit(rnd, seed);
	if (r < 0) {
		agent_log("vm identity: credit the seed: %s", strerror(-r));
		return r;
	}
	if (hlen && sethostname((const char *)host, hlen) < 0) {
		agent_log("vm identity: sethostname: %s", strerror(errno));
		return -errno;
	}
	if (ilen && (r = write_id(rootfd, (const char *)id, ilen)) < 0) {
		agent_log("vm identity: instance id: %s", strerror(-r));
		return r;
	}
	return 0;
}

int vm_identity_run(int req, int ack, int rootfd)
{
	int rnd = open("/dev/random", O_RDWR | O_CLOEXEC);
	if (rnd < 0) {
		agent_log("vm identity: /dev/random: %s", strerror(errno));
		return 1;
	}
	for (;;) {
		uint8_t p[MSB_MUX_SESSION_LEN];
		size_t have = 0;
		while (have < sizeof(p)) {
			ssize_t n = read(req, p + have, sizeof(p) - have);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n == 0 && have == 0 ? 0 : 1;
			have += (size_t)n;
		}
		char answer = apply(rnd, rootfd, p) == 0 ? 'y' : 'n';
		if (write(ack, &answer, 1) != 1)
			return 1;
	}
}
