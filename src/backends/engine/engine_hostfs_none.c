/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host's file plane where the host cannot see a container's root (the
 * Windows build, docs/windows.md: wslc's containers live in the WSL virtual
 * machine, and there is no /proc, no openat2 here): never served, so every
 * file operation goes to the confined agent or the tar-header walk over the
 * engine's own commands (engine_sandbox.c).
 */
#include "engine.h"

int msb_engine__hostfs_write(engine_backend *b, const char *id, const char *base, const char *path,
			     const uint8_t *data, size_t len, const char *working_directory,
			     msb_error **err)
{
	return ENGINE_HOSTFS_NONE;
}

int msb_engine__hostfs_stat(engine_backend *b, const char *id, const char *base, const char *path,
			    const char *working_directory, bool *present, msb_entry *out,
			    msb_error **err)
{
	return ENGINE_HOSTFS_NONE;
}

int msb_engine__hostfs_read(engine_backend *b, const char *id, const char *base, const char *path,
			    const char *working_directory, uint64_t max_bytes, uint8_t **data,
			    size_t *len, msb_error **err)
{
	return ENGINE_HOSTFS_NONE;
}

int msb_engine__hostfs_remove(engine_backend *b, const char *id, const char *base, const char *path,
			      const char *working_directory, bool recursive, bool reclaim,
			      msb_error **err)
{
	return ENGINE_HOSTFS_NONE;
}
