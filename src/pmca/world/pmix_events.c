/*
 * pmca's PMIx event handler: runs on PMIx's progress thread, so it never
 * enters Python. It copies what happened (status, the affected process,
 * when) into a fixed-size record, writes the record to a non-blocking pipe
 * the world drains from Python, and hands the event on to the next handler
 * (an MPI library in the same process may have registered its own).
 *
 * No malloc, no lock, no Python: one write(2) of less than PIPE_BUF bytes is
 * atomic, and a full pipe only sets an overflow flag the world reads.
 *
 * The structures below are PMIx's stable ABI (PMIx 4 and 5: pmix_common.h
 * of that release), reduced to the members read here.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PMCA_PMIX_NSLEN 256
#define PMCA_PMIX_KEYLEN 512
#define PMCA_PMIX_PROC 22 /* PMIX_PROC: value.data.proc points to a pmix_proc_t */
#define PMCA_PMIX_SUCCESS 0
#define PMCA_AFFECTED_PROC "pmix.evproc"
#define EXPORT __attribute__((visibility("default")))

typedef struct {
    char nspace[PMCA_PMIX_NSLEN];
    uint32_t rank;
} pmca_pmix_proc_t;

typedef struct {
    uint16_t type;
    union {
        pmca_pmix_proc_t *proc;
        char bytes[24]; /* the union's largest member, pmix_envar_t */
    } data;
} pmca_pmix_value_t;

typedef struct {
    char key[PMCA_PMIX_KEYLEN];
    uint32_t flags;
    pmca_pmix_value_t value;
} pmca_pmix_info_t;

typedef void (*pmca_op_cbfunc_t)(int status, void *cbdata);
typedef void (*pmca_event_done_t)(int status, pmca_pmix_info_t *results, size_t nresults,
                                  pmca_op_cbfunc_t cbfunc, void *thiscbdata,
                                  void *notification_cbdata);

/* One event as the world reads it from the pipe. */
typedef struct {
    int32_t status;
    uint32_t rank;          /* the affected process (or the source) */
    int64_t monotonic_ns;   /* CLOCK_MONOTONIC when the handler ran */
    char nspace[PMCA_PMIX_NSLEN];
} pmca_pmix_event_t;

static volatile int pipe_fd = -1;
static volatile int overflowed = 0;
static volatile uint64_t delivered = 0;

/* A non-blocking PMIx operation's completion: its status goes to the pipe
 * the world waits on with a timeout (a blocking call could not time out). */
typedef struct {
    int fd;
    int32_t status;
} pmca_pmix_op_t;

EXPORT void pmca_pmix_op_done(int status, void *cbdata)
{
    pmca_pmix_op_t *op = cbdata;
    int32_t value = status;
    op->status = value;
    ssize_t written;
    do {
        written = write(op->fd, &value, sizeof value);
    } while (written < 0 && errno == EINTR);
}

EXPORT int pmca_pmix_events_record_size(void) { return (int)sizeof(pmca_pmix_event_t); }
EXPORT int pmca_pmix_events_info_size(void) { return (int)sizeof(pmca_pmix_info_t); }
EXPORT void pmca_pmix_events_set_fd(int fd) { __atomic_store_n(&pipe_fd, fd, __ATOMIC_SEQ_CST); }
EXPORT int pmca_pmix_events_overflowed(void) { return __atomic_exchange_n(&overflowed, 0, __ATOMIC_SEQ_CST); }
EXPORT uint64_t pmca_pmix_events_delivered(void) { return __atomic_load_n(&delivered, __ATOMIC_SEQ_CST); }

static const pmca_pmix_proc_t *affected(const pmca_pmix_proc_t *source, const pmca_pmix_info_t *info,
                                        size_t ninfo)
{
    for (size_t i = 0; i < ninfo && info != NULL; i++) {
        if (info[i].value.type == PMCA_PMIX_PROC && info[i].value.data.proc != NULL &&
            strncmp(info[i].key, PMCA_AFFECTED_PROC, PMCA_PMIX_KEYLEN) == 0) {
            return info[i].value.data.proc;
        }
    }
    return source;
}

EXPORT void pmca_pmix_events_handler(size_t id, int status, const pmca_pmix_proc_t *source,
                              pmca_pmix_info_t *info, size_t ninfo, pmca_pmix_info_t *results,
                              size_t nresults, pmca_event_done_t cbfunc, void *cbdata)
{
    (void)id;
    pmca_pmix_event_t record;
    struct timespec now;
    const pmca_pmix_proc_t *proc = affected(source, info, ninfo);

    memset(&record, 0, sizeof record);
    record.status = status;
    record.rank = proc != NULL ? proc->rank : UINT32_MAX;
    if (proc != NULL) {
        memcpy(record.nspace, proc->nspace, PMCA_PMIX_NSLEN - 1);
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    record.monotonic_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;

    int fd = __atomic_load_n(&pipe_fd, __ATOMIC_SEQ_CST);
    if (fd >= 0) {
        ssize_t written;
        do {
            written = write(fd, &record, sizeof record);
        } while (written < 0 && errno == EINTR);
        if (written == (ssize_t)sizeof record) {
            __atomic_add_fetch(&delivered, 1, __ATOMIC_SEQ_CST);
        } else {
            __atomic_store_n(&overflowed, 1, __ATOMIC_SEQ_CST);
        }
    }
    (void)results;
    (void)nresults;
    /* PMIX_SUCCESS, not PMIX_EVENT_ACTION_COMPLETE: later handlers still run. */
    if (cbfunc != NULL) {
        cbfunc(PMCA_PMIX_SUCCESS, NULL, 0, NULL, NULL, cbdata);
    }
}
