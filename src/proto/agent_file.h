/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `msb-agent file OP PATH ...`: one file operation run by a container
 * engine's exec (agent/file.c; docs/internals/engine.md, "The confined file
 * plane"). The whole path is resolved in the container with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) from "/": the check and
 * the use are one resolution, so a link swapped in anywhere on the way is
 * refused, never followed.
 *
 *   stat PATH           prints "KIND SIZE\n": file, dir, link, other, absent
 *                       (a missing component on the way: absent)
 *   read PATH MAX       the regular file's bytes on stdout; refused when it
 *                       is a link, a directory, not regular, or over MAX
 *   write PATH MODE     stdin (at most MSB_AGENT_FILE_MAX bytes) replaces PATH,
 *                       owned by root with MODE (octal); missing parents made
 *                       (0755); an existing link or directory there refuses
 *   remove PATH [-r]    unlink; a directory only with -r (removed fd-relative,
 *                       never following a link); absent is success
 *
 * Exit status and, for a refusal, one line on stderr naming what refused.
 */
#ifndef MSB_PROTO_AGENT_FILE_H
#define MSB_PROTO_AGENT_FILE_H

#define MSB_AGENT_FILE_OK 0
#define MSB_AGENT_FILE_USAGE 2
#define MSB_AGENT_FILE_NOT_FOUND 10
#define MSB_AGENT_FILE_IS_DIR 11
#define MSB_AGENT_FILE_NOT_DIR 12     /* stderr: the component that is not a directory */
#define MSB_AGENT_FILE_PARENT_LINK 13 /* stderr: the link on the way */
#define MSB_AGENT_FILE_LEAF_LINK 14
#define MSB_AGENT_FILE_NOT_REGULAR 15
#define MSB_AGENT_FILE_TOO_BIG 16 /* stderr: the file's size */
#define MSB_AGENT_FILE_ERROR 17	  /* stderr: what failed */
#define MSB_AGENT_FILE_NO_OPENAT2 18
#define MSB_AGENT_FILE_TOO_DEEP 19

/* What one write may carry, and a removal's depth. */
#define MSB_AGENT_FILE_MAX (64ull << 20)
#define MSB_AGENT_FILE_DEPTH 1024

#endif
