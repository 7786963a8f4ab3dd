/*
 * btl/sm transport: memfd segments, one multi-producer receive FIFO per
 * process, fixed-size fragments, futex wake-up and single-copy CMA.
 * (segment.c: segments and peers; queue.c: messages; cma.c: single copy.)
 *
 * Every process owns one segment (a memfd, never a file in /dev/shm, so
 * nothing outlives the processes that map it, even after SIGKILL):
 *
 *   header | receive FIFO (bounded array of cells) | fragment pools
 *
 * A sender takes a free fragment from one of *its own* pools, copies the
 * message into it and pushes the fragment's encoded address (owner id +
 * offset) into the *receiver's* FIFO.  The receiver reads the fragment in
 * place through its mapping of the sender's segment and marks it free when
 * done; the owner finds it free again on its next allocation.  Producers
 * never touch another producer's memory, so a FIFO cell is the only shared
 * word they contend on (one CAS per message), and nothing on the send or
 * receive path takes a lock or makes a system call unless the receiver is
 * asleep.
 *
 * Process-local state (the context) is not thread-safe by itself, and a
 * delivery stays valid only until the next poll: the caller serialises
 * every context operation, and the handling of what it delivered, with one
 * lock (the sm module's, which the bml shares; see _module.py).  The GIL
 * does not: pmca_sm_lane_receive_into and pmca_sm_lane_await_fin run
 * without it and change the context.  pmca_sm_wait and pmca_sm_cma only read fields set at creation
 * and may run concurrently with anything.
 *
 * Peers' memory is not trusted.  Every offset and length a peer's segment
 * holds is checked once, at attach, and copied into the context; what
 * peers write at run time (FIFO entries, fragment lengths) is read once and
 * checked against those copies before use.  A bad entry is that peer's
 * failure (-EBADMSG, the peer named in the delivery), never a wild access.
 * A producer that dies between claiming a FIFO cell and publishing it left
 * its claim in its own header: the reader skips that cell and reports the
 * producer's failure (-EOWNERDEAD) instead of waiting behind it forever.
 *
 * Another process of the same user can write any byte of any segment (it
 * may open the memfd through /proc).  No loop trusts what it reads there:
 * a producer that keeps reading an impossible FIFO cell or position gives
 * up after SM_PATIENCE readings (-EBADMSG: that receiver's segment cannot be
 * trusted), and one that only loses races gives up after SM_CLAIM_TRIES
 * (-EAGAIN, retried under its caller's timeout).  The reader keeps its
 * dequeue position to itself and checks its own FIFO whenever it finds it
 * empty (a compare it pays only then): an impossible sequence or producers'
 * position, or a head cell no producer claims, is -EUCLEAN.  ctx->fault
 * names the field either way.  Segments are memfds sealed against
 * shrinking (F_SEAL_SHRINK, checked at attach), so no process can cut a
 * mapping short under its readers (SIGBUS).
 */
#ifndef PMCA_BTL_SM_H
#define PMCA_BTL_SM_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* A spin-wait hint to the CPU: x86's pause, Arm's yield, nothing elsewhere. */
static inline void sm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

#define SM_MAGIC 0x316d735f61636d70ULL /* "pmca_sm1" little-endian */
#define SM_ABI 2
#define CACHE_LINE 64
#define HEADER_BYTES 4096
#define FRAG_HEADER_BYTES 64
#define POOLS 2
#define OFFSET_BITS 40
#define OFFSET_MASK ((UINT64_C(1) << OFFSET_BITS) - 1)
#define MAX_ID ((UINT32_C(1) << 23) - 1)
/* Consecutive impossible readings of one FIFO cell at one producers'
 * position before a producer calls the receiver's segment corrupt (a real
 * reading is impossible only until the next load makes it consistent). */
#define SM_PATIENCE 4096
/* Attempts at claiming a FIFO cell before a send returns -EAGAIN (each lost
 * one means another producer's message went in). */
#define SM_CLAIM_TRIES (UINT32_C(1) << 16)
/* How long the FIFO's head cell may stay claimed by no attached producer,
 * alive or dead, before the reader calls its own segment corrupt. */
#define SM_ORPHAN_NS INT64_C(2000000000)
/* Values of the header's closing word (only its owner writes it). */
#define SM_OPEN 0
#define SM_CLOSED 1 /* finalized */
#define SM_BROKEN 2 /* found its own segment overwritten: reads nothing any more */
/* The seals every segment's memfd carries (checked at attach). */
#define SM_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

enum frag_state { FRAG_FREE = 0, FRAG_BUSY = 1 };

/* Shared layout.  Both sides of a pair run the same library version (the
 * magic and ABI number are checked at attach). */
struct sm_fifo_cell {
    _Atomic uint64_t sequence;
    uint64_t value; /* encoded fragment address */
};

struct sm_pool_desc {
    uint64_t offset;    /* first fragment, from the segment base */
    uint32_t stride;    /* bytes per fragment, header included */
    uint32_t count;
};

struct sm_header {
    uint64_t magic;
    uint32_t abi;
    uint32_t owner_id;
    uint64_t segment_size;
    int32_t owner_pid;
    uint32_t fifo_capacity; /* power of two */
    uint64_t fifo_offset;
    struct sm_pool_desc pools[POOLS];
    _Alignas(CACHE_LINE) _Atomic uint64_t enqueue_position; /* producers */
    _Alignas(CACHE_LINE) uint64_t dequeue_position; /* unused: the owner keeps it (ctx->dequeue) */
    _Alignas(CACHE_LINE) _Atomic uint32_t wake_sequence;    /* futex word */
    _Atomic uint32_t sleepers;
    _Atomic uint32_t closing; /* SM_CLOSED as the owner closes: senders stop (-ESHUTDOWN) */
    _Atomic uint32_t armed; /* the owner sleeps in select() on its wake pipe */
    /* The FIFO cell this process (as a producer) claimed and has not yet
     * published: position + 1 in receiver claim_target's FIFO, 0 if none. */
    _Alignas(CACHE_LINE) _Atomic uint64_t claim;
    _Atomic uint32_t claim_target;
};

struct sm_frag {
    _Atomic uint32_t state;
    uint32_t source;  /* sender's id */
    uint32_t tag;
    uint32_t pool;
    uint64_t length;  /* payload bytes */
    uint32_t destination; /* the receiver's id (to reclaim from a dead one) */
    uint32_t reserved1;
    uint64_t reserved[4];
};

_Static_assert(sizeof(struct sm_header) <= HEADER_BYTES, "header fits its page");
_Static_assert(sizeof(struct sm_frag) == FRAG_HEADER_BYTES, "fragment header size");

/* Process-local. */
struct sm_peer {
    struct sm_header *segment;
    uint64_t size;
    /* The segment's layout, checked at attach and never read from it again. */
    struct sm_fifo_cell *cells;
    uint64_t mask;
    struct sm_pool_desc pools[POOLS];
    int pidfd;
    int wake_fd; /* the peer's wake pipe, or -1 */
    int32_t pid;
};

struct sm_pool {
    struct sm_pool_desc desc;
    uint32_t cursor;
};

struct sm_ctx {
    struct sm_header *self;
    uint64_t self_size;
    int memfd;
    int wake_pipe[2]; /* [0] we select() on; [1] peers write (published) */
    uint32_t id;
    uint32_t slots; /* peers[] length: ids are < slots */
    struct sm_peer *peers;
    struct sm_pool pools[POOLS];
    struct sm_fifo_cell *cells; /* our FIFO, as we laid it out */
    uint64_t mask;
    const char *problem; /* why the last attach refused a segment */
    uint64_t dequeue;    /* our FIFO's next cell (never read from the segment) */
    uint64_t orphan_position; /* head position seen claimed by no producer... */
    int64_t orphan_since;     /* ...since then (CLOCK_MONOTONIC ns), 0: not seen */
    int corrupt;              /* our own segment was found overwritten (sticky) */
    char fault[200];          /* which field of which segment was impossible */
    struct sm_frag *delivered; /* handed to the caller by the last poll */
    uint32_t delivered_owner;  /* whose segment holds it */
    uint64_t sent, received, fifo_full, no_fragment, wakeups, dropped;
    uint64_t lane_sent, lane_received; /* of sent/received: through a lane (lane.c) */
    uint64_t lane_spin_ns; /* how long a lane receive polls the FIFO (lane.c) */
    int lanes_blocked;     /* the Python side has sends queued (lane.c) */
    int lane_cma;          /* lane receives may read rendezvous payloads with CMA (lane.c) */
    void *landing;         /* where lane receives copy the awaited payload (lane.c) */
    uint64_t landing_size;
    /* Per peer id, SM_COUNTS plain counters (pmca_sm_set_counts): memory the
     * Python side owns and reads in place.  Written only under the lock that
     * serialises every context operation; no atomics. */
    uint64_t *counts;
    uint32_t counts_slots;
};

/* The per-peer counters, in this order (btl pvars; _transport.py mirrors it).
 * Messages and bytes count active messages of btl tags only (0..BTL_TAG_MAX:
 * not the emulated put/get's internal ones), lanes' included; the lane
 * counters say how many of them a lane moved; RDMA counts the rendezvous
 * payloads lanes read with CMA. */
enum {
    SM_MESSAGES_SENT,
    SM_BYTES_SENT,
    SM_MESSAGES_RECEIVED,
    SM_BYTES_RECEIVED,
    SM_LANE_SENT,
    SM_LANE_RECEIVED,
    SM_RDMA_OPERATIONS,
    SM_RDMA_BYTES,
    SM_COUNTS
};
#define BTL_TAG_MAX 0xff

/* Add one message of `bytes` to peer `id`'s counters from index `first`
 * (messages there, bytes next). */
static inline void sm_count(struct sm_ctx *ctx, uint32_t id, int first, uint64_t bytes)
{
    if (ctx->counts && id < ctx->counts_slots) {
        uint64_t *count = ctx->counts + (uint64_t)id * SM_COUNTS + first;
        count[0]++;
        count[1] += bytes;
    }
}

/* Add one to peer `id`'s counter `which`. */
static inline void sm_count_one(struct sm_ctx *ctx, uint32_t id, int which)
{
    if (ctx->counts && id < ctx->counts_slots)
        ctx->counts[(uint64_t)id * SM_COUNTS + which]++;
}

/* Caller-visible structures (ctypes mirrors them). */
struct pmca_sm_config {
    uint32_t fifo_capacity;
    uint32_t eager_size; /* payload bytes of a small fragment */
    uint32_t eager_count;
    uint32_t max_size; /* payload bytes of a large fragment */
    uint32_t max_count;
};

struct pmca_sm_delivery {
    uint32_t source;
    uint32_t tag;
    uint64_t length;
    uint64_t offset; /* payload position in the source's segment */
};

struct pmca_sm_stats {
    uint64_t sent, received, fifo_full, no_fragment, wakeups, dropped, lane_sent, lane_received;
};

/* The message layer's match header (pmca.p2p._protocol.MATCH, "<BBxxIqQ"),
 * which the lanes of lane.c write and read.  Little-endian hosts only, as
 * the rest of the layout. */
struct pmca_match_header {
    uint8_t kind;
    uint8_t flags;
    uint16_t reserved;
    uint32_t sequence;
    int64_t tag;
    uint64_t size;
};
#define MATCH_EAGER 1
#define MATCH_RGET 2
#define MATCH_FIN 4

/* After the match header of an RGET (pmca.p2p._protocol.RGET_BODY, "<QQB"),
 * then one handle per readable route: name length, name, handle length,
 * handle (btl/sm's handle: key, base, size, "<QQQ"). */
struct __attribute__((packed)) pmca_rget_body {
    uint64_t send_id;
    uint64_t address;
    uint8_t handles;
};
struct __attribute__((packed)) pmca_sm_handle {
    uint8_t name_length;
    char name[2]; /* "sm" */
    uint8_t length;
    uint64_t key, base, size;
};
/* pmca.p2p._protocol.FIN_MSG, "<BxxxIQ". */
struct pmca_fin {
    uint8_t kind;
    uint8_t reserved[3];
    uint32_t status;
    uint64_t send_id;
};

_Static_assert(sizeof(struct pmca_match_header) == 24, "match header size");
_Static_assert(sizeof(struct pmca_rget_body) == 17, "rget body size");
_Static_assert(sizeof(struct pmca_sm_handle) == 28, "sm handle size");
_Static_assert(sizeof(struct pmca_fin) == 16, "fin size");

/* A 64-bit value the Python side passes as two C ints (lanes take no argtypes). */
static inline uint64_t join_halves(uint32_t low, uint32_t high)
{
    return ((uint64_t)high << 32) | low;
}

static inline uint64_t encode(uint32_t owner, uint64_t offset)
{
    return ((uint64_t)(owner + 1) << OFFSET_BITS) | offset;
}

static inline int futex(_Atomic uint32_t *word, int op, uint32_t value, const struct timespec *timeout)
{
    /* Not FUTEX_PRIVATE: the word lives in memory shared between processes. */
    return (int)syscall(SYS_futex, (uint32_t *)word, op, value, timeout, NULL, 0);
}

static inline uint64_t round_up(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }
/* queue.c: 1 if a message waits in our FIFO (reads creation-time fields only). */
int pmca_sm_fifo_ready(const struct sm_ctx *ctx);
/* The largest active-message tag a fragment may carry (btl TAG_MAX + sm's internal tags). */
#define SM_TAG_LIMIT 0x1ff
/* queue.c, shared with lane.c (see pmca_sm_send and pmca_sm_poll). */
int sm_send_parts(struct sm_ctx *ctx, uint32_t id, uint32_t tag, const void *head,
                  uint64_t head_length, const void *body, uint64_t body_length);
int sm_take(struct sm_ctx *ctx, struct pmca_sm_delivery *out);
void sm_release_delivered(struct sm_ctx *ctx);
/* segment.c: 1 while peer `id` runs. */
EXPORT int pmca_sm_peer_alive(const struct sm_ctx *ctx, uint32_t id);
/* cma.c: see pmca_sm_cma. */
int64_t pmca_sm_cma(int32_t pid, int write, uint64_t local, uint64_t remote, uint64_t length);
/* lane.c, shared with lane_buffers.c (see there). */
EXPORT int pmca_sm_lane_send(struct sm_ctx *ctx, uint32_t lane, uint32_t sequence, uint32_t tag_low,
                             uint32_t tag_high, const void *body, uint32_t length);
EXPORT int64_t pmca_sm_lane_receive_into(struct sm_ctx *ctx, struct pmca_sm_delivery *out,
                                         uint32_t lane, uint32_t sequence, uint32_t tag_low,
                                         uint32_t tag_high, void *target, uint64_t capacity);
EXPORT int pmca_sm_lane_send_rget(struct sm_ctx *ctx, uint32_t lane, uint32_t sequence,
                                  int64_t tag, uint64_t send_id, uint64_t address, uint64_t size,
                                  const void *handle, uint32_t handle_length);
/* lane_buffers.c: a body above the lane's limit, not sent (a rendezvous). */
#define PMCA_SM_LANE_LARGE 1

#endif
