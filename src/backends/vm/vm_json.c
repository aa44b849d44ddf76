/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend type `vm` (msb/backend.h): a row of the backend-type table over
 * the vm backend's own JSON reader and doctor (vm_doctor.c, msb/vm.h).
 */
#include <msb/vm.h>

#include "backends/types.h"
#include "backends/vm/vm_backend.h"
#include "util/json.h"

static int vm_from_json(const msb_backend_json *in, msb_backend **out, msb_error **err)
{
	_cleanup_json_ json_t *obj = NULL;
	int r = msb__json_load_object(in->json, in->len, in->where, &obj, err);
	if (r < 0)
		return r;
	return msb_vm__from_object(obj, in->where, out, err);
}

/* The doctor asks about the defaults (no JSON): the host's qemu, kernel and
 * mkfs.erofs, the guest's initramfs and image built in the default cache,
 * and the KVM probe's boot. Its verdict is the report's one `vm` row; the
 * facilities it tried become the details. */
static int vm_doctor(msb_backend_probe *out, msb_error **err)
{
	msb_doctor_report *rep = NULL;
	int r = msb_vm_doctor(NULL, &rep, err);
	if (r < 0)
		return r;
	bool ok = rep->n_backends == 1 && rep->backends[0].ok;
	const char *why = rep->n_backends == 1 && rep->backends[0].reason ? rep->backends[0].reason
									  : "no verdict";
	r = msb_backends__verdict(out, ok, why, err);
	if (r == 0) {
		out->details = TAKE_PTR(rep->probes);
		out->n_details = rep->n_probes;
		rep->n_probes = 0;
	}
	msb_doctor_report_free(rep);
	return r;
}

const msb_backend_type msb_vm__type = {
	.version = MSB_BACKEND_TYPE_VERSION,
	.name = "vm",
	.summary = "a qemu microVM per sandbox around msb-agent as the guest's init, held by a "
		   "per-sandbox msb-vm-shim (microvm under a probed KVM, else container)",
	.keys = msb_vm__json_keys + 1, /* all but "type" */
	.from_json = vm_from_json,
	.doctor = vm_doctor,
};
