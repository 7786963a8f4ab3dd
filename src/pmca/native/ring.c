/*
 * The release-event ring: a static, bounded, lock-free MPMC queue (one
 * sequence number per slot, after Dmitry Vyukov's design), plus the eventfd
 * doorbell and the fork reset.
 *
 * Producers are the hooks.  They may run in any thread, inside malloc with
 * arena locks held, inside signal handlers, or in a forked child, so the
 * producer path uses nothing but atomics and, at most, one raw write(2).
 */
#include "hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RING_CAPACITY 8192u /* power of two */
#define RING_MASK (RING_CAPACITY - 1u)
#define CACHELINE 64

struct ring_slot {
    uint64_t sequence; /* accessed atomically */
    uint64_t address;
    uint64_t length;
    uint32_t kind;
    uint32_t from_alloc;
};

/* Producer and consumer cursors on separate cache lines: every hooked call
 * touches the producer one, so keep it from bouncing with the consumer. */
static struct {
    _Alignas(CACHELINE) uint64_t enqueue_position;
    _Alignas(CACHELINE) uint64_t dequeue_position;
    _Alignas(CACHELINE) uint64_t dropped_total;
    uint64_t dropped_unreported;
    _Alignas(CACHELINE) int enabled;
    int armed;
    int doorbell_fd;
    _Alignas(CACHELINE) uint64_t calls[PMCA_SYM_COUNT];
} ring_state = {.enabled = 1, .armed = 1, .doorbell_fd = -1};

static struct ring_slot ring_slots[RING_CAPACITY];

int pmca_symbol_active[PMCA_SYM_COUNT];

static void ring_reset_slots(void)
{
    for (uint32_t i = 0; i < RING_CAPACITY; i++)
        __atomic_store_n(&ring_slots[i].sequence, i, __ATOMIC_RELAXED);
    __atomic_store_n(&ring_state.enqueue_position, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ring_state.dequeue_position, 0, __ATOMIC_RELEASE);
}

/* Runs before any hook can be installed (library constructor), so the slots
 * are valid from the first event on. */
__attribute__((constructor)) static void ring_construct(void) { ring_reset_slots(); }

static void ring_doorbell(void)
{
    if (!__atomic_load_n(&ring_state.armed, __ATOMIC_RELAXED))
        return;
    if (!__atomic_exchange_n(&ring_state.armed, 0, __ATOMIC_ACQ_REL))
        return;
    int fd = __atomic_load_n(&ring_state.doorbell_fd, __ATOMIC_ACQUIRE);
    if (fd < 0)
        return;
    uint64_t one = 1;
    /* Raw syscall: the hook must leave errno exactly as the real call left it. */
    (void)pmca_raw_syscall6(SYS_write, fd, (long)&one, sizeof one, 0, 0, 0);
}

static int ring_push(uint32_t kind, uintptr_t address, uintptr_t length, uint32_t from_alloc)
{
    uint64_t position = __atomic_load_n(&ring_state.enqueue_position, __ATOMIC_RELAXED);
    struct ring_slot *slot;
    for (;;) {
        slot = &ring_slots[position & RING_MASK];
        uint64_t sequence = __atomic_load_n(&slot->sequence, __ATOMIC_ACQUIRE);
        int64_t distance = (int64_t)(sequence - position);
        if (distance == 0) {
            if (__atomic_compare_exchange_n(&ring_state.enqueue_position, &position,
                                            position + 1, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                break;
        } else if (distance < 0) {
            return 0; /* full: the slot still holds an unconsumed event */
        } else {
            position = __atomic_load_n(&ring_state.enqueue_position, __ATOMIC_RELAXED);
        }
    }
    slot->address = address;
    slot->length = length;
    slot->kind = kind;
    slot->from_alloc = from_alloc;
    __atomic_store_n(&slot->sequence, position + 1, __ATOMIC_RELEASE);
    return 1;
}

void pmca_ring_publish(uint32_t kind, uintptr_t address, uintptr_t length, uint32_t from_alloc)
{
    if (!__atomic_load_n(&ring_state.enabled, __ATOMIC_RELAXED))
        return;
    if (!ring_push(kind, address, length, from_alloc)) {
        __atomic_fetch_add(&ring_state.dropped_total, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&ring_state.dropped_unreported, 1, __ATOMIC_RELEASE);
    }
    ring_doorbell();
}

void pmca_ring_record(int symbol, uint32_t kind, uintptr_t address, uintptr_t length,
                      uint32_t from_alloc)
{
    if (!__atomic_load_n(&pmca_symbol_active[symbol], __ATOMIC_RELAXED))
        return;
    pmca_ring_publish(kind, address, length, from_alloc);
}

void pmca_ring_report_loss(void)
{
    __atomic_fetch_add(&ring_state.dropped_total, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ring_state.dropped_unreported, 1, __ATOMIC_RELEASE);
    ring_doorbell();
}

/* Every hook entry is counted, releases or not, so a self-test can tell
 * "hook reached" from "hook bypassed" with calls that release nothing. */
void pmca_ring_count_call(int symbol)
{
    __atomic_fetch_add(&ring_state.calls[symbol], 1, __ATOMIC_RELAXED);
}

/* A producer that claimed a slot is a few instructions from publishing it;
 * wait for it briefly, then give up and let the next drain pick it up (its
 * doorbell will ring because the consumer re-armed before draining). */
static int ring_wait_published(struct ring_slot *slot, uint64_t position)
{
    for (int spin = 0; spin < 2000; spin++) {
        if (__atomic_load_n(&slot->sequence, __ATOMIC_ACQUIRE) == position + 1)
            return 1;
        if (spin < 1000) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();
        }
    }
    return 0;
}

static int ring_pop(struct pmca_event *out)
{
    uint64_t position = __atomic_load_n(&ring_state.dequeue_position, __ATOMIC_RELAXED);
    struct ring_slot *slot;
    for (;;) {
        slot = &ring_slots[position & RING_MASK];
        uint64_t sequence = __atomic_load_n(&slot->sequence, __ATOMIC_ACQUIRE);
        int64_t distance = (int64_t)(sequence - (position + 1));
        if (distance == 0) {
            if (__atomic_compare_exchange_n(&ring_state.dequeue_position, &position,
                                            position + 1, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                break;
        } else if (distance < 0) {
            uint64_t head = __atomic_load_n(&ring_state.enqueue_position, __ATOMIC_ACQUIRE);
            if (head == position || !ring_wait_published(slot, position))
                return 0;
        } else {
            position = __atomic_load_n(&ring_state.dequeue_position, __ATOMIC_RELAXED);
        }
    }
    out->address = slot->address;
    out->length = slot->length;
    out->kind = slot->kind;
    out->from_alloc = slot->from_alloc;
    __atomic_store_n(&slot->sequence, position + RING_CAPACITY, __ATOMIC_RELEASE);
    return 1;
}

/*
 * Copy up to max_events events into events[]; returns how many.  *dropped
 * (if not NULL) receives, and clears, the number of events lost since the
 * previous drain: non-zero means the consumer must treat all memory as
 * released ("overflow").
 */
PMCA_EXPORT size_t pmca_hooks_drain(struct pmca_event *events, size_t max_events,
                                    uint64_t *dropped)
{
    size_t count = 0;
    while (count < max_events && ring_pop(&events[count]))
        count++;
    if (dropped)
        *dropped = __atomic_exchange_n(&ring_state.dropped_unreported, 0, __ATOMIC_ACQ_REL);
    return count;
}

PMCA_EXPORT uint64_t pmca_hooks_dropped_total(void)
{
    return __atomic_load_n(&ring_state.dropped_total, __ATOMIC_RELAXED);
}

PMCA_EXPORT uint64_t pmca_hooks_pending(void)
{
    uint64_t head = __atomic_load_n(&ring_state.enqueue_position, __ATOMIC_ACQUIRE);
    uint64_t tail = __atomic_load_n(&ring_state.dequeue_position, __ATOMIC_ACQUIRE);
    return head - tail;
}

PMCA_EXPORT uint32_t pmca_hooks_capacity(void) { return RING_CAPACITY; }

PMCA_EXPORT uint64_t pmca_hooks_calls(int symbol)
{
    if (symbol < 0 || symbol >= PMCA_SYM_COUNT)
        return 0;
    return __atomic_load_n(&ring_state.calls[symbol], __ATOMIC_RELAXED);
}

PMCA_EXPORT void pmca_hooks_set_enabled(int enabled)
{
    __atomic_store_n(&ring_state.enabled, enabled ? 1 : 0, __ATOMIC_SEQ_CST);
}

PMCA_EXPORT int pmca_hooks_enabled(void)
{
    return __atomic_load_n(&ring_state.enabled, __ATOMIC_RELAXED);
}

PMCA_EXPORT int pmca_hooks_eventfd(void)
{
    return __atomic_load_n(&ring_state.doorbell_fd, __ATOMIC_ACQUIRE);
}

/* The consumer re-arms *before* draining; any event published after that
 * rings the doorbell again, so a wakeup is never lost. */
PMCA_EXPORT void pmca_hooks_rearm(void)
{
    __atomic_store_n(&ring_state.armed, 1, __ATOMIC_SEQ_CST);
}

int pmca_ring_init_doorbell(void)
{
    if (__atomic_load_n(&ring_state.doorbell_fd, __ATOMIC_ACQUIRE) >= 0)
        return 0;
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    __atomic_store_n(&ring_state.doorbell_fd, fd, __ATOMIC_RELEASE);
    return 0;
}

/*
 * pthread_atfork child handler.  Only the forking thread exists in the
 * child: a slot claimed by any other thread would never be published and
 * would stall the consumer forever, so the ring starts over.  Events that
 * were still queued are lost to the child, which is reported as dropped so
 * the child's consumers invalidate everything.  The eventfd is shared with
 * the parent after fork; a fresh one is put at the same descriptor number so
 * handles cached by the child stay valid and the processes stop waking
 * each other.
 */
void pmca_ring_reset_after_fork(void)
{
    uint64_t head = __atomic_load_n(&ring_state.enqueue_position, __ATOMIC_RELAXED);
    uint64_t tail = __atomic_load_n(&ring_state.dequeue_position, __ATOMIC_RELAXED);
    ring_reset_slots();
    if (head != tail) {
        __atomic_fetch_add(&ring_state.dropped_unreported, head - tail, __ATOMIC_RELAXED);
        __atomic_fetch_add(&ring_state.dropped_total, head - tail, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&ring_state.armed, 1, __ATOMIC_RELAXED);

    int old_fd = ring_state.doorbell_fd;
    if (old_fd < 0)
        return;
    int saved_errno = errno;
    int fresh = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fresh >= 0) {
        if (dup3(fresh, old_fd, O_CLOEXEC) >= 0)
            close(fresh);
        else
            __atomic_store_n(&ring_state.doorbell_fd, fresh, __ATOMIC_RELEASE);
    }
    errno = saved_errno;
}
