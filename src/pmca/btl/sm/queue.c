/* btl/sm messages: fragments, the receive FIFO, wake-ups. */
#include "sm.h"

static struct sm_frag *fragment_alloc(struct sm_ctx *ctx, uint64_t bytes)
{
    for (int p = 0; p < POOLS; p++) {
        struct sm_pool *pool = &ctx->pools[p];
        if (bytes + FRAG_HEADER_BYTES > pool->desc.stride)
            continue;
        /* Receivers free fragments roughly in the order we sent them, so
         * the one after the last handed out is nearly always free. */
        for (uint32_t n = 0; n < pool->desc.count; n++) {
            uint32_t i = pool->cursor;
            pool->cursor = i + 1 == pool->desc.count ? 0 : i + 1;
            struct sm_frag *f = (struct sm_frag *)((char *)ctx->self + pool->desc.offset +
                                                   (uint64_t)i * pool->desc.stride);
            if (atomic_load_explicit(&f->state, memory_order_acquire) == FRAG_FREE) {
                atomic_store_explicit(&f->state, FRAG_BUSY, memory_order_relaxed);
                return f;
            }
        }
        /* this pool is exhausted: a larger fragment will do */
    }
    return NULL; /* every pool that fits is busy: wait for receivers */
}

/* Name what was impossible in the receiver's segment (ctx->fault); -EBADMSG. */
static int peer_corrupt(struct sm_ctx *ctx, uint64_t position, uint64_t sequence, uint64_t mask)
{
    atomic_store_explicit(&ctx->self->claim, 0, memory_order_release);
    snprintf(ctx->fault, sizeof ctx->fault,
             "FIFO cell %llu holds sequence %llu, impossible at enqueue_position %llu: the "
             "cell's sequence or enqueue_position was overwritten",
             (unsigned long long)(position & mask), (unsigned long long)sequence,
             (unsigned long long)position);
    return -EBADMSG;
}

/* Claim a cell of `peer`'s FIFO and publish `value` in it; 0, -EAGAIN when
 * it is full (or after SM_CLAIM_TRIES lost races), -EBADMSG when the cell
 * or the position stays impossible (ctx->fault says which).  The claim is
 * announced in our own header first, so that if we die between claiming
 * and publishing, the reader knows whose cell it waits on (see
 * skip_dead_claim).
 *
 * At position p a cell's sequence only grows through p - capacity (claimed
 * a lap ago), p - capacity + 1 (full), p (free), then p + 1 and beyond
 * (taken: p is stale).  A stale p changes at the next load; a reading that
 * stays outside that at the same p was written by someone else. */
static int fifo_claim(struct sm_ctx *ctx, struct sm_peer *peer, uint32_t id, uint64_t value,
                      int publish)
{
    struct sm_header *h = peer->segment, *me = ctx->self;
    struct sm_fifo_cell *cells = peer->cells;
    uint64_t mask = peer->mask;
    int64_t lap = (int64_t)mask + 1;
    uint32_t strange = 0;
    atomic_store_explicit(&me->claim_target, id, memory_order_relaxed);
    uint64_t position = atomic_load_explicit(&h->enqueue_position, memory_order_relaxed);
    for (uint32_t tries = 0; tries < SM_CLAIM_TRIES; tries++) {
        struct sm_fifo_cell *cell = &cells[position & mask];
        uint64_t sequence = atomic_load_explicit(&cell->sequence, memory_order_acquire);
        int64_t difference = (int64_t)(sequence - position);
        if (difference == 0) {
            atomic_store_explicit(&me->claim, position + 1, memory_order_seq_cst);
            if (atomic_compare_exchange_weak_explicit(&h->enqueue_position, &position,
                                                      position + 1, memory_order_seq_cst,
                                                      memory_order_relaxed)) {
                if (!publish)
                    return 0; /* what a producer killed right here leaves behind */
                cell->value = value;
                /* seq_cst orders the publication before the sleeper check.  A
                 * CAS, not a store: a reader that judged us dead (a stale
                 * claim of a dead producer naming the same cell) may have
                 * skipped the cell; then the message goes again. */
                uint64_t expected = position;
                int published = atomic_compare_exchange_strong_explicit(
                    &cell->sequence, &expected, position + 1, memory_order_seq_cst,
                    memory_order_relaxed);
                atomic_store_explicit(&me->claim, 0, memory_order_release);
                if (published)
                    return 0;
                position = atomic_load_explicit(&h->enqueue_position, memory_order_relaxed);
            }
            strange = 0;
            continue;
        }
        if (difference == -lap || difference == 1 - lap) {
            atomic_store_explicit(&me->claim, 0, memory_order_release);
            return -EAGAIN; /* full */
        }
        uint64_t now = atomic_load_explicit(&h->enqueue_position, memory_order_acquire);
        if (now != position) {
            position = now; /* stale: another producer took it */
            strange = 0;
            continue;
        }
        if (++strange >= SM_PATIENCE)
            return peer_corrupt(ctx, position, sequence, mask);
        sm_cpu_relax();
    }
    atomic_store_explicit(&me->claim, 0, memory_order_release);
    return -EAGAIN;
}

static int fifo_push(struct sm_ctx *ctx, struct sm_peer *peer, uint32_t id, uint64_t value)
{
    return fifo_claim(ctx, peer, id, value, 1);
}

/* Claim a cell of peer `id`'s FIFO and leave it unpublished, as a producer
 * killed between the two steps would (the tests' way to be that producer;
 * the context must not send again).  0, -EAGAIN (full) or -ENOTCONN. */
EXPORT int pmca_sm_claim_only(struct sm_ctx *ctx, uint32_t id)
{
    if (!ctx->peers || id >= ctx->slots || !ctx->peers[id].segment)
        return -ENOTCONN;
    return fifo_claim(ctx, &ctx->peers[id], id, 0, 0);
}

int pmca_sm_fifo_ready(const struct sm_ctx *ctx)
{
    uint64_t position = ctx->dequeue;
    struct sm_fifo_cell *cell = &ctx->cells[position & ctx->mask];
    return atomic_load_explicit(&cell->sequence, memory_order_acquire) == position + 1;
}

static void wake(struct sm_ctx *ctx, struct sm_peer *peer);

/* Our own segment holds what no producer can have written: say which
 * field (ctx->fault), stay broken (-EUCLEAN from now on) and say so in our
 * closing word (senders get -ECONNRESET, see pmca_sm_peer_closing). */
static int self_corrupt(struct sm_ctx *ctx, const char *field, uint64_t found, uint64_t expected)
{
    ctx->corrupt = 1;
    /* tell the peers, who may be waiting for an answer we will never read */
    atomic_store_explicit(&ctx->self->closing, SM_BROKEN, memory_order_release);
    /* and wake those already asleep: they look at our closing word only
     * before they sleep, so one waiting for us would wait out its timeout */
    for (uint32_t id = 0; ctx->peers && id < ctx->slots; id++)
        if (id != ctx->id && ctx->peers[id].segment)
            wake(ctx, &ctx->peers[id]);
    snprintf(ctx->fault, sizeof ctx->fault, "%s is %llu where %llu was expected", field,
             (unsigned long long)found, (unsigned long long)expected);
    return -EUCLEAN;
}

/* 1 and *value: the next entry; 0: none yet; -EUCLEAN: the head cell's
 * sequence is neither "empty" (position) nor "published" (position + 1). */
static int fifo_pop(struct sm_ctx *ctx, uint64_t *value)
{
    uint64_t position = ctx->dequeue;
    struct sm_fifo_cell *cell = &ctx->cells[position & ctx->mask];
    uint64_t sequence = atomic_load_explicit(&cell->sequence, memory_order_acquire);
    if (sequence != position + 1) {
        if (sequence == position)
            return 0;
        char field[64];
        snprintf(field, sizeof field, "FIFO cell %llu's sequence",
                 (unsigned long long)(position & ctx->mask));
        return self_corrupt(ctx, field, sequence, position);
    }
    *value = cell->value;
    atomic_store_explicit(&cell->sequence, position + ctx->mask + 1, memory_order_release);
    ctx->dequeue = position + 1;
    return 1;
}

static int64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* Our FIFO's head cell is claimed but not published: if the producer that
 * claimed it has exited, skip the cell and return that producer's id, else
 * UINT32_MAX (a live producer is about to publish it).  Our closing word
 * set, producers' position out of [dequeue, dequeue + capacity], or a head
 * cell that no attached producer has claimed for SM_ORPHAN_NS (checked only
 * at the same position: a new one starts the clock again) is our segment
 * overwritten: *status is then -EUCLEAN. */
static uint32_t skip_dead_claim(struct sm_ctx *ctx, int *status)
{
    struct sm_header *h = ctx->self;
    uint64_t position = ctx->dequeue;
    uint32_t closing = atomic_load_explicit(&h->closing, memory_order_relaxed);
    if (closing) { /* only we set it, as we unmap: senders now leave us */
        *status = self_corrupt(ctx, "closing", closing, 0);
        return UINT32_MAX;
    }
    uint64_t enqueued = atomic_load_explicit(&h->enqueue_position, memory_order_seq_cst);
    if (enqueued == position)
        return UINT32_MAX; /* empty */
    if (enqueued - position > ctx->mask + 1) {
        *status = self_corrupt(ctx, "enqueue_position", enqueued, position);
        return UINT32_MAX;
    }
    int claimed = 0;
    for (uint32_t id = 0; id < ctx->slots; id++) {
        struct sm_header *producer = ctx->peers[id].segment;
        if (!producer)
            continue;
        if (atomic_load_explicit(&producer->claim_target, memory_order_relaxed) != ctx->id ||
            atomic_load_explicit(&producer->claim, memory_order_seq_cst) != position + 1)
            continue;
        claimed = 1;
        if (id == ctx->id || pmca_sm_peer_alive(ctx, id))
            continue;
        struct sm_fifo_cell *cell = &ctx->cells[position & ctx->mask];
        uint64_t expected = position;
        if (!atomic_compare_exchange_strong_explicit(&cell->sequence, &expected,
                                                     position + ctx->mask + 1,
                                                     memory_order_seq_cst, memory_order_relaxed))
            return UINT32_MAX; /* published after all */
        ctx->dequeue = position + 1;
        return id;
    }
    /* No claim names the cell (a producer announces it before it takes the
     * position): published meanwhile, claimed by a producer we have not
     * attached yet, or nobody will ever fill it. */
    if (claimed || pmca_sm_fifo_ready(ctx)) {
        ctx->orphan_since = 0;
        return UINT32_MAX;
    }
    int64_t now = monotonic_ns();
    if (ctx->orphan_since == 0 || ctx->orphan_position != position) {
        ctx->orphan_since = now;
        ctx->orphan_position = position;
    } else if (now - ctx->orphan_since > SM_ORPHAN_NS) {
        *status = self_corrupt(ctx, "enqueue_position (the head cell was never claimed)",
                               enqueued, position);
    }
    return UINT32_MAX;
}

static void wake(struct sm_ctx *ctx, struct sm_peer *peer)
{
    struct sm_header *h = peer->segment;
    if (atomic_load_explicit(&h->sleepers, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&h->wake_sequence, 1, memory_order_seq_cst);
        futex(&h->wake_sequence, FUTEX_WAKE, 1, NULL);
        ctx->wakeups++;
    }
    if (atomic_load_explicit(&h->armed, memory_order_seq_cst) != 0 &&
        atomic_exchange_explicit(&h->armed, 0, memory_order_seq_cst) != 0) {
        char one = 1;
        if (write(peer->wake_fd, &one, 1) < 0) {
            /* EAGAIN: the pipe is full, so the reader wakes anyway */
        }
        ctx->wakeups++;
    }
}

/* Send `head` then `body` (either may be empty) as one message with `tag`
 * to peer `id`.  0 on success; -EAGAIN when no fragment is free or the
 * receiver's FIFO is full (progress and retry); -EMSGSIZE when it exceeds
 * the large fragment; -ENOTCONN for a peer that is not attached, -ESHUTDOWN
 * for one that closed its segment, -ECONNRESET for one that found its own
 * segment overwritten; -EBADMSG when its segment holds what no process
 * running this code writes (ctx->fault says what). */
int sm_send_parts(struct sm_ctx *ctx, uint32_t id, uint32_t tag, const void *head,
                  uint64_t head_length, const void *body, uint64_t body_length)
{
    if (!ctx->peers || id >= ctx->slots || !ctx->peers[id].segment)
        return -ENOTCONN;
    /* The peer closed its segment (it finalized, and may live on): nothing
     * sent to it is read any more.  One load, of the line wake() reads. */
    uint32_t closing = atomic_load_explicit(&ctx->peers[id].segment->closing, memory_order_relaxed);
    if (closing) {
        if (closing == SM_CLOSED)
            return -ESHUTDOWN;
        if (closing == SM_BROKEN)
            return -ECONNRESET;
        snprintf(ctx->fault, sizeof ctx->fault, "closing is %u (0, 1 or 2 expected)", closing);
        return -EBADMSG;
    }
    uint64_t length = head_length + body_length;
    if (length + FRAG_HEADER_BYTES > ctx->pools[POOLS - 1].desc.stride)
        return -EMSGSIZE;
    struct sm_frag *f = fragment_alloc(ctx, length);
    if (!f) {
        ctx->no_fragment++;
        return -EAGAIN;
    }
    f->tag = tag;
    f->destination = id;
    f->length = length;
    char *payload = (char *)(f + 1);
    if (head_length)
        memcpy(payload, head, head_length);
    if (body_length)
        memcpy(payload + head_length, body, body_length);
    int pushed = fifo_push(ctx, &ctx->peers[id], id,
                           encode(ctx->id, (uint64_t)((char *)f - (char *)ctx->self)));
    if (pushed != 0) {
        atomic_store_explicit(&f->state, FRAG_FREE, memory_order_relaxed);
        if (pushed == -EAGAIN)
            ctx->fifo_full++;
        return pushed;
    }
    ctx->sent++;
    if (tag <= BTL_TAG_MAX)
        sm_count(ctx, id, SM_MESSAGES_SENT, length);
    wake(ctx, &ctx->peers[id]);
    return 0;
}

EXPORT int pmca_sm_send(struct sm_ctx *ctx, uint32_t id, uint32_t tag, const void *head,
                        uint64_t head_length, const void *body, uint64_t body_length)
{
    return sm_send_parts(ctx, id, tag, head, head_length, body, body_length);
}

void sm_release_delivered(struct sm_ctx *ctx)
{
    if (ctx->delivered) {
        atomic_store_explicit(&ctx->delivered->state, FRAG_FREE, memory_order_release);
        ctx->delivered = NULL;
    }
}

/* The pool of `peer` whose fragment starts at `offset`, or -1. */
static int fragment_pool(const struct sm_peer *peer, uint64_t offset)
{
    for (int p = 0; p < POOLS; p++) {
        const struct sm_pool_desc *d = &peer->pools[p];
        if (offset >= d->offset && (offset - d->offset) / d->stride < d->count &&
            (offset - d->offset) % d->stride == 0)
            return p;
    }
    return -1;
}

/* Take the next message (the previous delivery already handed back).
 * -EBADMSG: an entry of attached peer out->source names no fragment of it,
 * or a fragment whose length or tag cannot be; -EOWNERDEAD: producer
 * out->source died holding the FIFO's head cell (skipped).  Either way the
 * entry is consumed and the next call goes on with the FIFO.  -EUCLEAN: our
 * own FIFO was overwritten, e.g. an entry names no peer at all (ctx->fault
 * says where); nothing more is taken. */
int sm_take(struct sm_ctx *ctx, struct pmca_sm_delivery *out)
{
    uint64_t value = 0;
    uint32_t owner;
    if (!ctx->peers)
        return 0;
    for (;;) {
        if (ctx->corrupt)
            return -EUCLEAN;
        int popped = fifo_pop(ctx, &value);
        if (popped < 0)
            return popped;
        if (!popped) {
            int status = 0;
            uint32_t dead = skip_dead_claim(ctx, &status);
            if (dead == UINT32_MAX)
                return status;
            memset(out, 0, sizeof *out);
            out->source = dead;
            return -EOWNERDEAD;
        }
        owner = (uint32_t)(value >> OFFSET_BITS) - 1;
        if (owner >= ctx->slots) {
            ctx->dropped++;
            memset(out, 0, sizeof *out);
            out->source = UINT32_MAX;
            /* no producer wrote it: our own FIFO was overwritten */
            return self_corrupt(ctx, "a FIFO cell's value (its owner id + 1)", owner + 1ULL,
                                ctx->slots);
        }
        if (ctx->peers[owner].segment)
            break;
        ctx->dropped++; /* sent before we detached its sender: nowhere to read it */
    }
    const struct sm_peer *peer = &ctx->peers[owner];
    uint64_t offset = value & OFFSET_MASK;
    memset(out, 0, sizeof *out);
    out->source = owner;
    int pool = fragment_pool(peer, offset);
    if (pool < 0) {
        ctx->dropped++;
        return -EBADMSG;
    }
    struct sm_frag *f = (struct sm_frag *)((char *)peer->segment + offset);
    /* read once: the peer may change them while we look */
    uint64_t length = atomic_load_explicit((_Atomic uint64_t *)&f->length, memory_order_relaxed);
    uint32_t tag = atomic_load_explicit((_Atomic uint32_t *)&f->tag, memory_order_relaxed);
    if (length > peer->pools[pool].stride - FRAG_HEADER_BYTES || tag > SM_TAG_LIMIT) {
        ctx->dropped++;
        return -EBADMSG;
    }
    ctx->delivered = f;
    ctx->delivered_owner = owner;
    ctx->received++;
    if (tag <= BTL_TAG_MAX)
        sm_count(ctx, owner, SM_MESSAGES_RECEIVED, length);
    out->tag = tag;
    out->length = length;
    out->offset = offset + FRAG_HEADER_BYTES;
    return 1;
}

/* Hand back the previous delivery, then take the next message: 1 and *out
 * filled, or 0 when the FIFO is empty.  The payload stays valid (in the
 * sender's segment) until the next poll, release or detach.  sm_take's
 * errors otherwise. */
EXPORT int pmca_sm_poll(struct sm_ctx *ctx, struct pmca_sm_delivery *out)
{
    sm_release_delivered(ctx);
    return sm_take(ctx, out);
}

EXPORT void pmca_sm_release(struct sm_ctx *ctx) { sm_release_delivered(ctx); }

/* Peer `id`'s closing word: SM_OPEN, SM_CLOSED, SM_BROKEN or what another
 * process wrote there; SM_OPEN when not attached.  One load (for an idle
 * check: a receiver learns that a peer it waits for will never answer). */
EXPORT uint32_t pmca_sm_peer_closing(const struct sm_ctx *ctx, uint32_t id)
{
    if (!ctx->peers || id >= ctx->slots || id == ctx->id || !ctx->peers[id].segment)
        return SM_OPEN;
    return atomic_load_explicit(&ctx->peers[id].segment->closing, memory_order_relaxed);
}

/* What the last -EBADMSG of a send or -EUCLEAN of a receive found, or "". */
EXPORT const char *pmca_sm_fault(const struct sm_ctx *ctx) { return ctx->fault; }

/* 1 if a message is waiting in our FIFO (cheap; no state changes). */
EXPORT int pmca_sm_pending(const struct sm_ctx *ctx) { return pmca_sm_fifo_ready(ctx); }

/* Block until a message is waiting or `timeout_ns` passes (< 0: forever).
 * Spins `spins` times first, then sleeps on the futex.  Returns 1 if a
 * message is waiting, 0 on timeout.  Safe to call without the GIL: it only
 * reads the FIFO and the shared wake words. */
EXPORT int pmca_sm_wait(struct sm_ctx *ctx, int64_t timeout_ns, uint32_t spins)
{
    struct sm_header *h = ctx->self;
    for (uint32_t i = 0; i < spins; i++) {
        if (pmca_sm_fifo_ready(ctx))
            return 1;
        sm_cpu_relax();
    }
    struct timespec deadline = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (timeout_ns >= 0) {
        deadline.tv_sec += timeout_ns / 1000000000;
        deadline.tv_nsec += timeout_ns % 1000000000;
        if (deadline.tv_nsec >= 1000000000) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000;
        }
    }
    for (;;) {
        uint32_t sequence = atomic_load_explicit(&h->wake_sequence, memory_order_seq_cst);
        atomic_fetch_add_explicit(&h->sleepers, 1, memory_order_seq_cst);
        if (pmca_sm_fifo_ready(ctx)) {
            atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_seq_cst);
            return 1;
        }
        struct timespec left = {0, 0};
        const struct timespec *limit = NULL;
        if (timeout_ns >= 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            int64_t ns = (int64_t)(deadline.tv_sec - now.tv_sec) * 1000000000 +
                         (deadline.tv_nsec - now.tv_nsec);
            if (ns <= 0) {
                atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_seq_cst);
                return pmca_sm_fifo_ready(ctx);
            }
            left.tv_sec = ns / 1000000000;
            left.tv_nsec = ns % 1000000000;
            limit = &left;
        }
        futex(&h->wake_sequence, FUTEX_WAIT, sequence, limit);
        atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_seq_cst);
        if (pmca_sm_fifo_ready(ctx))
            return 1;
    }
}

/* About to sleep in select() on our wake pipe: ask senders to write it.
 * Returns 1 (and makes the wake pipe readable) if a message already waits. */
static void drain_wake_pipe(struct sm_ctx *ctx)
{
    char bytes[64];
    while (read(ctx->wake_pipe[0], bytes, sizeof bytes) > 0) {
    }
}

EXPORT int pmca_sm_arm(struct sm_ctx *ctx)
{
    drain_wake_pipe(ctx); /* a late write from an earlier wake-up */
    atomic_store_explicit(&ctx->self->armed, 1, memory_order_seq_cst);
    if (!pmca_sm_fifo_ready(ctx))
        return 0;
    if (atomic_exchange_explicit(&ctx->self->armed, 0, memory_order_seq_cst)) {
        char one = 1;
        if (write(ctx->wake_pipe[1], &one, 1) < 0) {
            /* full: readable anyway */
        }
    }
    return 1;
}

/* Awake again: stop senders from writing the wake pipe and empty it. */
EXPORT void pmca_sm_disarm(struct sm_ctx *ctx)
{
    atomic_store_explicit(&ctx->self->armed, 0, memory_order_seq_cst);
    drain_wake_pipe(ctx);
}

/* Wake our own waiter (another thread of this process), e.g. at close. */
EXPORT void pmca_sm_interrupt(struct sm_ctx *ctx)
{
    atomic_fetch_add_explicit(&ctx->self->wake_sequence, 1, memory_order_seq_cst);
    futex(&ctx->self->wake_sequence, FUTEX_WAKE, INT32_MAX, NULL);
}

/* Count per peer into `counts` (SM_COUNTS words for each of `slots` ids,
 * zeroed by the caller, who keeps them alive as long as the context), or
 * stop counting (NULL). */
EXPORT void pmca_sm_set_counts(struct sm_ctx *ctx, uint64_t *counts, uint32_t slots)
{
    ctx->counts = counts;
    ctx->counts_slots = counts ? slots : 0;
}

EXPORT uint32_t pmca_sm_count_kinds(void) { return SM_COUNTS; }

EXPORT void pmca_sm_stats(const struct sm_ctx *ctx, struct pmca_sm_stats *out)
{
    out->sent = ctx->sent;
    out->received = ctx->received;
    out->fifo_full = ctx->fifo_full;
    out->no_fragment = ctx->no_fragment;
    out->wakeups = ctx->wakeups;
    out->dropped = ctx->dropped;
    out->lane_sent = ctx->lane_sent;
    out->lane_received = ctx->lane_received;
}
