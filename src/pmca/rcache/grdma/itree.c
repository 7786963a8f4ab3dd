/*
 * The grdma registration index: an interval index with its own lock.
 *
 * Intervals [base, bound) with a key, kept sorted by (base, key) in blocks
 * of up to BLOCK entries (see block_t for their layout), with a directory
 * of the blocks: each block's first (base, key) for a binary
 * search, and a max-tree (a segment tree) of each block's largest bound.
 * It is an augmented B-tree of height two, laid out for the covering lookup
 * a transport makes per message: a search in the directory's small arrays,
 * which stay in cache, then a few lines of one block, where a pointer-based
 * balanced tree of 100 k nodes misses the cache at most of its ~20 levels.
 *
 * - "an interval containing [lo, hi)": the last block starting at or before
 *   lo, then (when none there reaches hi) any earlier block whose largest
 *   bound reaches hi, found by one descent of the max-tree: O(log n + BLOCK).
 * - "every interval overlapping [lo, hi)": the max-tree leads only to blocks
 *   holding an answer (plus the last one starting before hi), so the cost
 *   grows with the answers, not with the index: O(log n + BLOCK * (k + 1)).
 * - insert/remove: a move inside one block; a full block splits, an empty
 *   one leaves the directory (O(n / BLOCK) to rebuild the max-tree then).
 *
 * Locking rule (the one libfabric 2.5.1 broke, fixed by d27cfffdc): nothing
 * is allocated or freed with the index's mutex held.  An operation that
 * needs memory (a block for a split, a larger directory) drops the lock,
 * allocates, and starts again; what it frees is freed after unlocking.  An
 * allocator that calls madvise() or munmap() never runs inside the critical
 * section, whatever a release hook does.
 *
 * The lookup entry point also answers "was anything released since the
 * cache last applied the release events?" from the hooks' own counters (see
 * pmca_itree_watch), so that a transport's lookup is one native call.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#define BLOCK 48
/* Every SPACING-th base is repeated in the block's first cache line. */
#define SPACING 8
#define SAMPLES (BLOCK / SPACING)
/* Neighbours this small together are merged after a removal. */
#define MERGE_AT (BLOCK / 2)

/* find_covering's answer when nothing covers (keys are below 2**63). */
#define LOOKUP_NONE (-1)
/* Every this many lookups one takes the full path anyway, so that periodic
 * work hung on the full path (health checks) cannot starve. */
#define FULL_PATH_EVERY 4096

/*
 * Laid out for the lookup: the first cache line holds the count, the largest
 * bound and every SPACING-th base, which name the one line of base[] to
 * read; a bound and its key share a line.  Three lines per block visited.
 */
typedef struct block {
    uint32_t count;
    uint64_t max_bound;
    uint64_t sample[SAMPLES]; /* sample[i] = base[i * SPACING] */
    uint64_t base[BLOCK];
    struct entry {
        uint64_t bound, key;
    } entry[BLOCK];
} __attribute__((aligned(64))) block_t;

typedef struct directory {
    size_t capacity; /* a power of two */
    block_t **blocks;
    uint64_t *first_base, *first_key;
    /* max[capacity + i]: block i's largest bound (0 past the last block);
     * max[i] for 1 <= i < capacity: the larger of max[2i] and max[2i + 1]. */
    uint64_t *max;
} directory_t;

typedef uint32_t (*check_fn)(void);

typedef struct itree {
    pthread_mutex_t lock;
    directory_t *dir;
    size_t blocks, size;
    block_t *spare; /* allocated outside the lock, for the next split */
    int closed;
    /* The release watch: the hooks' producer position and drop counter,
     * their values when the cache last applied every release, and the
     * hooks' overwrite check. */
    const uint64_t *head, *dropped;
    uint64_t seen_head, seen_dropped;
    /* Nonzero while the cache holds delivered releases it has not applied. */
    const uint64_t *pending;
    check_fn check;
    uint32_t overwritten; /* what the check reported, for the caller's full path */
    /* pmca_itree_lookup's answers besides a key: none covers; take the full path. */
    uintptr_t none_answer, slow_answer;
    void (*take_reference)(uintptr_t);
    uint64_t lookups;
    uint64_t page_mask;
} itree_t;

enum { OK = 0, NEED_BLOCK = 1, NEED_DIRECTORY = 2 };

/* -- directory -------------------------------------------------------------- */

static directory_t *directory_new(size_t capacity)
{
    /* blocks, first_base, first_key: capacity words each; max: twice that */
    directory_t *d = malloc(sizeof(*d) + 5 * capacity * sizeof(uint64_t));
    if (d == NULL)
        return NULL;
    uint64_t *storage = (uint64_t *)(d + 1);
    d->capacity = capacity;
    d->blocks = (block_t **)storage;
    d->first_base = storage + capacity;
    d->first_key = storage + 2 * capacity;
    d->max = storage + 3 * capacity;
    memset(d->max, 0, 2 * capacity * sizeof(uint64_t));
    return d;
}

static void max_rebuild(directory_t *d, size_t blocks)
{
    size_t cap = d->capacity;
    for (size_t i = 0; i < cap; i++)
        d->max[cap + i] = i < blocks ? d->blocks[i]->max_bound : 0;
    for (size_t i = cap - 1; i >= 1; i--)
        d->max[i] = d->max[2 * i] > d->max[2 * i + 1] ? d->max[2 * i] : d->max[2 * i + 1];
}

static void max_update(directory_t *d, size_t index)
{
    size_t i = d->capacity + index;
    d->max[i] = d->blocks[index]->max_bound;
    for (i /= 2; i >= 1; i /= 2)
        d->max[i] = d->max[2 * i] > d->max[2 * i + 1] ? d->max[2 * i] : d->max[2 * i + 1];
}

/* Some block among the first `limit` whose largest bound is >= hi, or -1. */
static ptrdiff_t first_reaching(const directory_t *d, size_t node, size_t low, size_t width,
                                size_t limit, uint64_t hi)
{
    if (low >= limit || d->max[node] < hi)
        return -1;
    if (width == 1)
        return (ptrdiff_t)low;
    ptrdiff_t found = first_reaching(d, 2 * node, low, width / 2, limit, hi);
    if (found >= 0)
        return found;
    return first_reaching(d, 2 * node + 1, low + width / 2, width / 2, limit, hi);
}

static void set_first(itree_t *t, size_t index)
{
    block_t *b = t->dir->blocks[index];
    t->dir->first_base[index] = b->base[0];
    t->dir->first_key[index] = b->entry[0].key;
}

static void refresh_samples(block_t *b)
{
    for (uint32_t i = 0; i * SPACING < b->count; i++)
        b->sample[i] = b->base[i * SPACING];
}

static void refresh_max(block_t *b)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < b->count; i++)
        if (b->entry[i].bound > m)
            m = b->entry[i].bound;
    b->max_bound = m;
}

/* -- searching ----------------------------------------------------------------- */

static inline int before(uint64_t base, uint64_t key, uint64_t other_base, uint64_t other_key)
{
    return base < other_base || (base == other_base && key < other_key);
}

/* How many of the sorted values[0..n) are <= x. */
static inline size_t count_at_most(const uint64_t *values, size_t n, uint64_t x)
{
    size_t low = 0, high = n;
    while (low < high) {
        size_t mid = (low + high) / 2;
        if (values[mid] <= x)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/* The block that holds, or would hold, (base, key); blocks >= 1. */
static size_t block_for(const itree_t *t, uint64_t base, uint64_t key)
{
    const directory_t *d = t->dir;
    size_t low = 0, high = t->blocks;
    while (low < high) { /* how many blocks start at or before (base, key) */
        size_t mid = (low + high) / 2;
        if (!before(base, key, d->first_base[mid], d->first_key[mid]))
            low = mid + 1;
        else
            high = mid;
    }
    return low > 0 ? low - 1 : 0;
}

/* Where (base, key) is, or would go, inside b. */
static uint32_t slot_for(const block_t *b, uint64_t base, uint64_t key)
{
    uint32_t low = 0, high = b->count;
    while (low < high) {
        uint32_t mid = (low + high) / 2;
        if (before(b->base[mid], b->entry[mid].key, base, key))
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/* How many of b's bases are <= x: the samples pick one line of base[]. */
static inline uint32_t block_at_most(const block_t *b, uint64_t x)
{
    uint32_t group = 0;
    while (group < SAMPLES && group * SPACING < b->count && b->sample[group] <= x)
        group++;
    if (group == 0)
        return 0;
    uint32_t i = (group - 1) * SPACING + 1, end = group * SPACING;
    if (end > b->count)
        end = b->count;
    while (i < end && b->base[i] <= x)
        i++;
    return i;
}

static int64_t find_covering(const itree_t *t, uint64_t lo, uint64_t hi)
{
    if (t->blocks == 0)
        return LOOKUP_NONE;
    const directory_t *d = t->dir;
    size_t starting = count_at_most(d->first_base, t->blocks, lo);
    if (starting == 0)
        return LOOKUP_NONE;
    /* The last block starting at or before lo: the nearest candidates. */
    const block_t *b = d->blocks[starting - 1];
    if (b->max_bound >= hi) {
        for (uint32_t i = block_at_most(b, lo); i-- > 0;)
            if (b->entry[i].bound >= hi)
                return (int64_t)b->entry[i].key;
    }
    /* Every base in the blocks before it is <= lo: any bound reaching hi does. */
    ptrdiff_t earlier = first_reaching(d, 1, 0, d->capacity, starting - 1, hi);
    if (earlier < 0)
        return LOOKUP_NONE;
    b = d->blocks[earlier];
    for (uint32_t i = 0; i < b->count; i++)
        if (b->entry[i].bound >= hi)
            return (int64_t)b->entry[i].key;
    return LOOKUP_NONE; /* not reached: the max-tree said one is there */
}

typedef struct {
    uint64_t *keys;
    size_t max, count;
} collect_t;

static void collect_block(const block_t *b, uint64_t lo, uint64_t hi, collect_t *out)
{
    for (uint32_t i = 0; i < b->count && b->base[i] < hi; i++) {
        if (b->entry[i].bound > lo) {
            if (out->count < out->max)
                out->keys[out->count] = b->entry[i].key;
            out->count++;
        }
    }
}

/* Blocks among the first `limit` with a bound above lo, in order. */
static void collect(const directory_t *d, size_t node, size_t low, size_t width, size_t limit,
                    uint64_t lo, uint64_t hi, collect_t *out)
{
    if (low >= limit || d->max[node] <= lo)
        return;
    if (width == 1) {
        collect_block(d->blocks[low], lo, hi, out);
        return;
    }
    collect(d, 2 * node, low, width / 2, limit, lo, hi, out);
    collect(d, 2 * node + 1, low + width / 2, width / 2, limit, lo, hi, out);
}

/* -- changing ------------------------------------------------------------------ */

/* Opens a slot for a new block at `index` (capacity permitting). */
static void directory_insert(itree_t *t, size_t index, block_t *b)
{
    directory_t *d = t->dir;
    size_t move = t->blocks - index;
    memmove(d->blocks + index + 1, d->blocks + index, move * sizeof(*d->blocks));
    memmove(d->first_base + index + 1, d->first_base + index, move * sizeof(uint64_t));
    memmove(d->first_key + index + 1, d->first_key + index, move * sizeof(uint64_t));
    d->blocks[index] = b;
    t->blocks++;
    set_first(t, index);
}

/* Takes block `index` out of the directory; returns it. */
static block_t *directory_remove(itree_t *t, size_t index)
{
    directory_t *d = t->dir;
    block_t *b = d->blocks[index];
    size_t move = t->blocks - index - 1;
    memmove(d->blocks + index, d->blocks + index + 1, move * sizeof(*d->blocks));
    memmove(d->first_base + index, d->first_base + index + 1, move * sizeof(uint64_t));
    memmove(d->first_key + index, d->first_key + index + 1, move * sizeof(uint64_t));
    t->blocks--;
    return b;
}

static void block_put(block_t *b, uint32_t slot, uint64_t base, uint64_t bound, uint64_t key)
{
    uint32_t move = b->count - slot;
    memmove(b->base + slot + 1, b->base + slot, move * sizeof(*b->base));
    memmove(b->entry + slot + 1, b->entry + slot, move * sizeof(*b->entry));
    b->base[slot] = base;
    b->entry[slot].bound = bound;
    b->entry[slot].key = key;
    b->count++;
    if (bound > b->max_bound)
        b->max_bound = bound;
    refresh_samples(b);
}

/* Moves b's entries from `from` on to the end of `to`. */
static void block_move_tail(block_t *b, uint32_t from, block_t *to)
{
    uint32_t n = b->count - from;
    memcpy(to->base + to->count, b->base + from, n * sizeof(*b->base));
    memcpy(to->entry + to->count, b->entry + from, n * sizeof(*b->entry));
    to->count += n;
    b->count = from;
    refresh_max(b);
    refresh_max(to);
    refresh_samples(b);
    refresh_samples(to);
}

static int insert_locked(itree_t *t, uint64_t base, uint64_t bound, uint64_t key)
{
    if (t->blocks == 0) {
        if (t->spare == NULL)
            return NEED_BLOCK;
        block_t *b = t->spare;
        t->spare = NULL;
        b->count = 0;
        b->max_bound = 0;
        block_put(b, 0, base, bound, key);
        directory_insert(t, 0, b);
        max_rebuild(t->dir, t->blocks);
        t->size++;
        return OK;
    }
    size_t index = block_for(t, base, key);
    block_t *b = t->dir->blocks[index];
    uint32_t slot = slot_for(b, base, key);
    if (slot < b->count && b->base[slot] == base && b->entry[slot].key == key)
        return -EEXIST;
    if (b->count < BLOCK) {
        block_put(b, slot, base, bound, key);
        if (slot == 0)
            set_first(t, index);
        max_update(t->dir, index);
        t->size++;
        return OK;
    }
    if (t->spare == NULL)
        return NEED_BLOCK;
    if (t->blocks == t->dir->capacity)
        return NEED_DIRECTORY;
    block_t *upper = t->spare;
    t->spare = NULL;
    upper->count = 0;
    block_move_tail(b, BLOCK / 2, upper);
    if (slot <= BLOCK / 2)
        block_put(b, slot, base, bound, key);
    else
        block_put(upper, slot - BLOCK / 2, base, bound, key);
    set_first(t, index);
    directory_insert(t, index + 1, upper);
    max_rebuild(t->dir, t->blocks);
    t->size++;
    return OK;
}

/* Returns 0 or -ENOENT; a block it emptied goes to *freed (or the spare). */
static int remove_locked(itree_t *t, uint64_t base, uint64_t key, block_t **freed)
{
    if (t->blocks == 0)
        return -ENOENT;
    size_t index = block_for(t, base, key);
    block_t *b = t->dir->blocks[index];
    uint32_t slot = slot_for(b, base, key);
    if (slot >= b->count || b->base[slot] != base || b->entry[slot].key != key)
        return -ENOENT;
    uint64_t bound = b->entry[slot].bound;
    uint32_t move = b->count - slot - 1;
    memmove(b->base + slot, b->base + slot + 1, move * sizeof(*b->base));
    memmove(b->entry + slot, b->entry + slot + 1, move * sizeof(*b->entry));
    b->count--;
    refresh_samples(b);
    t->size--;
    block_t *gone = NULL;
    if (b->count == 0) {
        gone = directory_remove(t, index);
    } else if (index + 1 < t->blocks && b->count + t->dir->blocks[index + 1]->count <= MERGE_AT) {
        block_t *next = t->dir->blocks[index + 1];
        block_move_tail(next, 0, b);
        gone = directory_remove(t, index + 1);
        set_first(t, index);
    } else {
        if (bound == b->max_bound)
            refresh_max(b);
        if (slot == 0)
            set_first(t, index);
        max_update(t->dir, index);
    }
    if (gone != NULL) {
        max_rebuild(t->dir, t->blocks);
        if (t->spare == NULL)
            t->spare = gone;
        else
            *freed = gone;
    }
    return 0;
}

/* -- the exported interface ---------------------------------------------------- */

EXPORT itree_t *pmca_itree_create(uint64_t seed)
{
    (void)seed; /* no randomised structure any more: kept for the ABI */
    itree_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->dir = directory_new(1);
    if (t->dir == NULL) {
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->page_mask = (uint64_t)sysconf(_SC_PAGESIZE) - 1;
    return t;
}

static void free_contents(directory_t *d, size_t blocks, block_t *spare)
{
    if (d != NULL) {
        for (size_t i = 0; i < blocks; i++)
            free(d->blocks[i]);
        free(d);
    }
    free(spare);
}

/*
 * Frees every interval; the index answers "take the full path" (lookups)
 * or -EBADF from then on, but its handle stays valid until destroy, so that a
 * thread racing with the close gets an answer instead of a freed lock.
 */
EXPORT void pmca_itree_close(itree_t *t)
{
    pthread_mutex_lock(&t->lock);
    directory_t *d = t->dir;
    size_t blocks = t->blocks;
    block_t *spare = t->spare;
    t->dir = NULL;
    t->spare = NULL;
    t->blocks = t->size = 0;
    t->closed = 1;
    t->head = t->dropped = t->pending = NULL;
    t->check = NULL;
    pthread_mutex_unlock(&t->lock);
    free_contents(d, blocks, spare);
}

EXPORT void pmca_itree_destroy(itree_t *t)
{
    if (t == NULL)
        return;
    pmca_itree_close(t);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* 0, -ENOMEM (nothing changed), -EEXIST (same base and key already there) or -EBADF. */
EXPORT int pmca_itree_insert(itree_t *t, uint64_t base, uint64_t bound, uint64_t key)
{
    block_t *block = NULL;
    directory_t *grown = NULL, *old = NULL;
    int rc;
    for (;;) {
        pthread_mutex_lock(&t->lock);
        if (t->closed) {
            rc = -EBADF;
        } else {
            if (block != NULL && t->spare == NULL) {
                t->spare = block;
                block = NULL;
            }
            if (grown != NULL && grown->capacity > t->dir->capacity) {
                memcpy(grown->blocks, t->dir->blocks, t->blocks * sizeof(*grown->blocks));
                memcpy(grown->first_base, t->dir->first_base, t->blocks * sizeof(uint64_t));
                memcpy(grown->first_key, t->dir->first_key, t->blocks * sizeof(uint64_t));
                old = t->dir;
                t->dir = grown;
                grown = NULL;
                max_rebuild(t->dir, t->blocks);
            }
            rc = insert_locked(t, base, bound, key);
        }
        size_t capacity = t->dir != NULL ? t->dir->capacity : 0;
        pthread_mutex_unlock(&t->lock);
        free(old); /* after the lock, like everything below */
        old = NULL;
        if (rc == NEED_BLOCK && block == NULL) {
            block = aligned_alloc(64, sizeof(*block));
            if (block == NULL) {
                rc = -ENOMEM;
                break;
            }
        } else if (rc == NEED_DIRECTORY) {
            free(grown);
            grown = directory_new(capacity * 2);
            if (grown == NULL) {
                rc = -ENOMEM;
                break;
            }
        } else if (rc != NEED_BLOCK) {
            break;
        }
    }
    free(block);
    free(grown);
    return rc;
}

/* 0, -ENOENT or -EBADF. */
EXPORT int pmca_itree_remove(itree_t *t, uint64_t base, uint64_t key)
{
    block_t *freed = NULL;
    pthread_mutex_lock(&t->lock);
    int rc = t->closed ? -EBADF : remove_locked(t, base, key, &freed);
    pthread_mutex_unlock(&t->lock);
    free(freed); /* after the lock */
    return rc;
}

/*
 * The key of an interval containing [lo, hi), or -1.  The bounds are
 * addresses and typed so: ctypes converts a Python int to a pointer
 * argument in a third of the time it takes for a uint64_t.
 */
EXPORT int64_t pmca_itree_find_covering(itree_t *t, uintptr_t lo, uintptr_t hi)
{
    pthread_mutex_lock(&t->lock);
    int64_t key = find_covering(t, lo, hi);
    pthread_mutex_unlock(&t->lock);
    return key;
}

/*
 * What the cache watches to know, in one load each, whether any release
 * was published, lost or delivered since it last applied every release:
 * the hooks' producer position and drop counter (NULL: no hooks, nothing
 * to watch), the cache's own "releases delivered, not applied" word, and
 * the hooks' overwrite check, run first on every lookup so that a patch
 * someone wrote over is noticed before a registration is trusted.
 */
EXPORT void pmca_itree_watch(itree_t *t, const uint64_t *head, const uint64_t *dropped,
                             const uint64_t *pending, check_fn check)
{
    pthread_mutex_lock(&t->lock);
    if (!t->closed) {
        t->head = head;
        t->dropped = dropped;
        t->pending = pending;
        t->check = check;
        t->seen_head = UINT64_MAX; /* nothing applied yet */
    }
    pthread_mutex_unlock(&t->lock);
}

/* Every release up to these counter values has been applied to the index. */
EXPORT void pmca_itree_synced(itree_t *t, uint64_t head, uint64_t dropped)
{
    pthread_mutex_lock(&t->lock);
    t->seen_head = head;
    t->seen_dropped = dropped;
    pthread_mutex_unlock(&t->lock);
}

/*
 * What pmca_itree_lookup answers when no interval covers, and when the
 * caller must take its full path; and what it calls on any answer before
 * returning it (NULL: nothing), for a caller that receives each answer as
 * a new reference (ctypes' py_object results: give it Py_IncRef).
 */
EXPORT void pmca_itree_answers(itree_t *t, uintptr_t none, uintptr_t slow,
                               void (*take_reference)(uintptr_t))
{
    pthread_mutex_lock(&t->lock);
    t->none_answer = none;
    t->slow_answer = slow;
    t->take_reference = take_reference;
    pthread_mutex_unlock(&t->lock);
}

/* The overwrite check's findings since the last call (0: none), for the
 * caller to react to. */
EXPORT uint32_t pmca_itree_take_overwrites(itree_t *t)
{
    return __atomic_exchange_n(&t->overwritten, 0, __ATOMIC_ACQ_REL);
}

/*
 * The cache's lookup in one call: the key of an interval containing the
 * pages of [address, address + size), or the "none" answer, or the "slow"
 * answer when the caller must take its full path (a release to apply, a bad
 * range, a closed index, an overwrite the check found: see
 * pmca_itree_take_overwrites).  A cache whose keys are its registration
 * objects gets the object itself back, with nothing to convert or look up.
 */
EXPORT uintptr_t pmca_itree_lookup(itree_t *t, uintptr_t address, uintptr_t size)
{
    uint64_t lo = address & ~t->page_mask, hi;
    /* The full path names what is wrong with a range, or handles the rare
     * one at the top of the address space. */
    uintptr_t answer = t->slow_answer;
    if (size == 0 || (address | size) >> 63 != 0 ||
        __builtin_add_overflow(address, size + t->page_mask, &hi))
        goto out;
    hi &= ~t->page_mask;
    check_fn check = __atomic_load_n(&t->check, __ATOMIC_ACQUIRE);
    if (check != NULL) { /* outside the index lock: it takes the hooks' patch lock */
        uint32_t mask = check();
        if (mask != 0) {
            __atomic_fetch_or(&t->overwritten, mask, __ATOMIC_ACQ_REL);
            goto out;
        }
    }
    pthread_mutex_lock(&t->lock);
    if (t->closed || ++t->lookups % FULL_PATH_EVERY == 0)
        answer = t->slow_answer;
    else if (t->pending != NULL && __atomic_load_n(t->pending, __ATOMIC_ACQUIRE) != 0)
        answer = t->slow_answer;
    else if (t->head != NULL && (__atomic_load_n(t->head, __ATOMIC_ACQUIRE) != t->seen_head ||
                                 __atomic_load_n(t->dropped, __ATOMIC_ACQUIRE) != t->seen_dropped))
        answer = t->slow_answer;
    else {
        int64_t key = find_covering(t, lo, hi);
        answer = key >= 0 ? (uintptr_t)key : t->none_answer;
    }
    pthread_mutex_unlock(&t->lock);
out:
    /* The caller's lock (the GIL) keeps a found object alive until here. */
    if (t->take_reference != NULL)
        t->take_reference(answer);
    return answer;
}

/*
 * How many intervals overlap [lo, hi); the first `max` of their keys (in
 * (base, key) order) go to keys[].  A caller that gets more than `max` asks
 * again with a larger array.  (size_t)-1 when closed.
 */
EXPORT size_t pmca_itree_overlapping(itree_t *t, uint64_t lo, uint64_t hi, uint64_t *keys,
                                     size_t max)
{
    collect_t out = {keys, max, 0};
    pthread_mutex_lock(&t->lock);
    if (t->closed) {
        out.count = (size_t)-1;
    } else if (t->blocks > 0 && lo < hi) {
        /* blocks starting before hi: count_at_most(hi - 1) */
        size_t limit = count_at_most(t->dir->first_base, t->blocks, hi - 1);
        collect(t->dir, 1, 0, t->dir->capacity, limit, lo, hi, &out);
    }
    pthread_mutex_unlock(&t->lock);
    return out.count;
}

EXPORT size_t pmca_itree_size(itree_t *t)
{
    pthread_mutex_lock(&t->lock);
    size_t size = t->size;
    pthread_mutex_unlock(&t->lock);
    return size;
}

/* Empties the index; the memory is freed after the lock is dropped. */
EXPORT int pmca_itree_clear(itree_t *t)
{
    directory_t *fresh = directory_new(1);
    if (fresh == NULL)
        return -ENOMEM;
    pthread_mutex_lock(&t->lock);
    if (t->closed) {
        pthread_mutex_unlock(&t->lock);
        free(fresh);
        return -EBADF;
    }
    directory_t *d = t->dir;
    size_t blocks = t->blocks;
    t->dir = fresh;
    t->blocks = t->size = 0;
    pthread_mutex_unlock(&t->lock);
    free_contents(d, blocks, NULL);
    return 0;
}
