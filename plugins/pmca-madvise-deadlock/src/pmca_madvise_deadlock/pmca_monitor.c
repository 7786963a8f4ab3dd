/*
 * pmca's hooks as the model cache's memory monitor, natively (the way
 * pmca's btl/ofi imports them into libfabric with fi_import_fid, without
 * Python on the path).  pmca's patched munmap/madvise only publish the
 * released range to pmca's lock-free ring and return; this thread drains
 * the ring (pmca_hooks_drain, pmca_hooks_wait from libpmca_hooks.so, passed
 * in by address) and calls the model's import-monitor notify for each
 * event -- outside any allocator, so taking mm_lock there waits for nobody
 * that waits for it.  The cache, its mm_lock and the workload are the
 * model's (ompi_ofi.c, workload.c), unchanged.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

struct pmca_event { /* pmca/native/hooks.h */
    uint64_t address, length;
    uint32_t kind, from_alloc;
};

struct pmca_drain_result { /* pmca/native/ring.c */
    uint64_t first_position, next_position, dropped_total;
    uint32_t count, abandoned;
};

typedef int (*drain_fn)(struct pmca_event *, uint32_t, uint64_t, uint64_t,
                        struct pmca_drain_result *);
typedef int (*wait_fn)(uint64_t, uint64_t);

void repro_monitor_notify(void *addr, size_t len); /* ompi_ofi.c */

static struct {
    drain_fn drain;
    wait_fn wait;
    pthread_t thread;
    volatile int stop;
    long events, drains, flushes;
    uint64_t dropped_seen;
} mon;

static void *drainer(void *arg)
{
    (void)arg;
    struct pmca_event events[256];
    struct pmca_drain_result result;
    for (;;) {
        int stopping = __atomic_load_n(&mon.stop, __ATOMIC_ACQUIRE);
        memset(&result, 0, sizeof(result));
        if (mon.drain(events, 256, UINT64_MAX, 1000000, &result) == 0) {
            mon.drains++;
            if (result.dropped_total != mon.dropped_seen || result.abandoned) {
                /* events lost: every cached range counts as released */
                mon.dropped_seen = result.dropped_total;
                repro_monitor_notify(NULL, SIZE_MAX);
                mon.flushes++;
            }
            for (uint32_t i = 0; i < result.count; i++)
                repro_monitor_notify((void *)(uintptr_t)events[i].address,
                                     (size_t)events[i].length);
            mon.events += result.count;
            if (result.count > 0)
                continue;
        }
        if (stopping)
            return NULL;
        mon.wait(64, 200000); /* 64 events pending, or 200 us */
    }
}

/* Start draining pmca's ring into the model cache's monitor: 0 or an errno. */
EXPORT int repro_pmca_monitor_start(void *drain, void *wait)
{
    mon.drain = (drain_fn)drain;
    mon.wait = (wait_fn)wait;
    mon.stop = 0;
    return pthread_create(&mon.thread, NULL, drainer, NULL);
}

/* Stop after a last drain; returns the events delivered to the monitor. */
EXPORT long repro_pmca_monitor_stop(long *flushes)
{
    __atomic_store_n(&mon.stop, 1, __ATOMIC_RELEASE);
    pthread_join(mon.thread, NULL);
    *flushes = mon.flushes;
    return mon.events;
}
