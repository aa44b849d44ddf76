/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OCI image layouts for the `ns` backend (image `oci:PATH[:TAG]`): resolve
 * index.json to one image manifest, verify every blob against its digest,
 * unpack each layer once into a content-addressed cache under the state root
 * and hand back the layer directories for the overlay, top first.
 * docs/internals/oci-images.md describes the cache and the refusals.
 *
 * Host side only (libarchive); the shim and the child see only directories.
 * Thread-safe: concurrent callers (threads or processes) on one cache unpack
 * a layer once, serialised by a lock file per layer.
 */
#ifndef MSB_BACKENDS_NS_OCI_H
#define MSB_BACKENDS_NS_OCI_H

#include <stdbool.h>
#include <stdint.h>

#include <msb/ns.h>

#include "util/util.h"

#define MSB_OCI_MAX_JSON (1u << 20)	      /* index, manifest, config: bytes */
#define MSB_OCI_MAX_LAYER_ENTRIES (1u << 20)  /* entries in one layer */
#define MSB_OCI_MAX_LAYER_BYTES (16ull << 30) /* unpacked bytes of one layer */
#define MSB_OCI_MAX_BLOB_BYTES (16ull << 30)  /* a layer blob as stored */
#define MSB_OCI_MAX_TAG 256

typedef enum msb_oci_compression {
	MSB_OCI_TAR = 0,
	MSB_OCI_TAR_GZIP = 1,
	MSB_OCI_TAR_ZSTD = 2,
} msb_oci_compression;

/* Split "oci:PATH[:TAG]" at the first ':' after "oci:" (skopeo's rule: PATH
 * holds no ':'). PATH must be absolute and normalised; *tag is NULL when
 * absent. MSB_E_VALUE otherwise. */
int msb_ns__oci_parse_ref(const char *image, char **path, char **tag, msb_error **err);

/* Ownership of unpacked files: shifted into the sandbox's id range (root:
 * host uid id_base + uid for uid 0..65535, else nobody), or left to the
 * caller (an ordinary user: every file is the guest root's). */
typedef struct msb_oci_owner {
	bool shift;
	uint32_t id_base;
} msb_oci_owner;

/* Where unpack progress goes (msb_ns_progress): the caller's callback and
 * the running counts. Reported at a layer's start and end and about every
 * MSB_OCI_PROGRESS_STEP bytes of its blob. */
#define MSB_OCI_PROGRESS_STEP (1u << 20)
typedef struct msb_oci_progress {
	msb_ns_progress_fn fn;
	void *userdata;
	msb_ns_progress p;
	uint64_t reported; /* p.layer_bytes at the last report */
} msb_oci_progress;

/* Report now (fn may be NULL: nothing). */
void msb_ns__oci_report(msb_oci_progress *pr);

/*
 * Resolve `image` ("oci:PATH[:TAG]"), verify index -> manifest -> config ->
 * layers against their digests and sizes, unpack the layers not yet in
 * `<cache_root>/sha256/<hex>/`, and return their absolute paths, top layer
 * first (*layers is an msb_strv of *n entries). Bad or hostile input is
 * MSB_E_VALUE with the reason, and nothing is written outside cache_root.
 */
int msb_ns__oci_prepare(const char *image, const char *cache_root, const msb_oci_owner *owner,
			msb_oci_progress *progress, char ***layers, size_t *n, msb_error **err);

/*
 * Unpack one layer blob (blob_fd at offset 0; `size` bytes whose SHA-256 is
 * `hex`) into the empty directory dirfd, translating OCI whiteouts to
 * overlayfs ones (`.wh.NAME` -> a 0/0 character device NAME, `.wh..wh..opq`
 * -> xattr user.overlay.opaque=y on its directory). The digest and size are
 * checked once the whole blob has been read; on any failure the caller
 * removes the directory. `what` names the layer in messages.
 */
int msb_ns__oci_unpack(int blob_fd, uint64_t size, const char *hex, msb_oci_compression comp,
		       const msb_oci_owner *owner, int dirfd, const char *what,
		       msb_oci_progress *progress, msb_error **err);

#endif
