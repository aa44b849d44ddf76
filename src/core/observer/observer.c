/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Observer emission: call the host's slot if set, contain its failure.
 * An observer cannot fail a call (17.17): a non-zero return becomes one log
 * line and nothing else.
 */
#include "core/core.h"

static void contained(const msb_logger *lg, const char *event, int r)
{
	if (r != 0)
		msb__log(lg, MSB_LOG_WARNING, "observer", "observer failed in %s (returned %d)",
			 event, r);
}

#define EMIT(slot, type)                                                                           \
	void msb_observer__##slot(const msb_observer *o, const msb_logger *lg, const type *ev)     \
	{                                                                                          \
		if (!msb_observer__wants(o, slot) || !ev)                                          \
			return;                                                                    \
		contained(lg, #slot, o->slot(o->userdata, ev));                                    \
	}

EMIT(sandbox_acquired, msb_ev_sandbox_acquired)
EMIT(sandbox_disposed, msb_ev_sandbox_disposed)
EMIT(scope_disposed, msb_ev_scope_disposed)
EMIT(egress_observed, msb_ev_egress_observed)
EMIT(host_tool_called, msb_ev_host_tool_called)
EMIT(processes_observed, msb_ev_processes_observed)
EMIT(process_cleanup, msb_ev_process_cleanup)
EMIT(store_file_read, msb_ev_store_file_read)
EMIT(outputs_collected, msb_ev_outputs_collected)
EMIT(tool_call_ended, msb_ev_tool_call_ended)
