/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/hosttools_native.h - the native host-tool channel (docs/hosttools.md,
 * docs/internals/hosttools.md).
 *
 * On a backend whose guest storage base is a host directory (ns: the
 * sandbox's work/ is bound at the guest's work_dir), the host binds a unix
 * socket in it, <work_dir>/.msb-host-tools.sock inside the guest, and serves
 * it from one thread while a run lasts. A guest program connects (the Python
 * client clients/python/msb_host_tools.py, the header-only C client
 * clients/c/msb_host_tools.h) and sends one frame per call; each is answered
 * through the same door as over exec (msb_host_tool_run_call_request): the
 * same gates, caps and HostToolCalled events.
 *
 * Frame, each way: u32 little-endian length (1..1 MiB for requests), then
 * that many bytes of JSON. Request {"name": ..., "arguments": {...}};
 * response {"value": ...} or {"refusal": "..."}. A connection may carry any
 * number of calls, one at a time; a malformed frame closes it.
 */
#ifndef MSB_HOSTTOOLS_NATIVE_H
#define MSB_HOSTTOOLS_NATIVE_H

#include <msb/hosttools.h>

MSB_BEGIN_DECLS

/* The socket's name inside the guest storage base, and the environment
 * variable a kind sets for its program to the socket's full guest path. */
#define MSB_HOST_TOOLS_SOCKET_NAME ".msb-host-tools.sock"
#define MSB_HOST_TOOLS_SOCKET_ENV "MSB_HOST_TOOLS_SOCKET"

typedef struct msb_native_server msb_native_server;

/*
 * Bind the socket in `host_dir` (the host's view of the guest directory
 * `guest_dir`) and serve `run` from a thread until msb_native_server_stop.
 * `run` must outlive the server. One server per directory at a time (a
 * second bind fails with MSB_E_OS-family errors).
 */
MSB_EXTERN int msb_native_server_start(const char *host_dir, const char *guest_dir,
				       msb_host_tool_run *run, msb_log_fn log, void *log_userdata,
				       msb_native_server **out, msb_error **err);
/* The socket's path inside the guest (borrowed). */
MSB_EXTERN const char *msb_native_server_guest_path(const msb_native_server *s);
/* Stop serving, close every guest connection, remove the socket. NULL ok. */
MSB_EXTERN void msb_native_server_stop(msb_native_server *s);

MSB_END_DECLS

#endif
