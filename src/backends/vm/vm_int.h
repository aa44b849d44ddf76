/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the `vm` backend (docs/internals/vm.md): the artefacts the
 * host builds for a guest (initramfs, image disk), the host probes, and the
 * backend's shape. The VMM and its jail are in vmm.h.
 */
#ifndef MSB_VM_INT_H
#define MSB_VM_INT_H

#include <msb/backend.h>
#include <msb/vm.h>

#include "util/util.h"

/* ---- cpio.c: the "newc" archive format, written into memory ---------------- */

/* Append one entry. mode carries the type bits (S_IFDIR, S_IFREG, S_IFLNK);
 * for a link `data` is the target. Entries get uid/gid 0 and mtime 0, so the
 * same inputs give the same bytes. -ENOMEM, -EINVAL. */
int msb_vm__cpio_add(msb_buf *b, const char *name, unsigned mode, const void *data, size_t len);
/* The trailer; the archive is complete after it. */
int msb_vm__cpio_finish(msb_buf *b);

/* ---- initramfs.c ------------------------------------------------------------ */

/* The modules the guest init loads, in load order, by name (without .ko).
 * Dependencies are resolved from <modules_dir>/modules.dep. */
extern const char *const msb_vm__guest_modules[];

/*
 * Build the initramfs (the agent as /init, the modules under /msb/modules,
 * the init's mount points) and store it once under <cache>/initramfs/ by the
 * SHA-256 of its bytes. *out is the file's path. A module the kernel has
 * built in (absent from modules.dep and present in modules.builtin) is
 * skipped; one it has neither way is refused naming it.
 */
int msb_vm__initramfs(const char *cache, const char *agent_path, const char *modules_dir,
		      char **out, msb_error **err);

/* ---- image.c ------------------------------------------------------------------ */

/*
 * The `host` image as a read-only erofs disk, stored once under
 * <cache>/images/ by the SHA-256 of its manifest (every path, type, size,
 * mode and mtime that goes in). It holds the host programs named (searched
 * in /usr/bin, /usr/sbin), every shared object they need (ELF DT_NEEDED and
 * the interpreter, transitively), python3's standard library when python3 is
 * named, the top-level links of a merged-/usr host, and a synthesized /etc.
 */
int msb_vm__host_image(const char *cache, const char *mkfs, char *const *programs, char **out,
		       msb_error **err);

/*
 * A `dir:PATH` image: the directory as an erofs disk, every file owned by
 * root, stored once under <cache>/images/dir-<sha256>.erofs by the digest of
 * its manifest (every entry's path, type, mode, size, mtime, device numbers
 * and link target; links never followed).
 */
int msb_vm__dir_image(const char *cache, const char *mkfs, const char *path, char **out,
		      msb_error **err);

/*
 * An `oci:PATH[:TAG]` image: the layout resolved, verified and unpacked by
 * the `ns` backend's code (into <cache>/oci), then every layer as one
 * directory of a single erofs disk (`0/` the top layer ... `N-1/` the
 * bottom), whiteouts kept in overlayfs form (0/0 character devices, the
 * user.overlay.opaque xattr); the guest stacks them with overlay's
 * `userxattr`. Stored once under <cache>/images/oci-<sha256 of the layer
 * digests in order>.erofs. *n_layers gets N.
 */
int msb_vm__oci_image(const char *cache, const char *mkfs, const char *image, char **out,
		      size_t *n_layers, msb_error **err);

/* ---- elf.c ---------------------------------------------------------------------- */

/* The interpreter and DT_NEEDED names of an ELF file (host input, bounded).
 * *interp NULL when none; *needed a strv (empty when none). -errno:
 * -ENOEXEC when not a 64-bit little-endian ELF file. */
int msb_vm__elf_deps(int fd, char **interp, char ***needed);

/* ---- probe.c ------------------------------------------------------------------- */

typedef struct msb_vm_host {
	char *qemu;	   /* qemu-system-x86_64 (TCG and KVM) */
	char *qemu_kvm;	   /* the binary under KVM: qemu too (the -microvm build has no seccomp) */
	char *kernel;	   /* the guest kernel */
	char *modules_dir; /* its /lib/modules/<version> */
	char *mkfs_erofs;
	uint64_t tsc_khz; /* the host's TSC rate, handed to a TCG guest; 0 unknown */
} msb_vm_host;

/* The host's TSC rate in kHz (0 when unknown), kept in <cache>/tsc-khz for
 * the host's boot. -ENOMEM only. */
int msb_vm__tsc_khz(const char *cache, uint64_t *out);

/* Find what the backend needs on this host (options first, then defaults). */
int msb_vm__host_find(const msb_vm_options *o, msb_vm_host *h, msb_error **err);
void msb_vm__host_clear(msb_vm_host *h);

/*
 * Does hardware-assisted KVM boot a guest here? A tiny guest (this
 * initramfs with the agent in `--probe` mode) must print its marker on the
 * console within `deadline` seconds under accel=kvm. Opening /dev/kvm proves
 * nothing. The answer is kept in <cache>/kvm-probe for the host's boot (its
 * boot id), qemu binary and kernel. *ok and *why (one line) always set.
 */
int msb_vm__kvm_probe(const msb_vm_host *h, const char *cache, const char *initramfs,
		      double deadline, bool *ok, char **why, msb_error **err);

#endif
