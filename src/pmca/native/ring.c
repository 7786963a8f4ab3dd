/*
 * The release-event ring: a bounded lock-free queue with many producers (the
 * hooks, and any other native event source of this library) and one consumer
 * at a time (a drain).  One sequence number per slot, after Dmitry Vyukov's
 * bounded MPMC queue, plus:
 *
 *  - positions that only grow, for the life of the process (a fork does not
 *    rewind them): the Python side stamps each subscription with the position
 *    it subscribed at, and never hands it an older event;
 *  - abandonment: a drain that finds a claimed slot unpublished waits a
 *    bounded time, then gives the slot up (counted as dropped, so consumers
 *    see an overflow) and carries on with the events behind it;
 *  - a futex wake-up when the ring passes a fill threshold the listener asked
 *    for.  No file descriptor anywhere: nothing an application's
 *    os.closerange() can break, nothing a fork handler must dup over.
 *
 * Producers may run in any thread, inside malloc with arena locks held, in
 * signal handlers or in a forked child: the producer path is atomics and, once
 * per threshold crossing, one raw futex(2).  It never touches errno.
 *
 * The slots are mmap'ed once, when the ring is first configured, and never
 * freed (rule 5: a hook may be executing on any thread at any time).
 */
#include "hooks.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#define CACHELINE 64
#define RING_MIN_CAPACITY 1024u
#define RING_MAX_CAPACITY (1u << 26)
/* 2^18 slots (8 MiB): holds well over the events eight threads releasing
 * memory flat out produce between two listener timer ticks on a loaded
 * 2-core machine; see benchmarks/bench_hooks.py. */
#define RING_DEFAULT_CAPACITY (1u << 18)

struct ring_slot {
    uint64_t sequence; /* accessed atomically; see the state table below */
    uint64_t address;
    uint64_t length;
    uint32_t kind;
    uint32_t from_alloc;
};

/*
 * Slot states for position p (slot index p & mask):
 *   sequence == p            free for the producer of p (or claimed by it, unpublished)
 *   sequence == p + 1        published, waiting for the consumer
 *   sequence == p + cap      consumed: free for the producer of p + cap
 *   sequence == p + cap - 1  abandoned by the consumer while claimed: nobody may
 *                            use it until the late producer frees it (to p + cap)
 * p + cap - 1 is never a legitimate value of this slot (cap >= 2), and to the
 * producer of p + cap it looks like "full", which is what it is.
 */

static struct {
    /* Producer cursor: every hooked call touches it. */
    _Alignas(CACHELINE) uint64_t enqueue_position;
    /* Consumer side, written only by the one consumer. */
    _Alignas(CACHELINE) uint64_t dequeue_position;
    int consumer_busy;
    uint64_t abandoned_total;
    uint64_t incomplete_drains;
    uint64_t abandoned_outstanding; /* abandoned slots their producer has not freed yet */
    /* Wake-up: the producer publishing position wake_at - 1 wakes the futex. */
    _Alignas(CACHELINE) uint64_t wake_at;
    uint32_t wake_word;
    uint64_t producer_wakeups;
    /* Counters producers touch only on the slow paths. */
    _Alignas(CACHELINE) uint64_t dropped_total;
    uint64_t late_publishes;
    _Alignas(CACHELINE) int enabled;
    struct ring_slot *slots; /* published with release once configured */
    uint64_t capacity;
    uint64_t mask;
    _Alignas(CACHELINE) uint64_t calls[PMCA_SYM_COUNT];
} ring = {.enabled = 1, .wake_at = UINT64_MAX};

static pthread_mutex_t configure_lock = PTHREAD_MUTEX_INITIALIZER;

int pmca_symbol_active[PMCA_SYM_COUNT];

static struct ring_slot *ring_slots(void)
{
    return __atomic_load_n(&ring.slots, __ATOMIC_ACQUIRE);
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */
/* ------------------------------------------------------------------------ */

/*
 * Allocate the ring with `capacity` slots (a power of two) unless it exists.
 * Returns the capacity in force (which may differ from the one asked for:
 * the ring is allocated once per process), or -EINVAL / -ENOMEM.
 */
PMCA_EXPORT int64_t pmca_hooks_configure_ring(uint64_t capacity)
{
    if (capacity < RING_MIN_CAPACITY || capacity > RING_MAX_CAPACITY ||
        (capacity & (capacity - 1)) != 0)
        return -EINVAL;
    pthread_mutex_lock(&configure_lock);
    if (ring_slots() != NULL) {
        uint64_t current = ring.capacity;
        pthread_mutex_unlock(&configure_lock);
        return (int64_t)current;
    }
    size_t bytes = (size_t)capacity * sizeof(struct ring_slot);
    /* Raw mmap: libc's entry may be patched by us or by someone else. */
    long memory = pmca_raw_syscall6(SYS_mmap, 0, (long)bytes, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pmca_is_error(memory)) {
        pthread_mutex_unlock(&configure_lock);
        return -ENOMEM;
    }
    struct ring_slot *slots = (struct ring_slot *)memory;
    /* Positions keep growing from wherever they are (events pushed before
     * configuration were dropped and counted, never claimed). */
    uint64_t head = __atomic_load_n(&ring.enqueue_position, __ATOMIC_RELAXED);
    for (uint64_t position = head; position < head + capacity; position++)
        slots[position & (capacity - 1)].sequence = position;
    ring.capacity = capacity;
    ring.mask = capacity - 1;
    __atomic_store_n(&ring.dequeue_position, head, __ATOMIC_RELAXED);
    __atomic_store_n(&ring.slots, slots, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&configure_lock);
    return (int64_t)capacity;
}

PMCA_EXPORT uint32_t pmca_hooks_default_ring_capacity(void) { return RING_DEFAULT_CAPACITY; }

int pmca_ring_ensure_configured(void)
{
    if (ring_slots() != NULL)
        return 0;
    int64_t result = pmca_hooks_configure_ring(RING_DEFAULT_CAPACITY);
    return result < 0 ? (int)result : 0;
}

/* ------------------------------------------------------------------------ */
/* Producers                                                                 */
/* ------------------------------------------------------------------------ */

static void ring_wake(void)
{
    __atomic_fetch_add(&ring.wake_word, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&ring.producer_wakeups, 1, __ATOMIC_RELAXED);
    (void)pmca_raw_syscall6(SYS_futex, (long)&ring.wake_word, FUTEX_WAKE_PRIVATE, INT_MAX, 0,
                            0, 0);
}

static void ring_count_drop(void)
{
    __atomic_fetch_add(&ring.dropped_total, 1, __ATOMIC_RELEASE);
}

/* Claim the next position; NULL when the ring is full (or not configured). */
static struct ring_slot *ring_claim(uint64_t *claimed)
{
    struct ring_slot *slots = ring_slots();
    if (slots == NULL)
        return NULL;
    uint64_t mask = ring.mask;
    uint64_t position = __atomic_load_n(&ring.enqueue_position, __ATOMIC_RELAXED);
    for (;;) {
        struct ring_slot *slot = &slots[position & mask];
        uint64_t sequence = __atomic_load_n(&slot->sequence, __ATOMIC_ACQUIRE);
        int64_t distance = (int64_t)(sequence - position);
        if (distance == 0) {
            /* seq_cst: pairs with the listener's store to wake_at followed by
             * its load of enqueue_position (pmca_hooks_wait). */
            if (__atomic_compare_exchange_n(&ring.enqueue_position, &position, position + 1,
                                            1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
                *claimed = position;
                return slot;
            }
        } else if (distance < 0) {
            return NULL; /* the slot still holds an unconsumed (or abandoned) event */
        } else {
            position = __atomic_load_n(&ring.enqueue_position, __ATOMIC_RELAXED);
        }
    }
}

/* Returns 1 when the consumer will see the event, 0 when it was abandoned
 * while we held the claim (already counted as dropped by the consumer). */
static int ring_publish(struct ring_slot *slot, uint64_t position)
{
    uint64_t expected = position;
    if (__atomic_compare_exchange_n(&slot->sequence, &expected, position + 1, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE)) {
        if (position + 1 == __atomic_load_n(&ring.wake_at, __ATOMIC_SEQ_CST))
            ring_wake();
        return 1;
    }
    /* The consumer gave up on this slot: hand it to the next lap. */
    __atomic_store_n(&slot->sequence, position + ring.capacity, __ATOMIC_RELEASE);
    __atomic_fetch_sub(&ring.abandoned_outstanding, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ring.late_publishes, 1, __ATOMIC_RELAXED);
    return 0;
}

static void ring_fill(struct ring_slot *slot, uint32_t kind, uintptr_t address,
                      uintptr_t length, uint32_t from_alloc)
{
    slot->address = address;
    slot->length = length;
    slot->kind = kind;
    slot->from_alloc = from_alloc;
}

/* The entry point for every native event source of this library (the hooks,
 * and sources in other translation units): never blocks, never fails
 * visibly; a full ring counts a drop, which consumers see as an overflow. */
void pmca_ring_publish(uint32_t kind, uintptr_t address, uintptr_t length, uint32_t from_alloc)
{
    uint64_t position;
    struct ring_slot *slot = ring_claim(&position);
    if (slot == NULL) {
        ring_count_drop();
        return;
    }
    ring_fill(slot, kind, address, length, from_alloc);
    (void)ring_publish(slot, position);
}

void pmca_ring_record(int symbol, uint32_t kind, uintptr_t address, uintptr_t length,
                      uint32_t from_alloc)
{
    if (!__atomic_load_n(&ring.enabled, __ATOMIC_RELAXED) ||
        !__atomic_load_n(&pmca_symbol_active[symbol], __ATOMIC_RELAXED))
        return;
    pmca_ring_publish(kind, address, length, from_alloc);
}

/* Releases went unseen outside the ring (someone wrote over a hook): counted
 * as a drop, so the next drain reports an overflow. */
void pmca_ring_report_loss(void) { ring_count_drop(); }

/* Every hook entry is counted, releases or not, so a self-test can tell
 * "hook reached" from "hook bypassed" with calls that release nothing. */
void pmca_ring_count_call(int symbol)
{
    __atomic_fetch_add(&ring.calls[symbol], 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* The consumer                                                              */
/* ------------------------------------------------------------------------ */

static uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* Wait up to wait_ns for the producer of `position` to publish.  It holds no
 * lock and is a few instructions from publishing unless it was preempted,
 * stopped or interrupted by a signal handler. */
static int ring_wait_published(struct ring_slot *slot, uint64_t position, uint64_t wait_ns)
{
    for (int spin = 0; spin < 256; spin++) {
        if (__atomic_load_n(&slot->sequence, __ATOMIC_ACQUIRE) == position + 1)
            return 1;
        cpu_relax();
    }
    uint64_t deadline = monotonic_ns() + wait_ns;
    do {
        if (__atomic_load_n(&slot->sequence, __ATOMIC_ACQUIRE) == position + 1)
            return 1;
        sched_yield();
    } while (monotonic_ns() < deadline);
    return __atomic_load_n(&slot->sequence, __ATOMIC_ACQUIRE) == position + 1;
}

/* Give up on a claimed, unpublished slot; 0 if it got published meanwhile. */
static int ring_abandon(struct ring_slot *slot, uint64_t position)
{
    uint64_t expected = position;
    __atomic_fetch_add(&ring.abandoned_outstanding, 1, __ATOMIC_RELAXED);
    if (__atomic_compare_exchange_n(&slot->sequence, &expected, position + ring.capacity - 1,
                                    0, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE)) {
        ring_count_drop();
        __atomic_fetch_add(&ring.abandoned_total, 1, __ATOMIC_RELAXED);
        return 1;
    }
    __atomic_fetch_sub(&ring.abandoned_outstanding, 1, __ATOMIC_RELAXED);
    return 0;
}

/* What one pmca_hooks_drain call did (ctypes-mirrored). */
struct pmca_drain_result {
    uint64_t first_position; /* position of events[0] */
    uint64_t next_position;  /* consumer position after the call */
    uint64_t dropped_total;  /* read at the end of the call */
    uint32_t count;          /* events written */
    uint32_t abandoned;      /* claimed slots given up on (before events[0]) */
};

/*
 * Copy the events at positions [consumer position, until) into events[], at
 * most max_events.  The events of one call are consecutive positions: a slot
 * still unpublished after wait_ns is abandoned only when it comes first
 * (otherwise the call returns and the next one starts with it).
 * shmdt's "unknown length" (0) becomes "to the end of memory" here, so
 * consumers need no special case.
 * Returns 0, or -EBUSY when another thread is draining (one consumer at a
 * time), or -ENODEV before the ring is configured.
 */
PMCA_EXPORT int pmca_hooks_drain(struct pmca_event *events, uint32_t max_events,
                                 uint64_t until, uint64_t wait_ns,
                                 struct pmca_drain_result *result)
{
    struct ring_slot *slots = ring_slots();
    result->count = 0;
    result->abandoned = 0;
    if (slots == NULL) {
        result->first_position = result->next_position =
            __atomic_load_n(&ring.enqueue_position, __ATOMIC_ACQUIRE);
        result->dropped_total = __atomic_load_n(&ring.dropped_total, __ATOMIC_ACQUIRE);
        return -ENODEV;
    }
    int idle = 0;
    if (!__atomic_compare_exchange_n(&ring.consumer_busy, &idle, 1, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return -EBUSY;
    uint64_t position = __atomic_load_n(&ring.dequeue_position, __ATOMIC_RELAXED);
    uint64_t head = __atomic_load_n(&ring.enqueue_position, __ATOMIC_ACQUIRE);
    if (until > head)
        until = head; /* nothing beyond the claimed positions exists yet */
    uint32_t count = 0;
    result->first_position = position;
    while (position < until && count < max_events) {
        struct ring_slot *slot = &slots[position & ring.mask];
        if (__atomic_load_n(&slot->sequence, __ATOMIC_ACQUIRE) != position + 1) {
            if (count > 0)
                break; /* deliver what we have; the next call waits for this one */
            if (!ring_wait_published(slot, position, wait_ns) && ring_abandon(slot, position)) {
                result->abandoned++;
                position++;
                result->first_position = position;
                __atomic_store_n(&ring.dequeue_position, position, __ATOMIC_RELEASE);
                continue;
            }
        }
        struct pmca_event *out = &events[count++];
        out->address = slot->address;
        out->length = slot->length;
        out->kind = slot->kind;
        out->from_alloc = slot->from_alloc;
        if (out->kind == PMCA_KIND_SHMDT && out->length == 0)
            out->length = UINT64_MAX - out->address;
        __atomic_store_n(&slot->sequence, position + ring.capacity, __ATOMIC_RELEASE);
        position++;
        __atomic_store_n(&ring.dequeue_position, position, __ATOMIC_RELEASE);
    }
    if (result->abandoned)
        __atomic_fetch_add(&ring.incomplete_drains, 1, __ATOMIC_RELAXED);
    result->count = count;
    result->next_position = position;
    result->dropped_total = __atomic_load_n(&ring.dropped_total, __ATOMIC_ACQUIRE);
    __atomic_store_n(&ring.consumer_busy, 0, __ATOMIC_RELEASE);
    return 0;
}

/* Where the next event will be published, and the drop count, in one call:
 * what a drain snapshots when it begins. */
PMCA_EXPORT uint64_t pmca_hooks_snapshot(uint64_t *dropped_total)
{
    uint64_t head = __atomic_load_n(&ring.enqueue_position, __ATOMIC_ACQUIRE);
    if (dropped_total)
        *dropped_total = __atomic_load_n(&ring.dropped_total, __ATOMIC_ACQUIRE);
    return head;
}

/* Where the producer position and the drop counter live, for consumers
 * that poll them without a call (an aligned 64-bit load is atomic on the
 * platforms this library supports). */
PMCA_EXPORT const uint64_t *pmca_hooks_head_address(void) { return &ring.enqueue_position; }

PMCA_EXPORT const uint64_t *pmca_hooks_dropped_address(void) { return &ring.dropped_total; }

/*
 * The listener's sleep (called through ctypes, which releases the GIL).
 * Returns 1 when the ring holds `threshold` unconsumed events (at once, or
 * when the producer that crosses it wakes us), 2 when woken otherwise
 * (pmca_hooks_wake_listeners, a signal), 0 when timeout_ns passed.
 */
PMCA_EXPORT int pmca_hooks_wait(uint64_t threshold, uint64_t timeout_ns)
{
    uint32_t word = __atomic_load_n(&ring.wake_word, __ATOMIC_SEQ_CST);
    uint64_t target = __atomic_load_n(&ring.dequeue_position, __ATOMIC_ACQUIRE) + threshold;
    __atomic_store_n(&ring.wake_at, target, __ATOMIC_SEQ_CST);
    /* Either the producer of target - 1 sees the new wake_at, or we see its
     * claim here (both sides are seq_cst). */
    if (__atomic_load_n(&ring.enqueue_position, __ATOMIC_SEQ_CST) >= target)
        return 1;
    struct timespec timeout = {
        .tv_sec = (time_t)(timeout_ns / 1000000000u),
        .tv_nsec = (long)(timeout_ns % 1000000000u),
    };
    long result = pmca_raw_syscall6(SYS_futex, (long)&ring.wake_word, FUTEX_WAIT_PRIVATE,
                                    word, (long)&timeout, 0, 0);
    if (result == -ETIMEDOUT)
        return __atomic_load_n(&ring.enqueue_position, __ATOMIC_ACQUIRE) >= target ? 1 : 0;
    return __atomic_load_n(&ring.enqueue_position, __ATOMIC_ACQUIRE) >= target ? 1 : 2;
}

/* Wake every thread sleeping in pmca_hooks_wait (to stop a listener). */
PMCA_EXPORT void pmca_hooks_wake_listeners(void)
{
    __atomic_fetch_add(&ring.wake_word, 1, __ATOMIC_SEQ_CST);
    (void)pmca_raw_syscall6(SYS_futex, (long)&ring.wake_word, FUTEX_WAKE_PRIVATE, INT_MAX, 0,
                            0, 0);
}

/* ------------------------------------------------------------------------ */
/* Statistics and switches                                                   */
/* ------------------------------------------------------------------------ */

/* ctypes-mirrored. */
struct pmca_ring_stats {
    uint64_t capacity;
    uint64_t published; /* positions ever claimed */
    uint64_t consumed;  /* consumer position */
    uint64_t dropped;   /* full ring, abandoned slots, fork discards */
    uint64_t abandoned;
    uint64_t incomplete_drains;
    uint64_t producer_wakeups;
    uint64_t late_publishes;
};

PMCA_EXPORT void pmca_hooks_ring_stats(struct pmca_ring_stats *stats)
{
    stats->capacity = ring_slots() ? ring.capacity : 0;
    stats->published = __atomic_load_n(&ring.enqueue_position, __ATOMIC_ACQUIRE);
    stats->consumed = __atomic_load_n(&ring.dequeue_position, __ATOMIC_ACQUIRE);
    stats->dropped = __atomic_load_n(&ring.dropped_total, __ATOMIC_ACQUIRE);
    stats->abandoned = __atomic_load_n(&ring.abandoned_total, __ATOMIC_RELAXED);
    stats->incomplete_drains = __atomic_load_n(&ring.incomplete_drains, __ATOMIC_RELAXED);
    stats->producer_wakeups = __atomic_load_n(&ring.producer_wakeups, __ATOMIC_RELAXED);
    stats->late_publishes = __atomic_load_n(&ring.late_publishes, __ATOMIC_RELAXED);
}

PMCA_EXPORT uint32_t pmca_hooks_ring_stats_size(void)
{
    return (uint32_t)sizeof(struct pmca_ring_stats);
}

PMCA_EXPORT uint32_t pmca_hooks_drain_result_size(void)
{
    return (uint32_t)sizeof(struct pmca_drain_result);
}

PMCA_EXPORT uint64_t pmca_hooks_calls(int symbol)
{
    if (symbol < 0 || symbol >= PMCA_SYM_COUNT)
        return 0;
    return __atomic_load_n(&ring.calls[symbol], __ATOMIC_RELAXED);
}

PMCA_EXPORT void pmca_hooks_set_enabled(int enabled)
{
    __atomic_store_n(&ring.enabled, enabled ? 1 : 0, __ATOMIC_SEQ_CST);
}

PMCA_EXPORT int pmca_hooks_enabled(void) { return __atomic_load_n(&ring.enabled, __ATOMIC_RELAXED); }

/* ------------------------------------------------------------------------ */
/* Test and benchmark entry points                                           */
/* ------------------------------------------------------------------------ */

/* Publish `count` synthetic events (address + i * stride), as another native
 * event source would; returns how many found room. */
PMCA_EXPORT uint64_t pmca_hooks_publish_synthetic(uint32_t kind, uint64_t address,
                                                  uint64_t length, uint64_t count,
                                                  uint64_t stride)
{
    uint64_t published = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t position;
        struct ring_slot *slot = ring_claim(&position);
        if (slot == NULL) {
            ring_count_drop();
            continue;
        }
        ring_fill(slot, kind, address + i * stride, length, 1);
        published += (uint64_t)ring_publish(slot, position);
    }
    return published;
}

/* A producer stalled mid-publish, for tests: claim a slot, wait until
 * *release becomes non-zero, then publish.  Returns 1 when the event was
 * published, 0 when a drain abandoned it meanwhile, -1 when the ring was full. */
PMCA_EXPORT int pmca_hooks_publish_stalled(uint64_t address, uint64_t length,
                                           const int *release)
{
    uint64_t position;
    struct ring_slot *slot = ring_claim(&position);
    if (slot == NULL) {
        ring_count_drop();
        return -1;
    }
    ring_fill(slot, PMCA_KIND_MUNMAP, address, length, 1);
    while (!__atomic_load_n(release, __ATOMIC_ACQUIRE)) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    return ring_publish(slot, position);
}

/* ------------------------------------------------------------------------ */
/* fork                                                                      */
/* ------------------------------------------------------------------------ */

/*
 * pthread_atfork child handler.  Only the forking thread exists in the
 * child: a slot claimed by any other thread would never be published, so the
 * queued events are discarded (counted as dropped: the child's consumers get
 * an overflow) and their slots handed to the next lap.  Positions are not
 * rewound, so subscriptions stamped before the fork keep their meaning.  Only
 * the slots between the two cursors are rewritten (a full scan only if some
 * abandoned slot still waited for its producer), so a fork does not touch
 * the whole ring.
 */
void pmca_ring_reset_after_fork(void)
{
    pthread_mutex_init(&configure_lock, NULL);
    __atomic_store_n(&ring.consumer_busy, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ring.wake_at, UINT64_MAX, __ATOMIC_RELAXED);
    struct ring_slot *slots = ring_slots();
    if (slots == NULL)
        return;
    uint64_t head = __atomic_load_n(&ring.enqueue_position, __ATOMIC_RELAXED);
    uint64_t tail = __atomic_load_n(&ring.dequeue_position, __ATOMIC_RELAXED);
    for (uint64_t position = tail; position < head; position++)
        slots[position & ring.mask].sequence = position + ring.capacity;
    if (__atomic_load_n(&ring.abandoned_outstanding, __ATOMIC_RELAXED) != 0) {
        for (uint64_t position = head; position < head + ring.capacity; position++)
            slots[position & ring.mask].sequence = position;
        ring.abandoned_outstanding = 0;
    }
    if (head != tail)
        __atomic_fetch_add(&ring.dropped_total, head - tail, __ATOMIC_RELAXED);
    __atomic_store_n(&ring.dequeue_position, head, __ATOMIC_RELEASE);
}
